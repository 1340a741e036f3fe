"""The agent platform API v1 as a client sees it: typed models, the client protocol and the httpx client.

The engine depends on ``protocol.PlatformAPI`` and the models only; ``client.PlatformClient``
implements it over HTTP. The server that tests and local runs talk to is ``reference_platform``,
a separate package.
"""
