"""What trace context a member is sent and where a call's span continues (gateway_spans.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bundle_operator.reference_platform.gateway_spans import (
    TRACE_CONTEXT,
    forwarding,
    member_meta,
    parent_of,
    request_context,
    serving,
)
from bundle_operator.reference_platform.gateway_view import EndpointView
from bundle_operator.reference_platform.member_link import MemberLink
from bundle_operator.telemetry import tracing

CLIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
VIEW = EndpointView("end_1", "team-a", "ep-a", True, "ApiKey", "Default", None, "gwb_1", "assistant", "")
LINK = MemberLink("http://member.invalid/mcp")


class _Request:
    """The SDK's request as far as parent_of reads it: an ASGI scope with the door's state."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.scope = {"state": state}


def test_while_off_a_member_gets_the_clients_keys_unchanged_and_no_span_is_made() -> None:
    meta = {"traceparent": CLIENT, "tracestate": "c=1", "baggage": "k=v", "progressToken": 3}
    with (
        serving(VIEW, "tools/call", "weather__forecast", parent=parent_of(meta)),
        forwarding("weather", "forecast", LINK),
    ):
        assert member_meta(meta) == meta
    assert request_context() is None


def test_a_member_gets_the_forwarding_spans_context_instead_of_the_clients(
    span_exporter: InMemorySpanExporter,
) -> None:
    meta = {"traceparent": CLIENT, "tracestate": "stale=1", "baggage": "k=v", "progressToken": 3}
    parent = parent_of({"traceparent": CLIENT})
    with (
        serving(VIEW, "tools/call", "weather__forecast", parent=parent),
        forwarding("weather", "forecast", LINK),
    ):
        sent = member_meta(meta)
    forward, call = span_exporter.get_finished_spans()
    assert sent["traceparent"] == f"00-{CLIENT.split('-')[1]}-{forward.context.span_id:016x}-01"
    # The client's parent carried no tracestate, so its stale one is not passed on; the rest is.
    assert "tracestate" not in sent and (sent["baggage"], sent["progressToken"]) == ("k=v", 3)
    assert forward.parent is not None and forward.parent.span_id == call.context.span_id
    assert call.parent is not None and f"{call.parent.span_id:016x}" == CLIENT.split("-")[2]
    assert call.attributes is not None and call.attributes["bundle_operator.endpoint"] == "ep-a"


def test_meta_comes_before_the_http_request_unless_both_name_one_trace(
    span_exporter: InMemorySpanExporter,
) -> None:
    with tracing.span("POST /mcp/{endpoint}/mcp", parent=tracing.extract({"traceparent": OTHER})):
        request = _Request({TRACE_CONTEXT: request_context()})
    with serving(VIEW, "tools/list", parent=parent_of({"traceparent": CLIENT}, request)):
        pass
    with serving(VIEW, "tools/list", parent=parent_of({}, request)):
        pass
    with serving(VIEW, "tools/list", parent=parent_of({"traceparent": OTHER}, request)):
        pass
    http, from_meta, from_http, nested = span_exporter.get_finished_spans()
    assert from_meta.parent is not None and f"{from_meta.parent.span_id:016x}" == CLIENT.split("-")[2]
    assert from_http.parent is not None and from_http.parent.span_id == http.context.span_id
    assert nested.parent is not None and nested.parent.span_id == http.context.span_id
