"""The session fixture ``mcpb_servers``: real .mcpb test servers (node, python, binary), built once.

The archives and how they are built: tests/fixtures/mcpb_servers/build.py. The first test that asks
builds what the cache lacks (a minute or two, cold), under a lock that parallel workers share.
``host_launch`` starts an extracted one as an MCP host would, for the official client's
``Client(host_launch(...))``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import pytest
from mcp import StdioServerParameters

from bundle_operator.mcpb.extract import Extracted
from bundle_operator.mcpb.launch import substitute_variables
from tests.fixtures.mcpb_servers.build import McpbServers, ServerArchive, ensure, node_binary

__all__ = ["McpbServers", "ServerArchive", "host_launch", "mcpb_servers"]


@pytest.fixture(scope="session")
def mcpb_servers() -> McpbServers:
    """Paths and sha256 of the node, python, binary and foreign-architecture binary archives."""
    return ensure()


def host_launch(extracted: Extracted, user_config: Mapping[str, str]) -> StdioServerParameters:
    """The manifest's launch with ``${__dirname}`` and ``${user_config.KEY}`` filled in, cwd the folder.

    node runs on the cached Node, python on this Python (which has ``mcp``), a binary as it is.
    """
    config = extracted.inspection.launch
    assert config is not None, "only an accepted archive has a launch"
    folder = str(extracted.path)
    values = {"__dirname": folder, **{f"user_config.{k}": v for k, v in user_config.items()}}

    def fill(text: str) -> str:
        return substitute_variables(text, lambda name: values[name])

    runtimes = {"node": str(node_binary()), "python": sys.executable, "python3": sys.executable}
    return StdioServerParameters(
        command=runtimes.get(config.command) or fill(config.command),
        args=[fill(a) for a in config.args],
        env={key: fill(value) for key, value in config.env.items()},
        cwd=folder,
    )
