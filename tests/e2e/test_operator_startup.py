"""An operator started on a namespace that already holds more objects of a kind than --workers
reconciles at once still reconciles every one of them: kopf lets no handler run until every object
of every indexed kind is indexed, so a cap on kopf's workers would wait for itself for ever."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl
from tests.e2e.operator_harness import apply_object, solo_operator, wait_ready
from tests.e2e.test_operator_endpoint import DOCUMENT
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

WORKERS = 2
BUNDLES = 6


def test_an_operator_started_on_more_objects_than_its_workers_reconciles_them_all(
    devcluster: DevCluster,
    kubectl: Kubectl,
    crds: None,
    platform: PlatformProcess,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    names = [f"early-{i}" for i in range(BUNDLES)]
    for name in names:  # all there before the operator starts
        apply_object(
            kubectl,
            solo_namespace,
            tmp_path,
            {
                "apiVersion": "bundle-operator.dev/v1alpha1",
                "kind": "Bundle",
                "metadata": {"name": name},
                "spec": {"source": {"inline": {**DOCUMENT, "name": name}}},
            },
        )
    extra = ("--workers", str(WORKERS))
    with solo_operator(
        devcluster.kubeconfig, platform.url, tmp_path / "operator.log", solo_namespace, extra=extra
    ):
        for name in names:
            wait_ready(kubectl, "bundle", name, solo_namespace, timeout=60)
