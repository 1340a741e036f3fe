"""Serve an ASGI application from an aiohttp handler.

The MCP SDK's streamable-HTTP server is an ASGI app; the reference platform is aiohttp. The
gateway's endpoints must answer on the API's own listener, so each request is handed to the SDK
through this adapter instead of a second server. It streams both ways: request bodies as they
arrive, and responses (server-sent events included) chunk by chunk until the app finishes or the
client goes away.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

_CHUNK = 64 * 1024


def _scope(request: web.Request, state: dict[str, Any]) -> dict[str, Any]:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    host = request.url.host or ""
    port = request.url.port or (443 if request.secure else 80)
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"),
        "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.raw_headers],
        "client": (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) and len(peer) >= 2 else None,
        "server": (host, port),
        "state": state,
    }


async def serve_asgi(
    app: AsgiApp, request: web.Request, *, body: bytes | None = None, state: dict[str, Any] | None = None
) -> web.StreamResponse:
    """Run ``app`` for ``request`` and stream what it sends back as the aiohttp response.

    ``body`` is the request's body when the caller has read it already; ``state`` becomes the ASGI
    scope's ``state`` (what the app sees as ``request.state``).
    """
    finished = asyncio.Event()
    response: web.StreamResponse | None = None
    body_done = False

    async def receive() -> Message:
        nonlocal body_done
        if not body_done and body is not None:
            body_done = True
            return {"type": "http.request", "body": body, "more_body": False}
        if not body_done:
            chunk = await request.content.read(_CHUNK)
            body_done = request.content.at_eof()
            return {"type": "http.request", "body": chunk, "more_body": not body_done}
        # After the body, an app waiting here is watching for the client to leave.
        while not finished.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            try:
                await asyncio.wait_for(finished.wait(), timeout=1.0)
            except TimeoutError:
                continue
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal response
        kind = message["type"]
        if kind == "http.response.start":
            response = web.StreamResponse(status=int(message["status"]))
            for name, value in message.get("headers", []):
                key = name.decode("latin-1") if isinstance(name, bytes) else str(name)
                text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
                if key.lower() in ("content-length", "transfer-encoding", "connection"):
                    continue  # aiohttp frames the body itself
                response.headers.add(key, text)
            await response.prepare(request)
        elif kind == "http.response.body":
            if response is None:
                raise RuntimeError("the ASGI app sent a body before starting the response")
            if finished.is_set():
                return
            body = message.get("body", b"")
            try:
                if body:
                    await response.write(body)
                if not message.get("more_body", False):
                    await response.write_eof()
                    finished.set()
            except (ConnectionResetError, RuntimeError):
                # The client went away mid-stream; tell the app through receive().
                finished.set()

    try:
        await app(_scope(request, state if state is not None else {}), receive, send)
    finally:
        finished.set()
    if response is None:
        return web.Response(status=500, text="the MCP handler sent no response")
    return response
