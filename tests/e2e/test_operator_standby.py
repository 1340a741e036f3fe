"""Two operators with --leader-election on one namespace: exactly one holds the Lease and writes;
SIGKILL of the leader hands over once the lease runs out, SIGTERM at once (the leader releases),
and a leader whose Lease is taken stops and exits non-zero. The platform ends with every entity
once, whichever replica did the work.

Each test runs its own operators on an ``e2e-solo-*`` namespace (the session's operator leaves
those alone) with a short lease so the suite stays quick; the measured takeover times are printed.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from bundle_operator.k8s.process.run import EXIT_LOST_LEASE
from tests.e2e.operator_harness import EXAMPLES, OperatorProcess, wait_ready
from tests.e2e.test_operator_crash import creates_sent, installation_file, inventory, record, slow_creates
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

LEASE = "bundle-operator"


@pytest.fixture
def no_faults(platform: PlatformProcess) -> Iterator[None]:
    """Whatever faults a test injects into the shared platform are gone afterwards."""
    yield
    httpx.delete(f"{platform.url}/_admin/faults", timeout=5)


class Pair:
    """Operators of one test; every one is stopped at the end, whatever happened."""

    def __init__(self, devcluster: DevCluster, platform: PlatformProcess, tmp: Path, namespace: str) -> None:
        self.devcluster, self.platform, self.tmp, self.namespace = devcluster, platform, tmp, namespace
        self.started: list[OperatorProcess] = []

    def start(self, label: str, lease: int, renew: float, retry: float) -> OperatorProcess:
        running = OperatorProcess(
            self.devcluster.kubeconfig,
            self.platform.url,
            self.tmp / f"operator-{label}.log",
            scope=("--namespace", self.namespace),
            extra=(
                "--leader-election",
                "--leader-election-namespace",
                self.namespace,
                "--leader-election-lease-seconds",
                str(lease),
                "--leader-election-renew-seconds",
                str(renew),
                "--leader-election-retry-seconds",
                str(retry),
            ),
        )
        self.started.append(running)
        return running.start()

    def stop_all(self) -> None:
        for running in self.started:
            if running.process is not None and running.process.poll() is None:
                running.stop()


@pytest.fixture
def pair(
    devcluster: DevCluster, crds: None, platform: PlatformProcess, solo_namespace: str, tmp_path: Path
) -> Iterator[Pair]:
    running = Pair(devcluster, platform, tmp_path, solo_namespace)
    try:
        yield running
    finally:
        running.stop_all()


def identity(running: OperatorProcess) -> str:
    """The holder identity an operator without $POD_NAME uses: <hostname>_<pid>."""
    assert running.process is not None
    return f"{socket.gethostname()}_{running.process.pid}"


def lease_spec(kubectl: Kubectl, namespace: str) -> dict[str, Any]:
    lease = kubectl.get_or_none("lease", LEASE, namespace) or {}
    spec: dict[str, Any] = lease.get("spec") or {}
    return spec


def wait_holder(kubectl: Kubectl, namespace: str, holder: str, timeout: float) -> dict[str, Any]:
    """Poll the Lease until ``holder`` holds it; its spec."""

    def held() -> dict[str, Any] | None:
        spec = lease_spec(kubectl, namespace)
        return spec if spec.get("holderIdentity") == holder else None

    return wait_until(held, timeout, f"lease held by {holder}", interval=0.05)


def metric(running: OperatorProcess, name: str) -> float:
    """The sum of every sample of a metric (all label sets) on the operator's /metrics."""
    total = 0.0
    for family in text_string_to_metric_families(running.metrics()):
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
    return total


def writes_anything(running: OperatorProcess) -> float:
    """Reconciles handled and platform calls made: what a replica that writes shows."""
    return metric(running, "bundle_operator_reconciles_total") + metric(
        running, "bundle_operator_platform_calls_total"
    )


def log_lines(running: OperatorProcess) -> list[dict[str, Any]]:
    lines = []
    for line in running.log.read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def log_time(running: OperatorProcess, fragment: str) -> float | None:
    """The wall-clock time (epoch seconds) of the first log line containing ``fragment``."""
    for line in log_lines(running):
        if fragment in line["message"]:
            return datetime.fromisoformat(line["time"].replace("Z", "+00:00")).timestamp()
    return None


def apply_installation(kubectl: Kubectl, tmp: Path, namespace: str, name: str, workspace: str) -> None:
    kubectl.apply(installation_file(tmp, name, workspace), namespace=namespace)


def assert_each_entity_once(
    platform: PlatformProcess, workspaces: list[str], expected: dict[str, list[str]]
) -> None:
    for workspace in workspaces:
        got = inventory(platform, workspace)
        assert got == expected, f"workspace {workspace}"


