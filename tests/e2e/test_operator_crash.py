"""SIGKILL the operator at five moments of an install; after a restart every installation ends with
exactly the bundle's entities, once each, and nothing left over: the journal in the state Secret
is what makes that work, with no human step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.e2e.operator_harness import EXAMPLES, OperatorProcess, platform_list, state_record_text, wait_ready
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

# Every collection an install of the example writes to.
COLLECTIONS = (
    "mcp-servers",
    "mcp-instances",
    "secrets",
    "skills",
    "agents",
    "channels",
    "triggers",
    "policies",
)


def record(kubectl: Kubectl, namespace: str, installation: str) -> dict[str, Any] | None:
    """The engine record in the installation's state Secret, if written yet."""
    secret = kubectl.get_or_none("secret", f"{installation}-bundle-state", namespace)
    if secret is None:
        return None
    loaded: dict[str, Any] = json.loads(state_record_text(secret))
    return loaded


def inventory(platform: PlatformProcess, workspace: str) -> dict[str, list[str]]:
    """Names (or ids, for nameless kinds) per collection, sorted, duplicates kept."""
    out = {}
    for path in COLLECTIONS:
        items = platform_list(platform, workspace, path)
        out[path] = sorted(str(i.get("name") or i.get("key") or i.get("type") or "?") for i in items)
    return out


def installation_file(tmp: Path, name: str, workspace: str) -> Path:
    text = (EXAMPLES / "github-triage-installation.yaml").read_text()
    text = text.replace("name: github-triage\nspec:", f"name: {name}\nspec:").replace(
        "workspace: acme", f"workspace: {workspace}"
    )
    out = tmp / f"{name}.yaml"
    out.write_text(text)
    return out


def slow_creates(platform: PlatformProcess, workspace: str) -> None:
    """Every call in the workspace takes 400 ms, so an install spans seconds."""
    for method in ("GET", "POST", "PUT", "PATCH"):
        spec = {"method": method, "path": f"/v1/workspaces/{workspace}/*", "times": 100000, "delay_ms": 400}
        httpx.post(f"{platform.url}/_admin/faults", json=spec, timeout=5).raise_for_status()


# (the record in the state Secret, the installation, how many creates reached the platform)
def creates_sent(platform: PlatformProcess, workspace: str) -> int:
    """How many creates the platform received in the workspace (from the slow-down fault's count:
    listing the workspace would itself be slowed down)."""
    faults = httpx.get(f"{platform.url}/_admin/faults", timeout=5).json()["items"]
    return sum(
        f["matched"] for f in faults if f["method"] == "POST" and f["path"] == f"/v1/workspaces/{workspace}/*"
    )


Moment = Callable[[dict[str, Any] | None, dict[str, Any], int], bool]


def _ready(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


MOMENTS: dict[str, Moment] = {
    # Every create of the run is journaled ahead, as pending, before the first is sent; the
    # platform learns of them one by one and the record learns their ids at the end.
    "first-create-in-flight": lambda rec, obj, sent: bool(rec and rec.get("journal")) and sent <= 1,
    "after-2-creates": lambda rec, obj, sent: sent >= 2,
    "after-5-creates": lambda rec, obj, sent: sent >= 5,
    "after-8-creates": lambda rec, obj, sent: sent >= 8,
    # Everything is created and recorded, but the status does not say so yet. Between the last
    # record write and the status write there is no platform call, only milliseconds, so polling
    # cannot stop there: the run is let finish, and the status it wrote is wiped after the kill.
    "recorded-before-status": lambda rec, obj, sent: bool(rec and rec.get("entities")) and _ready(obj),
}
STATUS_LOST = "recorded-before-status"


def test_operator_killed_at_five_moments_ends_with_each_entity_once(
    kubectl: Kubectl,
    devcluster: DevCluster,
    crds: None,
    platform: PlatformProcess,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    ns = solo_namespace
    solo = OperatorProcess(
        devcluster.kubeconfig, platform.url, tmp_path / "operator.log", scope=("--namespace", ns)
    ).start()
    try:
        kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=ns)
        kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=ns)
        wait_ready(kubectl, "bundle", "github-triage", ns)

        # A clean install is the reference for what every killed one must end with.
        reference_ws = f"{ns}-ref"
        kubectl.apply(installation_file(tmp_path, "reference", reference_ws), namespace=ns)
        wait_ready(kubectl, "bundleinstallation", "reference", ns)
        expected = inventory(platform, reference_ws)
        assert all(len(names) == len(set(names)) for names in expected.values())
        assert sum(map(len, expected.values())) >= 11

        for index, (moment, reached) in enumerate(MOMENTS.items()):
            name, workspace = f"crash-{index}", f"{ns}-{index}"
            slow_creates(platform, workspace)
            kubectl.apply(installation_file(tmp_path, name, workspace), namespace=ns)

            def hit(name: str = name, reached: Moment = reached, workspace: str = workspace) -> bool:
                obj = kubectl.get_or_none("bundleinstallation", name, ns) or {}
                return reached(record(kubectl, ns, name), obj, creates_sent(platform, workspace))

            wait_until(hit, 60, f"moment {moment}", interval=0.05)
            solo.kill()
            if moment == STATUS_LOST:
                wiped = {"status": {"conditions": [], "entities": [], "observedGeneration": None}}
                kubectl.run(
                    "patch", "bundleinstallation", name, "-n", ns, "--subresource=status", "--type=merge",
                    "-p", json.dumps(wiped),
                )  # fmt: skip
                assert not _ready(kubectl.get_or_none("bundleinstallation", name, ns) or {})
            solo = OperatorProcess(
                devcluster.kubeconfig, platform.url, tmp_path / "operator.log", scope=("--namespace", ns)
            ).start()
            obj = wait_ready(kubectl, "bundleinstallation", name, ns, timeout=120)
            got = inventory(platform, workspace)
            assert got == expected, f"after a kill at {moment}"
            rec = record(kubectl, ns, name)
            assert rec is not None and rec["journal"] == [] and rec["leftovers"] == []
            assert {e["id"] for e in obj["status"]["entities"] if e["id"]} == {
                p["id"] for e in rec["entities"] for p in e["parts"] if p["role"] == "primary"
            }
        assert solo.stop() == 0  # SIGTERM stops it cleanly
    finally:
        httpx.delete(f"{platform.url}/_admin/faults", timeout=5)
        if solo.process is not None and solo.process.poll() is None:
            solo.stop()
