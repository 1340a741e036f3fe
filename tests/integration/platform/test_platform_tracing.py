"""`bundlectl platform serve --otlp-endpoint` traces its routes: a SERVER span per request, named by
the route's template, continuing the caller's traceparent; scrapes and health checks make none."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from platform_harness import TOKEN, PlatformProcess, start_platform, start_traced_platform

from bundle_operator import __version__

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.integration

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def receiver(module_otlp_receiver: OtlpReceiver) -> OtlpReceiver:
    return module_otlp_receiver


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("traced") / "platform.db"
    running = start_traced_platform(db, receiver.endpoint, "--enable-fault-injection")
    yield running
    running.stop()


def test_a_request_continues_the_callers_trace_in_a_span_named_by_its_route(
    traced: PlatformProcess, receiver: OtlpReceiver
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    with httpx.Client(base_url=traced.url, headers=headers, timeout=10) as http:
        assert http.get("/v1/workspaces/team-a/agents/agt_missing").status_code == 404
    (route,) = receiver.wait_for_trace(lambda spans: spans[0].trace_id == CALLER_TRACE, timeout=10)
    print(OtlpReceiver.render(receiver.traces()[CALLER_TRACE], ("http.route", "http.response.status_code")))
    assert route.parent_id == CALLER_SPAN
    assert route.name == "GET /v1/workspaces/{workspace}/agents/{entity_id}"
    assert (route.kind, route.service, route.status) == ("SERVER", "bundle-platform", "UNSET")
    assert route.resource["service.version"] == __version__
    assert route.attributes == {
        "http.request.method": "GET",
        "http.route": "/v1/workspaces/{workspace}/agents/{entity_id}",
        "url.path": "/v1/workspaces/team-a/agents/agt_missing",
        "bundle_operator.workspace": "team-a",
        "http.response.status_code": 404,
    }


def test_without_a_traceparent_a_request_starts_a_trace_and_a_5xx_fails_it(
    traced: PlatformProcess, receiver: OtlpReceiver
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=traced.url, headers=auth, timeout=10) as http:
        http.get("/healthz").raise_for_status()
        http.get("/metrics").raise_for_status()
        # A path no route matches is named by its method alone: the path is the client's to choose.
        assert http.get("/no/such/route").status_code == 404
        fault = {"method": "GET", "path": "/v1/workspaces/team-b/skills", "status": 503}
        http.post("/_admin/faults", json=fault).raise_for_status()
        assert http.get("/v1/workspaces/team-b/skills").status_code == 503
    spans = receiver.wait_for_trace(lambda spans: spans[0].name == "GET", timeout=10)
    assert spans[0].parent_id == "" and spans[0].attributes["url.path"] == "/no/such/route"
    names = {s.name for s in receiver.spans()}
    assert not {"GET /healthz", "GET /metrics"} & names
    (failed,) = receiver.wait_for_trace(lambda spans: spans[0].name.endswith("/skills"), timeout=10)
    assert failed.name == "GET /v1/workspaces/{workspace}/skills"
    assert failed.status == "ERROR" and failed.attributes["http.response.status_code"] == 503
    assert failed.attributes["bundle_operator.workspace"] == "team-b"


def test_the_standard_variable_turns_tracing_on_and_spans_are_flushed_on_exit(
    tmp_path: Path, otlp_receiver: OtlpReceiver
) -> None:
    # The default batch delay (5 s) is left as is: what is still queued goes out as the platform stops.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint}
    running = start_platform(tmp_path / "platform.db", env=env)
    try:
        httpx.get(f"{running.url}/v1/workspaces/team-c/skills", timeout=10).raise_for_status()
    finally:
        assert running.stop() == 0
    (listed,) = otlp_receiver.wait_for_trace(lambda spans: spans[0].name.endswith("/skills"), timeout=5)
    assert listed.name == "GET /v1/workspaces/{workspace}/skills" and listed.service == "bundle-platform"
