"""A settled installation's drift checks read nothing from the API server: the installation, its
Bundle, its state Secret and its setup Secret come from what the operator's watches delivered.
A drift made on the platform is still found, and a rotated Secret still reaches the platform."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.e2e.operator_harness import EXAMPLES, OperatorProcess, condition, solo_operator, wait_ready
from tests.e2e.test_operator_torture import metric_sum
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

NAME = "github-triage"


@pytest.fixture
def own_operator(
    devcluster: DevCluster, crds: None, platform: PlatformProcess, solo_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    with solo_operator(devcluster.kubeconfig, platform.url, tmp_path / "operator.log", solo_namespace) as op:
        yield op


def api_reads(operator: OperatorProcess) -> float:
    """GETs the operator's own Kubernetes client has sent (kopf's watches are not among them)."""
    return metric_sum(operator.metrics(), "bundle_operator_kube_requests_total", method="GET")


def checks(operator: OperatorProcess) -> float:
    return metric_sum(operator.metrics(), "bundle_operator_reconciles_total", kind="BundleInstallation")


def test_drift_checks_of_a_settled_installation_read_nothing_from_the_api_server(
    kubectl: Kubectl,
    own_operator: OperatorProcess,
    platform: PlatformProcess,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    workspace = solo_namespace
    installation = yaml.safe_load((EXAMPLES / "github-triage-installation.yaml").read_text())
    installation["spec"]["workspace"] = workspace
    installation["spec"]["driftPolicy"] = {"interval": "5s", "mode": "Warn"}
    path = tmp_path / "installation.yaml"
    path.write_text(yaml.safe_dump(installation))
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=solo_namespace)
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=solo_namespace)
    kubectl.apply(path, namespace=solo_namespace)
    installed = wait_ready(kubectl, "bundleinstallation", NAME, solo_namespace)
    time.sleep(6)  # the install's own status write comes back through the watch

    reads, done = api_reads(own_operator), checks(own_operator)
    assert reads >= 1, "the install read its setup Secret once: the metric counts reads"
    wait_until(lambda: checks(own_operator) >= done + 3, 40, "three drift checks")
    assert api_reads(own_operator) == reads, "a settled drift check read from the API server"

    # The checks still see the platform: an edit there is drift, found without a read.
    agent = next(e for e in installed["status"]["entities"] if e["kind"] == "agent")
    url = f"{platform.url}/v1/workspaces/{workspace}/agents/{agent['id']}"
    current = httpx.get(url, timeout=10).json()
    edited = httpx.patch(
        url, json={"model": "gpt-4.1-mini"}, headers={"If-Match": f'"{current["revision"]}"'}, timeout=10
    )
    assert edited.status_code == 200, edited.text

    def drifted() -> dict[str, object] | None:
        obj = kubectl.get("bundleinstallation", NAME, solo_namespace)
        found = condition(obj, "Drifted")
        return obj if found and found["status"] == "True" else None

    seen = wait_until(drifted, 30, "Drifted=True after the platform-side edit")
    assert f"agent:{agent['key']}" in str(condition(seen, "Drifted"))
    assert api_reads(own_operator) == reads, "finding drift read from the API server"
