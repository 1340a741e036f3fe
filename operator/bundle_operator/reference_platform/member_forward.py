"""A thin pass-through for ``tools/call`` to members that speak the 2026-07-28 wire.

On that wire every request is a self-contained JSON-RPC POST, so the gateway can hand a call to
the member without a client session in between: one POST on a pooled connection, and the
member's result passed back as the member wrote it (the handler returns the raw result, which
the SDK's server sends on). Measured on loopback, this takes most of the gateway's cost per call
out (bench/gateway.py). Everything else (discovery, prompts, resources, handshake-era members)
goes through the SDK's client.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH, INTERNAL_ERROR

from bundle_operator.reference_platform.gateway_spans import member_headers, member_meta
from bundle_operator.reference_platform.member_link import MEMBER_TIMEOUT, MemberLink

_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
_CLIENT_INFO = {"name": "bundle-operator-gateway", "version": "1"}
# Seconds an idle pooled connection to a member is kept: below the 5 s common servers keep one.
MEMBER_KEEPALIVE = 4.0


def as_written(result: types.Result) -> dict[str, Any]:
    """A result the SDK's client read, with only the fields the member wrote (DESIGN.md §9.6).

    The model fills in defaults (``isError: false``) that a dump would send on as if the member had
    said them. ``resultType`` is the 2026-07-28 wire's envelope, not the member's content: a
    handshake-era member never writes it, and a client on that wire needs it.
    """
    written = result.model_dump(by_alias=True, mode="json", exclude_unset=True)
    kind = "input_required" if isinstance(result, types.InputRequiredResult) else "complete"
    written.setdefault("resultType", kind)
    return without_identity(written)


def without_identity(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without the member's server identity stamp: the gateway's server stamps its own."""
    stamp = result.get("_meta")
    if isinstance(stamp, dict) and _SERVER_INFO in stamp:
        rest = {k: v for k, v in stamp.items() if k != _SERVER_INFO}
        if rest:
            result["_meta"] = rest
        else:
            del result["_meta"]
    return result


# Told of each notification a member sends on a call's stream (a JSON-RPC message as read).
OnMessage = Callable[[dict[str, Any]], Awaitable[None]]


class HeaderMismatch(Exception):
    """The member wants the call sent with headers only its SDK client derives; nothing ran."""


class MemberForwarder:
    """POSTs calls to members over one pooled aiohttp session."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=MEMBER_TIMEOUT * 10, sock_connect=MEMBER_TIMEOUT),
                # An idle connection is dropped before the member's own keep-alive ends (uvicorn
                # and Node close after 5 s): a call sent on a socket the member is closing fails
                # with ServerDisconnectedError, and a tools/call is not safe to send again.
                connector=aiohttp.TCPConnector(limit=256, keepalive_timeout=MEMBER_KEEPALIVE),
            )
        return self._session

    async def call_tool(
        self,
        link: MemberLink,
        version: str,
        tool: str,
        arguments: dict[str, Any],
        carried: Mapping[str, Any] | None = None,
        on_message: OnMessage | None = None,
    ) -> dict[str, Any]:
        """The member's result of ``tools/call``, unchanged but for its server identity stamp.

        ``carried`` (gateway_direct.DirectCall) brings the client's declared capabilities, its
        progress token and log level, and its answers to a member's input requests; an
        input-required result comes back as written. Notifications the member sends on the call's
        stream before its answer (progress, log messages) go to ``on_message``. The member is sent
        the current span's trace context in ``_meta`` and as headers (gateway_spans.py).
        """
        carried = carried or {}
        request_id = next(self._ids)
        meta = {
            **member_meta(carried.get("meta")),
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": _CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": carried.get("capabilities") or {},
        }
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta}
        params.update({k: v for k, v in carried.items() if k in ("inputResponses", "requestState")})
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        headers = {
            **dict(link.headers),
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": version,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        member_headers(headers)
        async with self._http().post(link.url, data=json.dumps(body), headers=headers) as response:
            kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if kind == "text/event-stream":
                message = await _from_stream(response, request_id, on_message)
            elif kind == "application/json":
                message = await response.json(content_type=None)
            else:
                raise MCPError(
                    code=INTERNAL_ERROR, message=f"the member answered HTTP {response.status} without JSON"
                )
        error = message.get("error") if isinstance(message, dict) else None
        if isinstance(error, dict):
            if error.get("code") == HEADER_MISMATCH:
                raise HeaderMismatch()
            raise MCPError(
                code=int(error.get("code", INTERNAL_ERROR)),
                message=str(error.get("message", "")),
                data=error.get("data"),
            )
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict):
            raise MCPError(code=INTERNAL_ERROR, message="the member answered without a result")
        return without_identity(result)

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._session is not None:
            await self._session.close()


async def _from_stream(
    response: aiohttp.ClientResponse, request_id: int, on_message: OnMessage | None
) -> dict[str, Any]:
    """The answer to ``request_id`` on an SSE response; notifications before it go to ``on_message``."""
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line == "" and data:
            message = json.loads("\n".join(data))
            data = []
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
            if on_message is not None and isinstance(message, dict) and "id" not in message:
                await on_message(message)
    raise MCPError(code=INTERNAL_ERROR, message="the member's stream ended without an answer")
