"""The session fixture ``mcpb_servers``: real .mcpb test servers (node, python, binary), built once.

The archives and how they are built: tests/fixtures/mcpb_servers/build.py. The first test that asks
builds what the cache lacks (a minute at most, cold), under a lock that parallel workers share.
"""

from __future__ import annotations

import pytest

from tests.fixtures.mcpb_servers.build import McpbServers, ServerArchive, ensure

__all__ = ["McpbServers", "ServerArchive", "mcpb_servers"]


@pytest.fixture(scope="session")
def mcpb_servers() -> McpbServers:
    """Paths and sha256 of the node, python, binary and foreign-architecture binary archives."""
    return ensure()
