"""The reference platform's HTTP connections: problem+json for the errors aiohttp answers itself.

Some requests never reach the application's middlewares: a header or request line over the
parser's limits, a request that is not HTTP, an ``Expect`` other than ``100-continue`` (answered
while routing, before any middleware). aiohttp answers those from its connection class,
``web.RequestHandler``, as ``text/plain`` with part of the offending input in the body, which
repeats a header value (an ``Authorization`` token, say) to the client and into the log.

aiohttp has no setting for that answer, so the platform runs its own small subclasses:
``ProblemRequestHandler`` overrides ``handle_error`` (the one place the connection builds those
answers), ``ProblemServer`` makes connections of that class and checks ``Expect`` and
``Content-Length`` before routing, and ``ProblemAppRunner`` serves the application with that server.
Subclasses rather than patches of aiohttp: nothing changes for any other aiohttp server in the
process, and an aiohttp upgrade that renames these hooks fails loudly in the tests instead of
silently answering raw text again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, HttpProcessingError, LineTooLong

from bundle_operator.reference_platform.problems import ApiError, problem_response

log = logging.getLogger("bundle_operator.reference_platform")

LowLevelHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
# The refusal of a request whose body declares this many bytes, or None when it may be sent.
Oversize = Callable[[web.BaseRequest, int], ApiError | None]
# aiohttp's own limits, kept: no header the API reads is anywhere near them.
MAX_LINE_SIZE = 8190
MAX_FIELD_SIZE = 8190


def _problem(status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    response = problem_response(ApiError(status, code, detail, headers=headers))
    return response


def protocol_problem(status: int, exc: BaseException | None) -> web.Response:
    """The problem+json answer for an error the connection met outside the application."""
    if isinstance(exc, LineTooLong):
        return _problem(
            431,
            "request_header_too_large",
            f"a header line or the request line is longer than {MAX_FIELD_SIZE} bytes",
        )
    if isinstance(exc, HttpProcessingError) or status == 400:
        return _problem(400, "invalid_http", "the request is not valid HTTP/1.1")
    if status == 504:
        return _problem(504, "timeout", "the platform did not answer in time")
    return _problem(500, "internal_error", "the platform failed unexpectedly")


class ProblemRequestHandler(web.RequestHandler):
    """A connection that answers protocol errors as problem+json, never repeating the input."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Answer a request the parser refused, or a failure outside the application.

        aiohttp's version logs the exception (whose message quotes up to 100 bytes of the
        offending line) and answers it as text; this one logs only the exception's type.
        ``message`` is aiohttp's text for the client and is not used.
        """
        if isinstance(exc, HttpProcessingError):
            level = logging.DEBUG if isinstance(exc, BadHttpMethod) else logging.INFO
            log.log(level, "refused a request that is not valid HTTP: %s", type(exc).__name__)
        elif exc is not None:
            log.error("unexpected error outside the application: %s", type(exc).__name__)
        if request.writer.output_size > 0:
            # Part of a response went out already; aiohttp closes the connection on this.
            raise ConnectionError("Response is sent already, cannot send another response")
        response = protocol_problem(status, exc)
        response.force_close()
        return response


def _guarded(handler: LowLevelHandler, oversize: Oversize) -> LowLevelHandler:
    """``handler`` behind the checks that must run before routing and the app's middlewares."""

    async def guard(request: web.BaseRequest) -> web.StreamResponse:
        expect = request.headers.get("Expect")
        if expect is not None and expect.strip().lower() != "100-continue":
            response = _problem(
                417, "expectation_failed", "the only Expect the platform meets is 100-continue"
            )
            response.force_close()
            return response
        length = request.content_length
        refusal = None if length is None else oversize(request, length)
        if refusal is not None:
            # Refused from the declared length, before a byte of the body is read and before
            # "100 Continue": a client that waits for it never sends the body. One that sends it
            # anyway gets this answer once aiohttp has read and dropped the rest (lingering close).
            response = problem_response(refusal)
            response.force_close()
            return response
        try:
            return await handler(request)
        except web.HTTPException as exc:
            # Raised while routing, outside the middlewares: the default Expect handling.
            if exc.status < 400:
                raise
            return _problem(exc.status, f"http_{exc.status}", exc.reason)

    return guard


class ProblemServer(web.Server):
    """aiohttp's low-level server, making ProblemRequestHandler connections."""

    def __init__(
        self,
        handler: LowLevelHandler,
        *,
        oversize: Oversize,
        loop: asyncio.AbstractEventLoop | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(_guarded(handler, oversize), loop=loop, **kwargs)
        self._connection_loop = loop or asyncio.get_running_loop()
        self._connection_kwargs = {
            k: v for k, v in kwargs.items() if k not in ("request_factory", "handler_cancellation")
        }

    def __call__(self) -> web.RequestHandler:
        """A new connection (the protocol factory the listening socket calls)."""
        return ProblemRequestHandler(self, loop=self._connection_loop, **self._connection_kwargs)


class ProblemAppRunner(web.AppRunner):
    """AppRunner serving its application through ProblemServer.

    ``_make_server`` is the runner's hook that starts the application and builds its server;
    the server it returns is rebuilt here as a ProblemServer around the same request handler.
    """

    def __init__(self, app: web.Application, *, oversize: Oversize, **kwargs: Any) -> None:
        kwargs.setdefault("max_line_size", MAX_LINE_SIZE)
        kwargs.setdefault("max_field_size", MAX_FIELD_SIZE)
        super().__init__(app, **kwargs)
        self._oversize = oversize
        self._handler_kwargs = kwargs

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()
        return ProblemServer(
            plain.request_handler,
            oversize=self._oversize,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=asyncio.get_running_loop(),
            **self._handler_kwargs,
        )
