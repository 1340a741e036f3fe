"""Every metric the chart's Grafana dashboard selects is one a live operator or reference platform
exports: their `/metrics` over HTTP are read from a real operator process (with its webhook
serving, so the webhook's certificate gauge is there) and the session's platform. A name the
exporters lack fails the check, naming the panel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bundle_operator.devcluster import DevCluster
from tests.e2e.operator_harness import OperatorProcess, free_port
from tests.grafana_dashboard import (
    concrete,
    exported_names,
    metric_names,
    queries,
    rendered_dashboard,
    unknown_names,
)
from tests.integration.platform.platform_harness import PlatformProcess
from tests.tls import throwaway_tls

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _, found = rendered_dashboard(
        {"metrics": {"dashboards": {"enabled": True}}}, tmp_path_factory.mktemp("helm")
    )
    return found


@pytest.fixture
def operator_with_webhook(
    devcluster: DevCluster, platform: PlatformProcess, solo_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator of the test's own whose webhook serves a throwaway certificate."""
    certs = tmp_path / "certs"
    certs.mkdir()
    tls = throwaway_tls(tmp_path, "dashboard webhook CA")
    (certs / "tls.crt").write_bytes(tls.cert.read_bytes())
    (certs / "tls.key").write_bytes(tls.key.read_bytes())
    webhook = ("--webhook-port", str(free_port()), "--webhook-cert-dir", str(certs))
    running = OperatorProcess(
        devcluster.kubeconfig,
        platform.url,
        tmp_path / "operator.log",
        extra=webhook,
        scope=("--namespace", solo_namespace),
    ).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def exported(operator_with_webhook: OperatorProcess, platform: PlatformProcess) -> dict[str, set[str]]:
    """The names each live exporter offers, read from its /metrics."""
    platform_text = httpx.get(f"{platform.url}/metrics", timeout=5).raise_for_status().text
    return {
        "operator": exported_names(operator_with_webhook.metrics()),
        "platform": exported_names(platform_text),
    }


def test_the_dashboard_selects_only_exported_metrics(
    dashboard: dict[str, Any], exported: dict[str, set[str]]
) -> None:
    everything = exported["operator"] | exported["platform"]
    assert unknown_names(dashboard, everything) == {}
    used = set().union(*(metric_names(concrete(q.expr)) for q in queries(dashboard)))
    # Both exporters feed it, and what it shows of each is theirs alone.
    assert {name for name in used if name.startswith("bundle_operator_")} <= exported["operator"]
    assert {name for name in used if name.startswith("bundle_platform_")} <= exported["platform"]
    assert "bundle_operator_webhook_certificate_expiry_timestamp_seconds" in used
    assert "bundle_platform_gateway_tool_call_seconds_bucket" in used


def test_a_name_no_exporter_has_fails_the_check_naming_its_panel(
    dashboard: dict[str, Any], exported: dict[str, set[str]]
) -> None:
    made_up = "bundle_operator_reconciles_attempted_total"
    doctored = {
        **dashboard,
        "panels": [
            *dashboard["panels"],
            {
                "type": "timeseries",
                "title": "Made up",
                "targets": [
                    {"expr": f"sum(rate({made_up}[$__rate_interval])) / sum(bundle_operator_leader)"}
                ],
            },
        ],
    }
    assert unknown_names(doctored, exported["operator"] | exported["platform"]) == {made_up: ["Made up"]}
