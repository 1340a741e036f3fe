"""Traces end to end: with OTEL_EXPORTER_OTLP_ENDPOINT set, one `kubectl apply` of an installation
gives one trace at the collector (the tests' own OTLP/HTTP receiver) holding the reconcile, its
steps, its platform calls and the traced platform's routes under them, named for the
installation; the operator's log lines of that reconcile carry the trace's id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl
from tests.documents import bundle_document
from tests.e2e.operator_harness import OperatorProcess, apply_object, resource, solo_operator, wait_ready
from tests.integration.platform.platform_harness import PlatformProcess, start_platform
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.e2e

NAME = "traced-kit"
DOCUMENT = bundle_document(
    NAME,
    description="A bundle whose install is traced.",
    mcps=[{"key": "notes", "name": "Notes", "type": "url", "endpoint_url": "http://127.0.0.1:9/notes/mcp"}],
    agents=[
        {
            "key": "helper",
            "name": "Helper",
            "model": "gpt-4.1",
            "instructions": "Take notes.",
            "mcps": ["notes"],
        }
    ],
)
SHOWN = (
    "bundle_operator.namespace",
    "bundle_operator.installation",
    "bundle_operator.bundle",
    "bundle_operator.workspace",
    "bundle_operator.trigger",
    "bundle_operator.result",
    "http.response.status_code",
    "http.route",
)


@pytest.fixture
def traced_platform(otlp_receiver: OtlpReceiver, tmp_path: Path) -> Iterator[PlatformProcess]:
    """A reference platform of the test's own, exporting to the same receiver."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    running = start_platform(tmp_path / "platform.db", log=tmp_path / "platform.log", env=env)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def traced_operator(
    devcluster: DevCluster,
    crds: None,
    traced_platform: PlatformProcess,
    otlp_receiver: OtlpReceiver,
    solo_namespace: str,
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    log = tmp_path / "operator.log"
    with solo_operator(devcluster.kubeconfig, traced_platform.url, log, solo_namespace, env=env) as op:
        yield op


def installs(spans: list[ReceivedSpan]) -> bool:
    """The trace of the installation's first reconcile, once the platform's spans have arrived too."""
    root = any(
        s.name == "reconcile BundleInstallation" and s.attributes.get("bundle_operator.result") == "success"
        for s in spans
    )
    calls = sum(s.kind == "CLIENT" for s in spans)
    served = sum(s.kind == "SERVER" for s in spans)
    return root and any(s.name == "apply" for s in spans) and served >= calls > 0


def children(trace: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in trace if s.parent_id == parent.span_id]


def log_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for text in path.read_text().splitlines():
        if text.startswith("{"):
            lines.append(json.loads(text))
    return lines


def test_one_kubectl_apply_is_one_trace_of_steps_and_platform_calls(
    kubectl: Kubectl,
    traced_operator: OperatorProcess,
    otlp_receiver: OtlpReceiver,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    workspace = solo_namespace
    apply_object(
        kubectl, solo_namespace, tmp_path, resource("Bundle", NAME, {"source": {"inline": DOCUMENT}})
    )
    installation = resource("BundleInstallation", NAME, {"bundleRef": {"name": NAME}, "workspace": workspace})
    apply_object(kubectl, solo_namespace, tmp_path, installation)
    wait_ready(kubectl, "bundleinstallation", NAME, solo_namespace)

    trace = otlp_receiver.wait_for_trace(installs, timeout=30)
    print(f"\n{OtlpReceiver.render(trace, SHOWN)}")

    (root,) = [s for s in trace if not s.parent_id]
    assert (root.name, root.kind, root.service) == (
        "reconcile BundleInstallation",
        "INTERNAL",
        "bundle-operator",
    )
    assert root.attributes["bundle_operator.namespace"] == solo_namespace
    assert root.attributes["bundle_operator.installation"] == NAME
    assert root.attributes["bundle_operator.bundle"] == NAME
    assert root.attributes["bundle_operator.workspace"] == workspace
    assert root.attributes["bundle_operator.bundle.name"] == NAME
    assert root.attributes["bundle_operator.trigger"] == "event"
    assert root.resource["service.version"]
    steps = [s.name for s in children(trace, root)]
    for step in ("resolve", "analyze", "apply", "report"):
        assert step in steps, steps
    assert steps.index("resolve") < steps.index("analyze") < steps.index("apply") < steps.index("report")

    # The writes are CLIENT spans under apply, named by route, never by workspace or id.
    (apply,) = [s for s in trace if s.name == "apply"]
    calls = children(trace, apply)
    names = {s.name for s in calls}
    assert {"POST /v1/workspaces/{ws}/mcp-servers", "POST /v1/workspaces/{ws}/agents"} <= names, names
    for call in calls:
        assert call.kind == "CLIENT" and call.service == "bundle-operator"
        assert workspace not in call.name
        assert call.attributes["http.response.status_code"] < 400
        assert f"/v1/workspaces/{workspace}/" in call.attributes["url.full"]

    # The platform continued the trace: a SERVER span under each of the operator's calls.
    served = [s for s in trace if s.service == "bundle-platform" and s.kind == "SERVER"]
    call_ids = {s.span_id for s in trace if s.kind == "CLIENT"}
    assert served, "the platform sent no span of this trace"
    assert all(s.parent_id in call_ids for s in served)
    assert {s.parent_id for s in served} >= {s.span_id for s in calls}

    # The Bundle's own reconcile, started by its apply, is a trace of its own.
    resolved = otlp_receiver.wait_for_trace(lambda spans: spans[0].name == "reconcile Bundle", timeout=10)
    assert [s.name for s in resolved] == ["reconcile Bundle", "resolve", "report"]
    assert resolved[0].attributes["bundle_operator.bundle"] == NAME

    # The operator's log lines of this reconcile lead to its trace.
    joined = [line for line in log_lines(tmp_path / "operator.log") if line.get("trace_id") == root.trace_id]
    reconciled = [line for line in joined if line["message"].startswith("reconciled in")]
    assert reconciled, joined
    print(json.dumps(reconciled[0]))
    assert all(line["span_id"] in {s.span_id for s in trace} for line in joined)
