"""Degraded: an Endpoint whose member goes down says so, naming it, and recovers on its own.

The members are the real MCP servers of tests/mcp_members.py on fixed loopback ports, stopped and
started again on the same ports; the test runs its own platform (discovery every 2 s) and operator
on an ``e2e-solo-*`` namespace, so the round trip rides the Endpoint's own refresh timer.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from bundle_operator.reference_platform.process import PlatformProcess, start_platform
from tests.documents import bundle_document
from tests.e2e.operator_harness import (
    QUICK_REFRESH,
    OperatorProcess,
    apply_object,
    condition,
    solo_operator,
    wait_ready,
)
from tests.mcp_members import members_thread

pytestmark = pytest.mark.e2e


def free_ports(count: int) -> list[int]:
    found = []
    for _ in range(count):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            found.append(sock.getsockname()[1])
    return found


@pytest.fixture
def own_platform(tmp_path: Path) -> Iterator[PlatformProcess]:
    running = start_platform(tmp_path / "platform.db", "--discovery-interval", "2")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def own_operator(
    devcluster: DevCluster, crds: None, own_platform: PlatformProcess, solo_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    log = tmp_path / "operator.log"
    quick = dict(QUICK_REFRESH)
    with solo_operator(devcluster.kubeconfig, own_platform.url, log, solo_namespace, env=quick) as running:
        yield running


def degraded(kubectl: Kubectl, namespace: str, status: str) -> dict[str, Any] | None:
    obj = kubectl.get("bep", "planner", namespace)
    found = condition(obj, "Degraded")
    return dict(found) if found is not None and found["status"] == status else None


def test_a_member_down_makes_the_endpoint_degraded_until_it_is_back(
    kubectl: Kubectl, own_operator: OperatorProcess, solo_namespace: str, tmp_path: Path
) -> None:
    ns = solo_namespace
    weather_port, notes_port = free_ports(2)
    ports = {"weather": weather_port, "notes": notes_port}
    with members_thread(ports=ports) as members:
        document = bundle_document(
            "planner",
            mcps=[
                {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": members.url("weather")},
                {"key": "notes", "name": "Notes", "type": "url", "endpoint_url": members.url("notes")},
            ],
            gateway={"description": "Forecasts and notes.", "members": ["weather", "notes"]},
        )
        specs = {
            "Bundle": {"source": {"inline": document}},
            "BundleInstallation": {"bundleRef": {"name": "planner"}, "workspace": ns},
            "Endpoint": {"installationRef": {"name": "planner"}, "credentialsSecretName": "planner-key"},
        }
        for kind, spec in specs.items():
            manifest = {"apiVersion": "bundle-operator.dev/v1alpha1", "kind": kind}
            apply_object(kubectl, ns, tmp_path, {**manifest, "metadata": {"name": "planner"}, "spec": spec})
            if kind == "BundleInstallation":
                wait_ready(kubectl, "bundleinstallation", "planner", ns)
        wait_until(lambda: degraded(kubectl, ns, "False"), 90, "the Endpoint served with both members")
    # The members stop: the endpoint keeps serving, Degraded names them.
    started = time.monotonic()
    found = wait_until(lambda: degraded(kubectl, ns, "True"), 90, "Degraded=True")
    print(f"Degraded after {time.monotonic() - started:.1f} s")
    assert found["reason"] == "MemberUnavailable"
    assert "weather" in found["message"] and "notes" in found["message"]
    assert condition(kubectl.get("bep", "planner", ns), "Ready")["status"] == "True"
    # Back on the same ports: Degraded clears without anyone touching the Endpoint.
    with members_thread(ports=ports):
        started = time.monotonic()
        recovered = wait_until(lambda: degraded(kubectl, ns, "False"), 90, "Degraded=False again")
        print(f"recovered after {time.monotonic() - started:.1f} s")
        assert recovered["reason"] == "MembersAvailable"
