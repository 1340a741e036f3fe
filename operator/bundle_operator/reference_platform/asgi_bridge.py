"""Serve an ASGI application from an aiohttp handler.

The MCP SDK's streamable-HTTP server is an ASGI app; the reference platform is aiohttp. The
gateway's endpoints must answer on the API's own listener, so each request is handed to the SDK
through this adapter instead of a second server. It streams both ways: request bodies as they
arrive, and responses (server-sent events included) chunk by chunk until the app finishes or the
client goes away.

Two things of the platform's HTTP hold for what the app sends too: an error (status 400 and up) not
in JSON becomes problem+json (RFC 9457) like every other error of the platform, and an answer that
must have no body (to HEAD, a 204, a 304) gets none whatever the app writes, so the next response on
the connection starts where it should.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import Any

from aiohttp import web

from bundle_operator.reference_platform.problems import ApiError, problem_response

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

_CHUNK = 64 * 1024
# Error bodies of these types pass as the app sent them: JSON-RPC errors and problems.
_JSON_ERRORS = ("application/json", "application/problem+json")
# Headers an error keeps when it becomes a problem.
_KEPT = ("allow", "www-authenticate", "retry-after")
# Codes as the platform's own errors name them (app.py's problem middleware).
_CODES = {
    400: "bad_request",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
    503: "unavailable",
}
_DETAILS = {
    400: "the request cannot be read: POST one JSON-RPC message with Content-Type: application/json",
    405: "this method is not allowed here; the Allow header lists those that are",
    406: "the Accept header must take application/json (and text/event-stream for a stream)",
    413: "the request body is larger than an MCP endpoint takes",
}


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


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _as_problem(status: int, headers: list[tuple[str, str]]) -> web.Response | None:
    """The problem+json answer standing for an app's error that is not JSON; None for any other answer."""
    if status < 400:
        return None
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    if content_type.split(";")[0].strip().lower() in _JSON_ERRORS:
        return None
    try:
        phrase = HTTPStatus(status).phrase.lower()
    except ValueError:
        phrase = "the MCP endpoint refused the request"
    kept = {k: v for k, v in headers if k.lower() in _KEPT}
    code = _CODES.get(status, f"http_{status}")
    return problem_response(ApiError(status, code, _DETAILS.get(status, phrase), headers=kept))


def _bodiless(method: str, status: int) -> bool:
    """Whether HTTP forbids a body on this answer (RFC 9110 sections 9.3.2, 15.3.5, 15.4.5)."""
    return method == "HEAD" or status in (204, 304) or 100 <= status < 200


async def _client_gone(request: web.Request, finished: asyncio.Event) -> None:
    """Return once the client has closed the connection or the exchange is over."""
    while not finished.is_set():
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        try:
            await asyncio.wait_for(finished.wait(), timeout=1.0)
        except TimeoutError:
            continue


async def _started(request: web.Request, status: int, headers: list[tuple[str, str]]) -> web.StreamResponse:
    """The streamed response with the app's status and headers, its head sent to the client."""
    response = web.StreamResponse(status=status)
    for key, text in headers:
        if key.lower() in ("content-length", "transfer-encoding", "connection"):
            continue  # aiohttp frames the body itself
        response.headers.add(key, text)
    await response.prepare(request)
    return response


async def serve_asgi(
    app: AsgiApp,
    request: web.Request,
    *,
    body: bytes | None = None,
    state: dict[str, Any] | None = None,
    user: object = None,
) -> web.StreamResponse:
    """Run ``app`` for ``request`` and stream what it sends back as the aiohttp response.

    ``body`` is the request's body when the caller has read it already; ``state`` becomes the ASGI
    scope's ``state`` (what the app sees as ``request.state``), ``user`` its ``user`` (who the
    request is from, for an app that binds state to it) when given.
    """
    finished = asyncio.Event()
    response: web.StreamResponse | None = None
    replaced: web.Response | None = None
    bodiless = False
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
        await _client_gone(request, finished)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal response, replaced, bodiless
        kind = message["type"]
        if kind == "http.response.start":
            status = int(message["status"])
            headers = [(_text(name), _text(value)) for name, value in message.get("headers", [])]
            replaced = _as_problem(status, headers)
            if replaced is not None:
                return  # answered once the app is done; what it writes is dropped
            response = await _started(request, status, headers)
            bodiless = _bodiless(request.method, status)
        elif kind == "http.response.body":
            if replaced is not None:
                if not message.get("more_body", False):
                    finished.set()
                return
            if response is None:
                raise RuntimeError("the ASGI app sent a body before starting the response")
            if finished.is_set():
                return
            body = message.get("body", b"")
            try:
                if body and not bodiless:
                    await response.write(body)
                if not message.get("more_body", False):
                    await response.write_eof()
                    finished.set()
            except (ConnectionResetError, RuntimeError):
                # The client went away mid-stream; tell the app through receive().
                finished.set()

    scope = _scope(request, state if state is not None else {})
    if user is not None:
        scope["user"] = user
    try:
        await app(scope, receive, send)
    finally:
        finished.set()
    if replaced is not None:
        return replaced
    if response is None:
        return problem_response(ApiError(500, "internal_error", "the MCP handler sent no response"))
    return response
