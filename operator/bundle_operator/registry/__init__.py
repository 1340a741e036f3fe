"""The MCP Registry (API v0.1) as a source of .mcpb archives: names, records, and a guarded client.

Nothing here knows Kubernetes: the operator (``sources/registry_source.py``) and ``bundlectl registry``
share it, so a record reads the same in a Bundle's status and on a terminal.
"""
