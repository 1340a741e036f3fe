"""The agent platform API v1: typed models, the client protocol, the httpx client and the reference server.

The engine depends on ``protocol.PlatformAPI`` and the models only; ``client.PlatformClient``
implements it over HTTP and ``reference`` is the server that tests and local runs talk to.
"""
