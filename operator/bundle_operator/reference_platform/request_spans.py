"""A SERVER span for each request the reference platform answers, while tracing is on.

The span continues the caller's trace (its ``traceparent`` header) and is named by the matched
route's template, ``GET /v1/workspaces/{workspace}/agents/{id}``, never by the concrete path, so
span names stay few. Scrapes and health checks (``/metrics``, ``/healthz``) get none, and neither
does the stdio bridge: the gateway's forwarding span already stands for each call through it.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web
from opentelemetry.trace import SpanKind

from bundle_operator.reference_platform.http import Handler, answered
from bundle_operator.reference_platform.stdio_loopback import ROUTE_NAME as STDIO_ROUTE_NAME
from bundle_operator.telemetry import tracing

UNTRACED: Final = frozenset({"/metrics", "/healthz"})
# OpenTelemetry's HTTP conventions: a method outside the known set is named _OTHER, so a client
# cannot mint span names.
_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})


def route_of(request: web.Request) -> str | None:
    """The matched route's template (``/v1/workspaces/{workspace}/...``), or None when none matched."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


@web.middleware
async def span_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer the request inside a SERVER span; a 5xx answer marks the span failed."""
    if request.path in UNTRACED or request.match_info.route.name == STDIO_ROUTE_NAME:
        return await handler(request)
    method = request.method if request.method in _METHODS else "_OTHER"
    route = route_of(request)
    attributes: dict[str, tracing.AttributeValue | None] = {
        "http.request.method": method,
        "http.route": route,
        "url.path": request.path,
        "bundle_operator.workspace": request.match_info.get("workspace"),
        "bundle_operator.endpoint": request.match_info.get("endpoint"),
    }
    name = f"{method} {route}" if route else method
    parent = tracing.extract(request.headers)
    with tracing.span(name, attributes, kind=SpanKind.SERVER, parent=parent):
        return await answered(request, handler, _record_status)


def _record_status(status: int) -> None:
    tracing.set_attributes({"http.response.status_code": status})
    if status >= 500:
        tracing.fail(f"answered {status}")
