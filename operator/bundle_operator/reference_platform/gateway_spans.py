"""The gateway's spans, named and attributed as OpenTelemetry's MCP conventions say.

Each MCP request through an endpoint is a SERVER span, ``tools/call <presented tool>`` (a method
alone when no tool or prompt of the bundle is named: a client's made-up name never becomes a span
name). It continues the trace the request's ``params._meta`` names (SEP-414), else the HTTP
request's (whose span continued a ``traceparent`` header); when both name one trace it nests under
the HTTP request's span. A call handed to a member is a CLIENT
span under it, ``tools/call <tool at the member>``, and the member is sent that span's context in
the forwarded ``params._meta`` (and, on the gateway's own POST to an HTTP member, as headers):
the member's parent is the gateway's forwarding span, never the client's.

While tracing is off nothing here opens a span, and a member is sent the client's own trace keys
unchanged, as any proxy that does not trace would pass them on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final

from mcp.shared.exceptions import MCPError
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from bundle_operator.reference_platform.gateway_view import EndpointView
from bundle_operator.reference_platform.member_link import MemberLink
from bundle_operator.reference_platform.stdio_loopback import LOOPBACK
from bundle_operator.telemetry import tracing

# Where the door leaves the HTTP request's trace context for the SDK's server (its ASGI state): the
# SDK runs handlers in a session's task, whose own context is not the request's.
TRACE_CONTEXT: Final = "bundle_operator.trace_context"
_TOOL_CALL: Final = "tools/call"
_NAMED_BY: Final = {_TOOL_CALL: "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
_TRACE_KEYS: Final = frozenset(tracing.META_KEYS)
_OFF: Final = nullcontext()


def request_context() -> otel_context.Context | None:
    """The current trace context (the HTTP request's span) while tracing is on, else None."""
    return otel_context.get_current() if tracing.enabled() else None


def parent_of(meta: Any, request: object = None) -> otel_context.Context | None:
    """Where an MCP request's span continues: the trace its ``_meta`` names, else the HTTP request's.

    When both name one trace (a client tracing its HTTP requests too), the span nests under the
    HTTP request's. ``request`` is the SDK's request, whose ASGI state holds what the door left
    (``TRACE_CONTEXT``); without one, the HTTP request's context is the current one.
    """
    if not tracing.enabled():
        return None
    if request is None:
        http: otel_context.Context | None = otel_context.get_current()
    else:
        scope = getattr(request, "scope", None)
        state = scope.get("state") if isinstance(scope, dict) else None
        left = state.get(TRACE_CONTEXT) if isinstance(state, dict) else None
        http = left if isinstance(left, otel_context.Context) else None
    found = tracing.extract(meta if isinstance(meta, Mapping) else None)
    if found is None or (http is not None and _trace_of(http) == _trace_of(found)):
        return http
    return found


def _trace_of(context: otel_context.Context) -> int:
    return trace.get_current_span(context).get_span_context().trace_id


def endpoint_attributes(view: EndpointView) -> dict[str, tracing.AttributeValue | None]:
    """What names the endpoint a request came through: one process serves many."""
    return {
        "bundle_operator.endpoint": view.name,
        "bundle_operator.workspace": view.workspace,
        "bundle_operator.gateway_bundle": view.bundle_name,
    }


def serving(
    view: EndpointView,
    method: str,
    target: str | None = None,
    *,
    known: bool = True,
    parent: otel_context.Context | None = None,
    request_id: str | int | None = None,
    session_id: str | None = None,
) -> AbstractContextManager[None]:
    """A SERVER span around one MCP request; an MCP error raised through it fails it with its code.

    ``target`` is the tool or prompt named; it is in the span's name only when ``known`` (one the
    bundle has), and in its attributes either way.
    """
    if not tracing.enabled():
        return _OFF  # no generator made per call while off
    return _serving(view, method, target, known, parent, request_id, session_id)


@contextmanager
def _serving(
    view: EndpointView,
    method: str,
    target: str | None,
    known: bool,
    parent: otel_context.Context | None,
    request_id: str | int | None,
    session_id: str | None,
) -> Iterator[None]:
    attributes: dict[str, tracing.AttributeValue | None] = {
        "mcp.method.name": method,
        "jsonrpc.request.id": None if request_id is None else str(request_id),
        "mcp.session.id": session_id,
        **endpoint_attributes(view),
    }
    if method == _TOOL_CALL:
        attributes["gen_ai.operation.name"] = "execute_tool"
    if target is not None and method in _NAMED_BY:
        attributes[_NAMED_BY[method]] = target
    name = f"{method} {target}" if target is not None and known else method
    with tracing.span(name, attributes, kind=SpanKind.SERVER, parent=parent):
        try:
            yield
        except MCPError as exc:
            code = str(exc.code)
            tracing.set_attributes({"error.type": code, "rpc.response.status_code": code})
            raise


def outcome(outcome: str, error: str | None) -> None:
    """Put a tool call's audited outcome on the current span; anything but ok fails it."""
    if not tracing.enabled():
        return
    tracing.set_attributes({"bundle_operator.outcome": outcome})
    if outcome == "tool_error":
        tracing.set_attributes({"error.type": "tool_error"})
    if outcome != "ok":
        tracing.fail(error or outcome)


def refused(code: str, message: str) -> None:
    """Mark the current span (the HTTP request's, at the door) failed with a refusal's code."""
    if tracing.enabled():
        tracing.set_attributes({"error.type": code})
        tracing.fail(message)


def forwarding(member: str, tool: str, link: MemberLink | None) -> AbstractContextManager[None]:
    """A CLIENT span around a call handed to a member; its context is what the member is sent."""
    return _OFF if not tracing.enabled() else _forwarding(member, tool, link)


@contextmanager
def _forwarding(member: str, tool: str, link: MemberLink | None) -> Iterator[None]:
    attributes: dict[str, tracing.AttributeValue | None] = {
        "mcp.method.name": _TOOL_CALL,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "bundle_operator.member": member,
        # A member the platform runs is reached over its stdio pipes (through the loopback bridge).
        "network.transport": "pipe" if link is not None and _bridged(link) else "tcp",
    }
    with tracing.span(f"{_TOOL_CALL} {tool}", attributes, kind=SpanKind.CLIENT):
        yield


def _bridged(link: MemberLink) -> bool:
    return LOOPBACK.base is not None and link.url.startswith(LOOPBACK.base + "/_internal/stdio/")


def member_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``meta`` as a member is sent it: trace keys of the current span while tracing is on.

    A client's own ``traceparent`` and ``tracestate`` are replaced (its ``baggage`` is passed on);
    while tracing is off they go to the member unchanged.
    """
    if not tracing.enabled():
        return dict(meta or {})
    sent = {key: value for key, value in (meta or {}).items() if key not in _TRACE_KEYS or key == "baggage"}
    tracing.inject(sent)
    return sent


def member_headers(headers: MutableMapping[str, str]) -> None:
    """Add the current span's ``traceparent`` (and ``tracestate``) to a request to an HTTP member."""
    tracing.inject(headers)
