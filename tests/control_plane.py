"""The real control plane of the whole session (etcd, kube-apiserver, kube-controller-manager), one
for every test folder that needs it: the e2e tests and the docs pages' cluster scenes share it.

The binaries come from `make envtest` (which `make test` runs first); without them these tests fail
with the command to run, they are never skipped.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_operator.devcluster import BinariesNotFound, DevCluster, Kubectl, locate

ENVTEST = Path(__file__).resolve().parent / "envtest"


def pinned_version(go_mod: Path, module: str) -> str:
    """The version of `module` that a wrapper go.mod requires."""
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", go_mod.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{go_mod} does not require {module}")
    return match.group(1)


KUBERNETES_VERSION = pinned_version(ENVTEST / "kube" / "go.mod", "k8s.io/kubernetes")
ETCD_VERSION = pinned_version(ENVTEST / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3")

# Lines for the end of the session: how long the control plane took, where the logs are.
STARTUP_NOTES: list[str] = []


@contextlib.contextmanager
def control_plane(workdir: Path) -> Iterator[DevCluster]:
    """etcd, kube-apiserver and kube-controller-manager on loopback, stopped afterwards."""
    try:
        binaries = locate(KUBERNETES_VERSION, ETCD_VERSION)
    except BinariesNotFound as error:
        pytest.fail(f"these tests need the real control plane: {error}")
    cluster = DevCluster(binaries, workdir=workdir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def devcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """The control plane of the whole session."""
    # Under pytest's temporary directory, so the logs of the last runs stay for a post-mortem.
    with control_plane(tmp_path_factory.mktemp("devcluster")) as cluster:
        ready = f"{cluster.ready_seconds:.1f} s"
        STARTUP_NOTES.append(f"devcluster: /readyz after {ready}, logs in {cluster.workdir}")
        yield cluster


@pytest.fixture(scope="session")
def kubernetes_version() -> str:
    """The k8s.io/kubernetes release the control plane is built from (tests/envtest/kube/go.mod)."""
    return KUBERNETES_VERSION


@pytest.fixture(scope="session")
def kubectl(devcluster: DevCluster) -> Kubectl:
    """kubectl as the cluster admin (a client certificate in system:masters)."""
    return Kubectl(devcluster.binaries.kubectl, devcluster.kubeconfig)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report how long the control plane took to become ready."""
    for line in STARTUP_NOTES:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def crds(kubectl: Kubectl) -> None:
    """The project's CRDs, applied from crds/ as the README says."""
    from tests.e2e.operator_harness import apply_crds

    apply_crds(kubectl)
