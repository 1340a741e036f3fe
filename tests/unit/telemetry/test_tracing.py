"""Tracing on and off: spans recorded only when configured, trace context on headers and MCP
``_meta``, and the ids the operator's log lines carry."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from bundle_operator.k8s.logs import JsonFormatter
from bundle_operator.telemetry import tracing

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.configure("test-service", exporter=exporter, attributes={"k8s.pod.name": "op-0"})
    yield exporter
    tracing.shutdown()


def _line(message: str) -> dict[str, str]:
    record = logging.LogRecord("bundle_operator.test", logging.INFO, __file__, 1, message, None, None)
    line: dict[str, str] = json.loads(JsonFormatter().format(record))
    return line


def test_off_unless_an_endpoint_is_named() -> None:
    assert not tracing.configure("svc", environ={})
    assert not tracing.enabled()
    assert tracing.endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) == (
        "http://collector:4318"
    )
    # The traces-specific variable wins, and the SDK's off switch beats both.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b/t"}
    assert tracing.endpoint_from_env(env) == "http://b/t"
    assert tracing.endpoint_from_env({**env, "OTEL_SDK_DISABLED": "TRUE"}) is None
    assert tracing.traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"


def test_while_off_nothing_is_recorded_sent_or_logged() -> None:
    headers: dict[str, str] = {}
    with tracing.span("reconcile", {"a": 1}) as current:
        assert not current.get_span_context().is_valid
        tracing.inject(headers)
        line = _line("inside")
    assert headers == {}
    assert "trace_id" not in line and "span_id" not in line
    assert tracing.extract({"traceparent": TRACEPARENT}) is None


def test_a_child_span_sends_its_context_and_the_receiver_continues_the_trace(
    spans: InMemorySpanExporter,
) -> None:
    headers: dict[str, str] = {}
    with tracing.span("reconcile", {"namespace": "team-a", "skipped": None}), tracing.span("apply"):
        tracing.inject(headers)
    trace_id, parent_id = headers["traceparent"].split("-")[1:3]
    with tracing.span("route", parent=tracing.extract(headers)):
        pass
    apply, reconcile, route = spans.get_finished_spans()
    assert {f"{apply.context.trace_id:032x}", f"{route.context.trace_id:032x}"} == {trace_id}
    assert route.parent is not None and f"{route.parent.span_id:016x}" == parent_id == (
        f"{apply.context.span_id:016x}"
    )
    assert apply.parent is not None and apply.parent.span_id == reconcile.context.span_id
    assert dict(reconcile.attributes or {}) == {"namespace": "team-a"}
    assert reconcile.resource.attributes["service.name"] == "test-service"
    assert reconcile.resource.attributes["k8s.pod.name"] == "op-0"


def test_mcp_meta_carries_the_trace_context(spans: InMemorySpanExporter) -> None:
    meta = {"progressToken": 3, "traceparent": TRACEPARENT, "tracestate": "v=1", "baggage": 7}
    assert tracing.trace_meta(meta) == {"traceparent": TRACEPARENT, "tracestate": "v=1"}
    with tracing.span("tools/call", parent=tracing.extract(meta)):
        forwarded: dict[str, object] = {}
        tracing.inject(forwarded)
    (call,) = spans.get_finished_spans()
    assert f"{call.context.trace_id:032x}" == TRACEPARENT.split("-")[1]
    assert str(forwarded["traceparent"]).split("-")[2] == f"{call.context.span_id:016x}"
    # A malformed traceparent starts no trace of a stranger's choosing.
    assert tracing.extract({"traceparent": "00-zz-yy-01"}) is None


def test_log_lines_under_a_span_carry_its_ids(spans: InMemorySpanExporter) -> None:
    assert "trace_id" not in _line("outside")
    with tracing.span("reconcile") as current:
        line = _line("inside")
    context = current.get_span_context()
    assert line["trace_id"] == f"{context.trace_id:032x}"
    assert line["span_id"] == f"{context.span_id:016x}"


def test_an_exception_or_a_refusal_marks_the_span_failed(spans: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError), tracing.span("apply"):
        raise RuntimeError("platform down")
    with tracing.span("tools/call"):
        tracing.fail("rate limited")
    raised, refused = spans.get_finished_spans()
    assert raised.status.status_code is StatusCode.ERROR
    assert refused.status.status_code is StatusCode.ERROR and refused.status.description == "rate limited"
