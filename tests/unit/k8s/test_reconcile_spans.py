"""Each run of the envelope is the root span of a trace of its own, named for its kind, saying what
started it and how it ended; the reconcilers name their object on it. `operator run` turns tracing
on by flag and names its pod."""

from __future__ import annotations

import argparse
import asyncio
import copy

import kopf
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from bundle_operator import __version__
from bundle_operator.k8s import spans
from bundle_operator.k8s.envelope import Envelope
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.process.options import add_arguments, options_from
from bundle_operator.k8s.process.run import resource_attributes
from bundle_operator.k8s.reconcile import Retry
from bundle_operator.telemetry import tracing
from tests.unit.k8s.test_endpoint import UID, World

INSTALLATION = {
    "metadata": {"uid": "u1", "namespace": "team-a", "name": "triage"},
    "spec": {"bundleRef": {"name": "triage-kit"}, "workspace": "acme"},
}


def test_a_run_is_a_trace_of_its_own_named_for_its_object(span_exporter: InMemorySpanExporter) -> None:
    async def work() -> ReconcileResult:
        spans.installation(INSTALLATION)
        with tracing.span("resolve"):
            pass
        return "success"

    async def runs() -> None:
        # A drift check started from inside another run's span still starts a trace of its own.
        with tracing.span("outer"):
            await Envelope().run("BundleInstallation", "u1", work, trigger="drift")

    asyncio.run(runs())
    by_name = {span.name: span for span in span_exporter.get_finished_spans()}
    run, step = by_name["reconcile BundleInstallation"], by_name["resolve"]
    assert run.parent is None
    assert run.context.trace_id != by_name["outer"].context.trace_id
    assert step.parent is not None and step.parent.span_id == run.context.span_id
    assert dict(run.attributes or {}) == {
        "bundle_operator.kind": "BundleInstallation",
        "bundle_operator.uid": "u1",
        "bundle_operator.trigger": "drift",
        "bundle_operator.namespace": "team-a",
        "bundle_operator.installation": "triage",
        "bundle_operator.bundle": "triage-kit",
        "bundle_operator.workspace": "acme",
        "bundle_operator.result": "success",
    }


def test_a_run_that_must_be_retried_is_a_failed_span(span_exporter: InMemorySpanExporter) -> None:
    async def platform_down() -> ReconcileResult:
        raise Retry("the platform answered 503", 5.0)

    with pytest.raises(kopf.TemporaryError):
        asyncio.run(Envelope().handled("Bundle", {"uid": "u2"}, 0, platform_down))
    (run,) = span_exporter.get_finished_spans()
    assert run.attributes is not None
    assert (run.attributes["bundle_operator.result"], run.attributes["bundle_operator.trigger"]) == (
        "retry",
        "event",
    )
    assert run.status.status_code is StatusCode.ERROR


def test_tracing_is_named_by_flag_and_the_pod_by_the_downward_api() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = ["--namespace", "team-a", "--otlp-endpoint", "http://collector:4318"]
    assert options_from(parser.parse_args(flags)).otlp_endpoint == "http://collector:4318"
    assert options_from(parser.parse_args(flags[:2])).otlp_endpoint is None
    assert resource_attributes({"POD_NAME": "bo-7f9c", "POD_NAMESPACE": "bundle-system"}) == {
        "service.version": __version__,
        "k8s.pod.name": "bo-7f9c",
        "k8s.namespace.name": "bundle-system",
    }
    assert resource_attributes({}) == {"service.version": __version__}


def test_an_endpoint_run_is_a_span_per_step_and_its_key_is_in_none(
    span_exporter: InMemorySpanExporter,
) -> None:
    world = World()
    world.install()

    async def work() -> ReconcileResult:
        return await world.reconciler.reconcile(copy.deepcopy(world.body))

    assert asyncio.run(Envelope().run("Endpoint", UID, work)) == "success"
    finished = span_exporter.get_finished_spans()
    run = next(s for s in finished if s.name == "reconcile Endpoint")
    steps = sorted((s for s in finished if s.parent == run.context), key=lambda s: s.start_time or 0)
    assert [s.name for s in steps] == [
        "target",
        "secret",
        "observe",
        "create",
        "update",
        "credentials",
        "report",
    ]
    assert run.attributes is not None
    assert run.attributes["bundle_operator.endpoint"] == "triage-kit"
    assert run.attributes["bundle_operator.namespace"] == "agents"
    assert run.attributes["bundle_operator.workspace"] == "acme"
    key = world.api_key()
    assert all(key not in str(dict(s.attributes or {})) for s in finished)
