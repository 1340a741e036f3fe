"""A gateway name another gateway bundle of the workspace holds: the operator's status says so
before anything is written (seed 000: what would fail is found first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bundle_operator.devcluster import Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import OperatorProcess, condition, platform_list, resource
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e


def test_a_gateway_name_taken_in_the_workspace_stalls_with_nothing_written(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    taken = httpx.post(
        f"{platform.url}/v1/workspaces/{workspace}/gateway-bundles",
        json={"name": "gwtest"},
        headers={"Idempotency-Key": f"gwtest-{workspace}"},
        timeout=10,
    )
    assert taken.status_code == 201, taken.text
    document = bundle_document(
        "gwtest",
        mcps=[
            {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": "https://w.example.com/mcp"},
            {"key": "notes", "name": "Notes", "type": "url", "endpoint_url": "https://n.example.com/mcp"},
        ],
        gateway={"description": "Weather and notes.", "members": ["weather", "notes"]},
    )
    manifests = [
        resource("Bundle", "gwtest", {"source": {"inline": document}}),
        resource("BundleInstallation", "gwtest", {"bundleRef": {"name": "gwtest"}, "workspace": workspace}),
    ]
    path = tmp_path / "gwtest.yaml"
    path.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    kubectl.apply(path, namespace=namespace)

    def stalled() -> dict[str, Any] | None:
        obj = kubectl.get("bundleinstallation", "gwtest", namespace)
        found = condition(obj, "Stalled")
        return obj if found and found["status"] == "True" else None

    installation = wait_until(stalled, 60, "the installation to stall")
    stalled_condition = condition(installation, "Stalled")
    assert stalled_condition["reason"] == "Blocked"
    assert "name_taken" in stalled_condition["message"] and "gwtest" in stalled_condition["message"]
    issues = installation["status"]["preview"]["issues"]
    assert [(i["code"], i["path"]) for i in issues if i["severity"] == "Blocking"] == [
        ("name_taken", "/name")
    ]
    # Nothing was written: the workspace holds the other bundle only, and no MCP.
    assert platform_list(platform, workspace, "mcp-instances") == []
    assert platform_list(platform, workspace, "mcp-servers") == []
    assert [b["name"] for b in platform_list(platform, workspace, "gateway-bundles")] == ["gwtest"]