def test_standby_takes_over_when_the_leader_is_killed(
    kubectl: Kubectl, platform: PlatformProcess, pair: Pair, no_faults: None, tmp_path: Path
) -> None:
    ns = pair.namespace
    lease, renew, retry = 8, 5.0, 1.0
    a = pair.start("a", lease, renew, retry)  # the first one creates the Lease and leads
    b = pair.start("b", lease, renew, retry)  # ready as a standby once it has read the Lease
    spec = wait_holder(kubectl, ns, identity(a), 10)
    assert spec["leaseDurationSeconds"] == lease and spec["leaseTransitions"] == 0
    assert metric(a, "bundle_operator_leader") == 1 and metric(b, "bundle_operator_leader") == 0

    # Only the leader writes: the standby has handled nothing and called no platform.
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=ns)
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=ns)
    wait_ready(kubectl, "bundle", "github-triage", ns)
    started = time.monotonic()
    apply_installation(kubectl, tmp_path, ns, "first", f"{ns}-1")
    wait_ready(kubectl, "bundleinstallation", "first", ns)
    install_seconds = time.monotonic() - started
    expected = inventory(platform, f"{ns}-1")
    assert all(len(names) == len(set(names)) for names in expected.values())
    assert sum(map(len, expected.values())) >= 11
    assert metric(a, "bundle_operator_reconciles_total") > 0
    assert writes_anything(b) == 0
    assert lease_spec(kubectl, ns)["holderIdentity"] == identity(a)

    # An install in flight when the leader dies: the standby finishes it from the journal.
    slow_creates(platform, f"{ns}-2")
    apply_installation(kubectl, tmp_path, ns, "second", f"{ns}-2")
    wait_until(lambda: creates_sent(platform, f"{ns}-2") >= 2, 60, "two creates of 'second'", 0.05)
    assert writes_anything(b) == 0
    killed_wall, killed = time.time(), time.monotonic()
    a.kill()
    # And one applied while nobody leads.
    apply_installation(kubectl, tmp_path, ns, "third", f"{ns}-3")
    spec = wait_holder(kubectl, ns, identity(b), lease + 10)
    to_lease = time.monotonic() - killed
    wait_ready(kubectl, "bundleinstallation", "third", ns, timeout=lease + 60)
    to_ready = time.monotonic() - killed
    wait_ready(kubectl, "bundleinstallation", "second", ns, timeout=120)
    took_over = log_time(b, "now leads")
    assert took_over is not None
    print(
        f"SIGKILL of the leader (lease {lease}s, renew {renew:g}s, retry {retry:g}s): standby holds the "
        f"lease after {to_lease:.2f} s (its log: {took_over - killed_wall:.2f} s); an installation applied "
        f"after the kill is Ready after {to_ready:.2f} s (a clean install took {install_seconds:.2f} s)"
    )
    assert spec["leaseTransitions"] == 1
    # The standby waits a lease duration from the last renewal it saw, then at most one retry.
    assert lease - retry - 1 <= to_lease < lease + retry + 3
    assert to_ready < lease + retry + install_seconds + 10
    assert metric(b, "bundle_operator_leader") == 1

    # Nothing twice: the killed leader's half-done install, the one applied meanwhile, and the
    # first one that the new leader reconciled again on its start.
    httpx.delete(f"{platform.url}/_admin/faults", timeout=5)
    assert_each_entity_once(platform, [f"{ns}-1", f"{ns}-2", f"{ns}-3"], expected)
    for name in ("first", "second", "third"):
        rec = record(kubectl, ns, name)
        assert rec is not None and rec["journal"] == [] and rec["leftovers"] == []
    assert b.stop() == 0


def test_sigterm_hands_the_lease_over_at_once_and_a_taken_lease_stops_the_leader(
    kubectl: Kubectl, platform: PlatformProcess, pair: Pair, tmp_path: Path
) -> None:
    ns = pair.namespace
    # A long lease: a takeover within a few seconds can only come from the release.
    lease, renew, retry = 30, 20.0, 2.0
    a = pair.start("a", lease, renew, retry)
    b = pair.start("b", lease, renew, retry)
    wait_holder(kubectl, ns, identity(a), 10)
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=ns)
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=ns)
    apply_installation(kubectl, tmp_path, ns, "first", f"{ns}-1")
    wait_ready(kubectl, "bundleinstallation", "first", ns)
    expected = inventory(platform, f"{ns}-1")
    assert writes_anything(b) == 0

    stopped_wall, stopped = time.time(), time.monotonic()
    assert a.stop() == 0  # stops kopf, then releases the Lease
    a_exit = time.monotonic() - stopped
    spec = wait_holder(kubectl, ns, identity(b), lease)
    to_lease = time.monotonic() - stopped
    released = log_time(a, "released the lease")
    assert released is not None
    took_over = log_time(b, "now leads")
    assert took_over is not None
    print(
        f"SIGTERM of the leader (lease {lease}s, retry {retry:g}s): it exited after {a_exit:.2f} s, "
        f"released {released - stopped_wall:.2f} s after the signal; the standby holds the lease after "
        f"{to_lease:.2f} s (its log: {took_over - stopped_wall:.2f} s, {took_over - released:.2f} s after "
        f"the release)"
    )
    assert spec["leaseTransitions"] == 1
    assert took_over - released <= retry + 1  # the standby's next try, not the lease duration
    assert to_lease < lease / 2

    apply_installation(kubectl, tmp_path, ns, "second", f"{ns}-2")
    wait_ready(kubectl, "bundleinstallation", "second", ns)
    assert_each_entity_once(platform, [f"{ns}-1", f"{ns}-2"], expected)

    # Someone else takes the Lease: the leader stops reconciling and exits non-zero, to come back
    # as a standby under its Deployment.
    assert b.process is not None
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patch = {"spec": {"holderIdentity": "intruder", "renewTime": now, "acquireTime": now}}
    taken = time.monotonic()
    kubectl.run("patch", "lease", LEASE, "-n", ns, "--type=merge", "-p", json.dumps(patch))
    code = b.process.wait(timeout=retry + 15)
    exited = time.monotonic() - taken
    print(f"lease taken from the leader: it exited with {code} after {exited:.2f} s")
    assert code == EXIT_LOST_LEASE
    assert exited < retry + 5
    assert any("lost the lease" in line["message"] and line["level"] == "ERROR" for line in log_lines(b))
    assert lease_spec(kubectl, ns)["holderIdentity"] == "intruder"  # it wrote nothing on its way out
