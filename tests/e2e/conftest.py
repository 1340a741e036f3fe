"""End-to-end fixtures: one real control plane per session, kubectl on it, a namespace per test.

The binaries come from `make envtest` (which `make test` runs first); without them the e2e tests
fail with the command to run, they are never skipped.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl
from tests.control_plane import STARTUP_NOTES
from tests.e2e.operator_harness import QUICK_REFRESH, OperatorProcess
from tests.integration.platform.platform_harness import PlatformProcess, github_stub, start_platform
from tests.registry_stub import StubRegistry, stub_registry


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


# --- the operator and its platform ---------------------------------------------------------------

GITHUB_FILES = {
    "/acme-labs/agent-skills/main/skills/release-notes/SKILL.md": (
        "---\nname: release-notes\ndescription: Release notes from merged pull requests.\n---\n# Notes\n"
    ),
}


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
    running = OperatorProcess(devcluster.kubeconfig, platform.url, log, env=dict(QUICK_REFRESH)).start()
    STARTUP_NOTES.append(f"operator log: {log}")
    try:
        yield running
    finally:
        if running.process is not None and running.process.poll() is None:
            status = Path(f"/proc/{running.process.pid}/status").read_text()
            rss = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), "?")
            code = running.stop()
            STARTUP_NOTES.append(f"operator: RSS {rss} kB at the session's end; SIGTERM exit code {code}")


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[StubRegistry]:
    """A stub MCP Registry over HTTPS with a throwaway CA (an operator trusts it by SSL_CERT_FILE)."""
    (tmp_path / "registry").mkdir()
    with stub_registry(tmp_path / "registry") as running:
        yield running
