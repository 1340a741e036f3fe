"""Where the gateway reaches the instances the platform runs: its own listener, on loopback.

The address is known once the listener is bound; the token is made per platform process and
is never written anywhere, so only this process can use the bridge (stdio_bridge.py).
"""

from __future__ import annotations

import secrets
from typing import Any, NamedTuple

from mcp.shared.exceptions import MCPError

PATH = "/_internal/stdio/{workspace}/{instance}/mcp"
ROUTE_NAME = "stdio-bridge"
# An MCP error's ``data`` key saying the instance's process could not serve (a member's health).
UNAVAILABLE = "bundle-operator.dev/instanceUnavailable"
# Beside it, the instance's health state (a crashed one starts again on the next use).
STATE = "bundle-operator.dev/instanceState"


class Loopback:
    """This process's bridge address and token."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(32)
        self.base: str | None = None

    def bind(self, host: str, port: int) -> None:
        """Remember where the platform listens, as a loopback address when it listens on every address."""
        if host in ("", "0.0.0.0", "127.0.0.1", "localhost"):
            host = "127.0.0.1"
        elif host in ("::", "::1"):
            host = "[::1]"
        elif ":" in host:
            host = f"[{host}]"
        self.base = f"http://{host}:{port}"

    def url(self, workspace: str, instance_id: str) -> str | None:
        """The bridge URL of an instance, or None before the platform listens."""
        if self.base is None:
            return None
        return self.base + PATH.format(workspace=workspace, instance=instance_id)


LOOPBACK = Loopback()


class Unavailable(NamedTuple):
    """Why an instance the platform runs could not serve a request."""

    state: str
    reason: str


def unavailable_of(exc: MCPError) -> Unavailable | None:
    """What the bridge said when ``exc`` is its error for an instance that could not serve."""
    data: Any = exc.data
    if isinstance(data, dict) and isinstance(data.get(UNAVAILABLE), str):
        return Unavailable(str(data.get(STATE) or "failed"), str(data[UNAVAILABLE]))
    return None
