"""The real OTLP/HTTP exporter, configured the way the operator is (a flag or the standard
variable), delivers spans the tests' receiver decodes: names, parents, service and attributes."""

from __future__ import annotations

import pytest

from bundle_operator.telemetry import tracing
from tests.otlp_receiver import OtlpReceiver


@pytest.mark.parametrize("named_by", ["flag", "environment"])
def test_spans_reach_an_otlp_endpoint(otlp_receiver: OtlpReceiver, named_by: str) -> None:
    if named_by == "flag":
        assert tracing.configure("bundle-operator", endpoint=otlp_receiver.endpoint, environ={})
    else:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint}
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.endpoint)
            assert tracing.configure("bundle-operator", environ=env)
    try:
        with tracing.span("reconcile", {"k8s.namespace.name": "team-a"}), tracing.span("apply"):
            pass
    finally:
        tracing.shutdown()  # flushes the batch
    trace = otlp_receiver.wait_for_trace(lambda spans: len(spans) == 2, timeout=10)
    reconcile, apply = trace
    assert (reconcile.name, apply.name) == ("reconcile", "apply")
    assert apply.parent_id == reconcile.span_id and reconcile.parent_id == ""
    assert reconcile.service == "bundle-operator"
    assert reconcile.attributes == {"k8s.namespace.name": "team-a"}
    assert OtlpReceiver.render(trace).splitlines()[1].startswith("  bundle-operator: apply [INTERNAL]")
