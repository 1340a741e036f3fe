"""A Bundle from an MCP Registry record, end to end: the operator on the dev control plane reads the
stub registry over HTTPS (trusting its CA only through SSL_CERT_FILE, as a private registry would
be trusted), installs the record's archive into the reference platform, follows ``latest`` when a
new version is published, and stalls with the reasons of DESIGN.md §9.3.

The test runs its own operator on an ``e2e-solo-*`` namespace, since only it has SSL_CERT_FILE set.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, WaitTimeout, wait_until
from tests.e2e.operator_harness import (
    OperatorProcess,
    condition,
    platform_list,
    registry_operator,
    resource,
    wait_ready,
)
from tests.integration.platform.platform_harness import PlatformProcess
from tests.registry_stub import StubRegistry, archive

pytestmark = pytest.mark.e2e
SERVER = "io.github.example/weather"


@pytest.fixture
def operator(
    devcluster: DevCluster,
    crds: None,
    platform: PlatformProcess,
    solo_namespace: str,
    registry: StubRegistry,
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    log = tmp_path / "operator.log"
    with registry_operator(
        devcluster.kubeconfig, platform.url, log, solo_namespace, registry.tls.ca_file
    ) as running:
        yield running


def events(kubectl: Kubectl, namespace: str, reason: str) -> list[str]:
    items = json.loads(kubectl.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [e["message"] for e in items if e["reason"] == reason]


def registry_bundle(name: str, registry: StubRegistry, server: str = SERVER, **fields: Any) -> dict[str, Any]:
    return resource(
        "Bundle", name, {"source": {"registry": {"url": registry.url, "server": server, **fields}}}
    )


def stalled(kubectl: Kubectl, name: str, namespace: str) -> dict[str, Any]:
    obj = kubectl.wait_for_condition("bundle", name, "Stalled", namespace=namespace, timeout=60)
    found = condition(obj, "Stalled")
    assert found is not None
    return dict(found)


def test_a_registry_bundle_installs_and_follows_latest(
    kubectl: Kubectl,
    operator: OperatorProcess,
    registry: StubRegistry,
    platform: PlatformProcess,
    solo_namespace: str,
) -> None:
    ns, workspace = solo_namespace, f"reg-{int(time.time())}"
    body = archive(version="1.2.0")
    registry.publish(SERVER, "1.2.0", body)
    kubectl.apply(registry_bundle("weather", registry, refreshInterval="5s"), namespace=ns)
    bundle = wait_ready(kubectl, "bundle", "weather", ns)
    status: Any = bundle["status"]
    assert status["source"] == {
        "registry": registry.url,
        "server": SERVER,
        "version": "1.2.0",
        "packageUrl": registry.file_url("io.github.example_weather-1.2.0.mcpb"),
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    assert status["version"] == "1.2.0" and status["signature"] == {"status": "Unsigned"}
    assert [f["key"] for f in status["setupFields"]] == ["api_key", "units"]

    kubectl.run("create", "secret", "generic", "weather-key", "-n", ns, "--from-literal=api_key=k-123")
    kubectl.apply(
        resource(
            "BundleInstallation",
            "weather",
            {
                "bundleRef": {"name": "weather"},
                "workspace": workspace,
                "setup": [{"key": "api_key", "secretKeyRef": {"name": "weather-key", "key": "api_key"}}],
            },
        ),
        namespace=ns,
    )
    installed = wait_ready(kubectl, "bundleinstallation", "weather", ns)
    assert installed["status"]["installedVersion"] == "1.2.0"  # type: ignore[index]
    [server] = platform_list(platform, workspace, "mcp-servers")
    assert server["name"] == "Weather" and server["type"] == "command"  # the display_name

    # A new version of latest: the Bundle reads it at its next refresh, the installation updates.
    registry.publish(SERVER, "1.3.0", archive(version="1.3.0"))
    wait_until(
        lambda: kubectl.get("bundle", "weather", ns)["status"]["source"]["version"] == "1.3.0" or None,
        60,
        "the Bundle to resolve 1.3.0",
    )
    wait_until(
        lambda: (
            (kubectl.get("bundleinstallation", "weather", ns).get("status") or {}).get("installedVersion")
            == "1.3.0"
            or None
        ),
        90,
        "the installation to update to 1.3.0",
    )
    assert any("resolves to 1.3.0 (was 1.2.0)" in m for m in events(kubectl, ns, "RegistryVersionChanged"))
    assert len(platform_list(platform, workspace, "mcp-servers")) == 1

    # Deprecated: still installed, with a Warning event.
    registry.publish(SERVER, "1.3.0", archive(version="1.3.0"), status="deprecated", status_message="use 2.x")
    wait_until(lambda: events(kubectl, ns, "RegistryRecordDeprecated") or None, 60, "a deprecation event")

    # Deleted in the registry: the Bundle stops claiming a digest, the installation keeps what it has.
    registry.publish(
        SERVER, "1.3.0", archive(version="1.3.0"), status="deleted", status_message="compromised"
    )
    found = stalled(kubectl, "weather", ns)
    assert found["reason"] == "RegistryRecordDeleted" and "compromised" in str(found["message"])
    assert kubectl.get("bundle", "weather", ns)["status"].get("source") is None
    assert len(platform_list(platform, workspace, "mcp-servers")) == 1


# How many times the test below applies a Bundle and its installation together: a few in `make test`,
# more to hunt the race (BUNDLE_E2E_TOGETHER_RUNS=50).
TOGETHER_RUNS = int(os.environ.get("BUNDLE_E2E_TOGETHER_RUNS") or 4)
# "Within seconds": what an installation may take to follow its Bundle on a busy machine.
FOLLOW_SECONDS = 30.0


def test_a_registry_bundle_and_its_installation_applied_together_install(
    kubectl: Kubectl,
    operator: OperatorProcess,
    registry: StubRegistry,
    platform: PlatformProcess,
    solo_namespace: str,
) -> None:
    """One `kubectl apply` of both, as a GitOps tool applies a folder, in either order: the
    installation follows its Bundle once the Bundle has resolved, each time."""
    ns = solo_namespace
    registry.publish(SERVER, "1.2.0", archive(version="1.2.0"))
    kubectl.run("create", "secret", "generic", "weather-key", "-n", ns, "--from-literal=api_key=k-123")
    for run in range(TOGETHER_RUNS):
        name, workspace = f"together-{run}", f"together-{run}-{int(time.time())}"
        bundle = registry_bundle(name, registry)
        installation = resource(
            "BundleInstallation",
            name,
            {
                "bundleRef": {"name": name},
                "workspace": workspace,
                "setup": [{"key": "api_key", "secretKeyRef": {"name": "weather-key", "key": "api_key"}}],
            },
        )
        both = [bundle, installation] if run % 2 == 0 else [installation, bundle]
        kubectl.apply(yaml.safe_dump_all(both, sort_keys=False), namespace=ns)
        try:
            installed = wait_ready(kubectl, "bundleinstallation", name, ns, timeout=FOLLOW_SECONDS)
        except WaitTimeout:
            status = (kubectl.get("bundleinstallation", name, ns).get("status") or {}).get("conditions")
            pytest.fail(f"run {run}: the installation did not follow its Bundle: {status}")
        assert installed["status"]["installedVersion"] == "1.2.0", (run, installed["status"])  # type: ignore[index]
        assert len(platform_list(platform, workspace, "mcp-servers")) == 1


def test_refused_records_stall_with_their_reasons(
    kubectl: Kubectl, operator: OperatorProcess, registry: StubRegistry, solo_namespace: str
) -> None:
    cases: dict[str, tuple[dict[str, Any] | None, str]] = {
        "no-digest": ({"sha256": None}, "RegistryChecksumMissing"),
        "plain-http": ({"identifier": "http://127.0.0.1:9/weather.mcpb"}, "InsecurePackageUrl"),
        "mismatch": ({"sha256": "0" * 64}, "ChecksumMismatch"),
        "unknown": (None, "RegistryRecordNotFound"),
    }
    for name, (publish, _) in cases.items():
        server = f"io.github.example/{name}"
        if publish is not None:
            registry.publish(server, "1.0.0", archive(), **publish)
        kubectl.apply(registry_bundle(name, registry, server=server), namespace=solo_namespace)
    for name, (_, reason) in cases.items():
        found = stalled(kubectl, name, solo_namespace)
        assert found["reason"] == reason, found
        assert str(found["message"]).startswith("spec.source.registry: ")
    assert registry.hits["/files/io.github.example_no-digest-1.0.0.mcpb"] == 0
    assert registry.hits["/files/io.github.example_mismatch-1.0.0.mcpb"] == 1  # checked, never used


def test_the_crd_refuses_server_names_with_path_tricks(
    kubectl: Kubectl, crds: None, solo_namespace: str
) -> None:
    for server in ("../etc", "io.github.example/..", "a/b/c", "a%2Fb/c"):
        done = kubectl.apply(
            resource(
                "Bundle",
                "tricky",
                {"source": {"registry": {"url": "https://registry.example", "server": server}}},
            ),
            namespace=solo_namespace,
            check=False,
        )
        assert done.returncode != 0 and "spec.source.registry.server" in done.stderr, done.stderr
