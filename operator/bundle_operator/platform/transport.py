"""An httpx transport that sends over aiohttp, for the operator's platform clients.

``PlatformClient`` keeps httpx's API (tests swap its transport, metrics wrap it), but at fleet
scale httpcore's connection pool cost more CPU per call than everything else the operator did
for that call (it scans every pooled connection on each request). This transport hands the
request to an aiohttp session instead and maps aiohttp's failures onto httpx's exception classes,
so the client's retry rules (was the request sent or not) stay as they are.
"""

from __future__ import annotations

import aiohttp
import httpx

# Hop-by-hop and framing headers aiohttp sets itself from the body and the URL.
_NOT_FORWARDED = frozenset({"host", "content-length", "transfer-encoding", "connection"})
# A timeout while connecting (aiohttp 3.10+ tells it apart); nothing was sent.
_CONNECT_TIMEOUT: tuple[type[BaseException], ...] = tuple(
    t for t in (getattr(aiohttp, "ConnectionTimeoutError", None),) if isinstance(t, type)
)
# aiohttp has already decoded the body; httpx must not decode it again.
_NOT_RETURNED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends httpx requests with one pooled aiohttp session (made on first use, in the running loop)."""

    def __init__(self, *, limit: int = 64, keepalive: float = 60.0) -> None:
        self._limit = limit
        self._keepalive = keepalive
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._limit, keepalive_timeout=self._keepalive)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=timeouts.get("connect"),
            sock_read=timeouts.get("read"),
        )
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.decode("latin-1").lower() not in _NOT_FORWARDED
        ]
        body = await request.aread()
        try:
            async with self._http().request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                timeout=timeout,
                allow_redirects=False,
            ) as answer:
                content = await answer.read()
                status = answer.status
                answer_headers = [(k, v) for k, v in answer.headers.items() if k.lower() not in _NOT_RETURNED]
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except TimeoutError as exc:
            if isinstance(exc, _CONNECT_TIMEOUT):
                raise httpx.ConnectTimeout("could not connect in time", request=request) from exc
            # It may have reached the platform: the client repeats only what is safe to repeat.
            raise httpx.ReadTimeout("the platform did not answer in time", request=request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
        return httpx.Response(status, headers=answer_headers, content=content, request=request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
