"""End-to-end fixtures: one real control plane per session, kubectl on it, a namespace per test.

The binaries come from `make envtest` (which `make test` runs first); without them the e2e tests
fail with the command to run, they are never skipped.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_operator.devcluster import BinariesNotFound, DevCluster, Kubectl, locate
from tests.e2e.operator_harness import OperatorProcess
from tests.integration.platform.platform_harness import PlatformProcess, github_stub, start_platform
from tests.registry_stub import StubRegistry, stub_registry

ENVTEST = Path(__file__).resolve().parents[1] / "envtest"
MANIFESTS = Path(__file__).resolve().parent / "manifests"


def pinned_version(go_mod: Path, module: str) -> str:
    """The version of `module` that a wrapper go.mod requires."""
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", go_mod.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{go_mod} does not require {module}")
    return match.group(1)


KUBERNETES_VERSION = pinned_version(ENVTEST / "kube" / "go.mod", "k8s.io/kubernetes")
ETCD_VERSION = pinned_version(ENVTEST / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3")

_startup: list[str] = []


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
        _startup.append(f"devcluster: /readyz after {cluster.ready_seconds:.1f} s, logs in {cluster.workdir}")
        yield cluster


@pytest.fixture(scope="session")
def kubernetes_version() -> str:
    """The k8s.io/kubernetes release the control plane is built from (tests/envtest/kube/go.mod)."""
    return KUBERNETES_VERSION


@pytest.fixture(scope="session")
def kubectl(devcluster: DevCluster) -> Kubectl:
    """kubectl as the cluster admin (a client certificate in system:masters)."""
    return Kubectl(devcluster.binaries.kubectl, devcluster.kubeconfig)


def _created_namespace(kubectl: Kubectl, prefix: str) -> Iterator[str]:
    """A namespace ``<prefix>-<random>``, deleted (without waiting) afterwards."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def namespace(kubectl: Kubectl, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, deleted (without waiting) afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    yield from _created_namespace(kubectl, f"e2e-{slug}")


@pytest.fixture
def solo_namespace(kubectl: Kubectl, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace the session's operator leaves alone (``e2e-solo-*``), for a test that runs
    operators of its own; named after the test module (``test_operator_crash`` gives ``crash``)."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").removeprefix("operator_")
    module = module.replace("_", "-")  # a namespace name takes no underscore
    yield from _created_namespace(kubectl, f"e2e-solo-{module}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report how long the control plane took to become ready."""
    for line in _startup:
        terminalreporter.write_line(line)


# --- the operator and its platform ---------------------------------------------------------------

GITHUB_FILES = {
    "/acme-labs/agent-skills/main/skills/release-notes/SKILL.md": (
        "---\nname: release-notes\ndescription: Release notes from merged pull requests.\n---\n# Notes\n"
    ),
}


@pytest.fixture(scope="session")
def crds(kubectl: Kubectl) -> None:
    """The project's CRDs, applied from crds/ as the README says."""
    from tests.e2e.operator_harness import apply_crds

    apply_crds(kubectl)


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    """The reference platform over HTTP, with fault injection and a GitHub stand-in."""
    with github_stub(GITHUB_FILES) as stub:
        db = tmp_path_factory.mktemp("e2e-platform") / "platform.db"
        running = start_platform(db, "--enable-fault-injection", "--github-base-url", stub.url)
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture(scope="session")
def operator(
    devcluster: DevCluster, crds: None, platform: PlatformProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """One operator for the session, watching every namespace."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    running = OperatorProcess(devcluster.kubeconfig, platform.url, log).start()
    _startup.append(f"operator log: {log}")
    try:
        yield running
    finally:
        if running.process is not None and running.process.poll() is None:
            status = Path(f"/proc/{running.process.pid}/status").read_text()
            rss = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), "?")
            code = running.stop()
            _startup.append(f"operator: RSS {rss} kB at the end of the session; SIGTERM exit code {code}")


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[StubRegistry]:
    """A stub MCP Registry over HTTPS with a throwaway CA (an operator trusts it by SSL_CERT_FILE)."""
    (tmp_path / "registry").mkdir()
    with stub_registry(tmp_path / "registry") as running:
        yield running
