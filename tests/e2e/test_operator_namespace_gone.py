"""A namespace whose uninstall the platform keeps refusing still goes, within the bound the
operator is given (--abandon-uninstall-after), and the operator says what stays on the platform."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.e2e.operator_harness import (
    OperatorProcess,
    apply_object,
    platform_list,
    solo_operator,
    wait_ready,
)
from tests.e2e.test_operator_endpoint import BUNDLE, DOCUMENT
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

ABANDON_AFTER = 5


@pytest.fixture
def own_operator(
    devcluster: DevCluster, crds: None, platform: PlatformProcess, solo_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    extra = ("--abandon-uninstall-after", str(ABANDON_AFTER))
    log = tmp_path / "operator.log"
    with solo_operator(devcluster.kubeconfig, platform.url, log, solo_namespace, extra=extra) as running:
        yield running


def test_a_refused_uninstall_gives_up_once_the_namespace_has_waited_long_enough(
    kubectl: Kubectl,
    own_operator: OperatorProcess,
    platform: PlatformProcess,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    workspace = f"{solo_namespace}-refused"
    kubectl.run(
        "create", "secret", "generic", "platform-token", "-n", solo_namespace, "--from-literal=token=t"
    )
    apply_object(
        kubectl,
        solo_namespace,
        tmp_path,
        {
            "apiVersion": "bundle-operator.dev/v1alpha1",
            "kind": "Bundle",
            "metadata": {"name": BUNDLE},
            "spec": {"source": {"inline": DOCUMENT}},
        },
    )
    apply_object(
        kubectl,
        solo_namespace,
        tmp_path,
        {
            "apiVersion": "bundle-operator.dev/v1alpha1",
            "kind": "BundleInstallation",
            "metadata": {"name": "refused"},
            "spec": {
                "bundleRef": {"name": BUNDLE},
                "workspace": workspace,
                "platform": {
                    "url": platform.url,
                    "tokenSecretRef": {"name": "platform-token", "key": "token"},
                },
            },
        },
    )
    wait_ready(kubectl, "bundleinstallation", "refused", solo_namespace)
    fault = {"method": "DELETE", "path": f"/v1/workspaces/{workspace}/*/*", "times": 100_000, "status": 403}
    armed = httpx.post(f"{platform.url}/_admin/faults", json=fault, timeout=10)
    assert armed.status_code == 201, armed.text
    try:
        started = time.monotonic()
        kubectl.run("delete", "namespace", solo_namespace, "--wait=false")
        wait_until(lambda: kubectl.get_or_none("namespace", solo_namespace) is None, 90, "the namespace gone")
        took = time.monotonic() - started
    finally:
        httpx.delete(f"{platform.url}/_admin/faults", timeout=10).raise_for_status()
    print(f"namespace gone {took:.1f} s after its deletion, the uninstall refused throughout")
    # Nothing could be deleted: the gateway is still there, and the operator said so.
    assert platform_list(platform, workspace, "gateway-bundles")
    log = own_operator.log.read_text(errors="replace")
    assert "UninstallAbandoned" in log and f"workspace '{workspace}'" in log and "gateway:" in log, log[
        -3000:
    ]
