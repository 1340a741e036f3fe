"""The chart's finalizer policy: the API server itself sets the operator's finalizer on each new
BundleInstallation and Endpoint in a namespace the operator watches, so the operator's first pass
over a new installation does not have to patch it in, and nothing changes for the namespaces it
does not watch. Rendered from the chart by helm, applied to the dev cluster's real API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.e2e.operator_harness import (
    EXAMPLES,
    FINALIZER,
    dry_run_create,
    finalizer_policy,
    policy_in_force,
    resource,
    solo_operator,
    wait_ready,
)
from tests.e2e.test_chart import finalizer_owners, helm  # noqa: F401  (helm is a fixture)
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

NAME = "github-triage"


@pytest.fixture
def policy(helm: Path, kubectl: Kubectl, solo_namespace: str) -> Iterator[str]:  # noqa: F811
    """The chart's policy for an operator that watches only the test's namespace; removed after."""
    docs = finalizer_policy(solo_namespace.removeprefix("e2e-solo-"), [solo_namespace])
    assert [d["kind"] for d in docs] == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    kubectl.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))
    try:
        wait_until(lambda: policy_in_force(kubectl, solo_namespace), 30, "the policy to be in force")
        yield solo_namespace
    finally:
        for doc in reversed(docs):
            kubectl.run("delete", doc["kind"], doc["metadata"]["name"], "--ignore-not-found", check=False)


def installation(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    obj = resource("BundleInstallation", name, {"bundleRef": {"name": "b"}, "workspace": "w"})
    if finalizers is not None:
        obj["metadata"]["finalizers"] = finalizers
    return obj


def created(kubectl: Kubectl, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    stored = dry_run_create(kubectl, obj, namespace)
    assert stored is not None
    return stored


def test_the_api_server_sets_the_finalizer_in_watched_namespaces_only(
    kubectl: Kubectl, crds: None, policy: str
) -> None:
    kept = created(kubectl, installation("mine", ["example.com/keep"]), policy)
    assert kept["metadata"]["finalizers"] == ["example.com/keep", FINALIZER], "added once, after the user's"
    already = created(kubectl, installation("twice", [FINALIZER]), policy)
    assert already["metadata"]["finalizers"] == [FINALIZER]
    endpoint = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "Endpoint",
        "metadata": {"name": "gw"},
        "spec": {"installationRef": {"name": "mine"}, "credentialsSecretName": "gw-key"},
    }
    assert created(kubectl, endpoint, policy)["metadata"]["finalizers"] == [FINALIZER]
    # A namespace the operator does not watch: a finalizer there would keep every delete waiting.
    other = "default"
    assert "finalizers" not in created(kubectl, installation("elsewhere"), other)["metadata"]

    # Namespace patterns are matched by the operator, not by the API server: no policy at all.
    assert finalizer_policy("p", ["team-*,!team-x"]) == []


def state_secrets(kubectl: Kubectl, namespace: str) -> list[str]:
    out = kubectl.run("get", "secrets", "-n", namespace, "-o", "name").stdout
    return [line for line in out.split() if line.endswith("-bundle-state")]


def test_the_operator_installs_and_uninstalls_without_adding_the_finalizer_itself(
    devcluster: DevCluster,
    kubectl: Kubectl,
    crds: None,
    platform: PlatformProcess,
    policy: str,
    tmp_path: Path,
) -> None:
    ns = policy
    spec = yaml.safe_load((EXAMPLES / "github-triage-installation.yaml").read_text())
    spec["spec"]["workspace"] = ns
    path = tmp_path / "installation.yaml"
    path.write_text(yaml.safe_dump(spec))
    with solo_operator(devcluster.kubeconfig, platform.url, tmp_path / "operator.log", ns):
        kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=ns)
        kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=ns)
        kubectl.apply(path, namespace=ns)
        wait_ready(kubectl, "bundleinstallation", NAME, ns)
        assert kubectl.get("bundleinstallation", NAME, ns)["metadata"]["finalizers"] == [FINALIZER]
        # The finalizer came with the create, which admission changes leave without a field manager;
        # a patch of the operator's own (as without the policy) would make it the finalizer's owner.
        assert finalizer_owners(kubectl, NAME, ns) == []

        # The operator releases a finalizer it did not add, as its own, once it has uninstalled.
        kubectl.run("delete", "bundleinstallation", NAME, "-n", ns, "--wait=false")
        wait_until(
            lambda: kubectl.get_or_none("bundleinstallation", NAME, ns) is None,
            60,
            "the uninstall to finish and release the finalizer",
        )
        assert not state_secrets(kubectl, ns), "the uninstall removed the installation's record"
