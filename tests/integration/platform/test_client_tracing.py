"""The operator's platform client traces each call: a CLIENT span per attempt, named by the route's
template, whose context goes out as ``traceparent`` so that the traced reference platform's SERVER
span is its child, in the reconcile's trace. A retried call is one span per attempt; a failed
attempt is a failed span."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from platform_harness import FAST_RETRY, TOKEN, PlatformProcess, start_traced_platform

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Unavailable
from bundle_operator.telemetry import tracing

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

AGENTS_ROUTE = "GET /v1/workspaces/{ws}/agents"


@pytest.fixture(scope="module")
def receiver(module_otlp_receiver: OtlpReceiver) -> OtlpReceiver:
    return module_otlp_receiver


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("client-traced") / "platform.db"
    running = start_traced_platform(db, receiver.endpoint, "--enable-fault-injection")
    yield running
    running.stop()


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def served(receiver: OtlpReceiver, trace_id: str, count: int) -> list[ReceivedSpan]:
    spans = receiver.wait_for_trace(
        lambda spans: spans[0].trace_id == trace_id and sum(s.kind == "SERVER" for s in spans) >= count,
        timeout=10,
    )
    return [s for s in spans if s.kind == "SERVER"]


async def test_a_call_is_a_client_span_of_the_reconcile_and_the_platform_continues_it(
    traced: PlatformProcess, receiver: OtlpReceiver, span_exporter: InMemorySpanExporter
) -> None:
    async with PlatformClient(traced.url, token=TOKEN, retry=FAST_RETRY) as client:
        with tracing.span("reconcile BundleInstallation"):
            assert await client.list_all("trace-team", kinds.AGENTS) == []

    reconcile, *_ = [
        s for s in span_exporter.get_finished_spans() if s.name == "reconcile BundleInstallation"
    ]
    (call,) = [s for s in span_exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    trace_id, call_id = hex_ids(call)
    assert call.name == AGENTS_ROUTE, "no workspace or id in a span name"
    assert call.parent is not None and call.parent.span_id == reconcile.context.span_id
    assert hex_ids(reconcile)[0] == trace_id
    assert call.attributes is not None
    assert call.attributes["http.request.method"] == "GET"
    assert call.attributes["http.response.status_code"] == 200
    assert str(call.attributes["url.full"]).startswith(f"{traced.url}/v1/workspaces/trace-team/agents")
    assert "http.request.resend_count" not in call.attributes

    (route,) = served(receiver, trace_id, 1)
    assert route.parent_id == call_id, "the platform's span is a child of the call's"
    assert route.attributes["bundle_operator.workspace"] == "trace-team"


async def test_a_retried_call_is_one_span_per_attempt_and_the_failed_one_is_marked(
    traced: PlatformProcess, receiver: OtlpReceiver, span_exporter: InMemorySpanExporter
) -> None:
    fault = {"method": "GET", "path": "/v1/workspaces/retry-team/agents", "status": 503}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=traced.url, headers=auth, timeout=10) as admin:
        (await admin.post("/_admin/faults", json=fault)).raise_for_status()
    async with PlatformClient(traced.url, token=TOKEN, retry=FAST_RETRY) as client:
        with tracing.span("reconcile BundleInstallation"):
            await client.list_all("retry-team", kinds.AGENTS)

    first, second = [s for s in span_exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert first.name == second.name == AGENTS_ROUTE
    assert first.attributes is not None and second.attributes is not None
    assert first.status.status_code is StatusCode.ERROR
    assert first.attributes["http.response.status_code"] == 503
    assert second.status.status_code is StatusCode.UNSET
    assert second.attributes["http.request.resend_count"] == 1
    assert first.parent == second.parent, "both attempts are children of the reconcile"

    routes = served(receiver, hex_ids(first)[0], 2)
    assert {r.parent_id for r in routes} == {hex_ids(first)[1], hex_ids(second)[1]}


async def test_a_platform_that_cannot_be_reached_fails_every_attempts_span(
    span_exporter: InMemorySpanExporter,
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with PlatformClient(closed, retry=FAST_RETRY) as client:
        with pytest.raises(Unavailable):
            await client.list_all("any", kinds.AGENTS)

    attempts = [s for s in span_exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert len(attempts) == FAST_RETRY.attempts
    for attempt in attempts:
        assert attempt.status.status_code is StatusCode.ERROR
        assert attempt.attributes is not None and attempt.attributes["error.type"] == "ConnectError"
