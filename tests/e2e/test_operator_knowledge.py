"""The operator with a schema 0.2.0 bundle: knowledge sets and apps, end to end on a real apiserver.

The Bundle carries examples/building-office.yaml inline; the installation maps the tenant bucket,
reads the bucket's credentials from a Secret, and its deletion is held while a source a user added
on the platform would go with the set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bundle_operator.devcluster import Kubectl, wait_until
from tests.e2e.operator_harness import OperatorProcess, platform_list, wait_ready
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CREDENTIALS = {
    "bylaws_access_key": "AKIA-E2E-ONLY-0000",
    "bylaws_secret_key": "e2e-only-secret-0123456789abcdef",
}


def manifests(workspace: str) -> list[dict[str, Any]]:
    document = yaml.safe_load((ROOT / "examples" / "building-office.yaml").read_text())
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "building-office-credentials"},
        "type": "Opaque",
        "stringData": CREDENTIALS,
    }
    bundle = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "Bundle",
        "metadata": {"name": "building-office"},
        "spec": {"source": {"inline": document}},
    }
    installation = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "BundleInstallation",
        "metadata": {"name": "building-office"},
        "spec": {
            "bundleRef": {"name": "building-office"},
            "workspace": workspace,
            "setup": [
                {"key": key, "secretKeyRef": {"name": "building-office-credentials", "key": key}}
                for key in CREDENTIALS
            ],
            "substitutions": {"knowledge_source:s3:acme-bylaws": "s3:dormagen-bylaws"},
        },
    }
    return [secret, bundle, installation]


def test_a_knowledge_bundle_installs_and_its_deletion_waits_for_a_users_own_source(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    path = tmp_path / "building-office.yaml"
    path.write_text(yaml.safe_dump_all(manifests(workspace), sort_keys=False))
    kubectl.apply(path, namespace=namespace)
    installation = wait_ready(kubectl, "bundleinstallation", "building-office", namespace)
    by_entity = {f"{e['kind']}:{e['key']}": e for e in installation["status"]["entities"]}
    assert set(by_entity) == {
        "mcp:permits",
        "knowledge_set:building_law",
        "agent:permit_assistant",
        "app:request_status",
    }
    bundle = wait_ready(kubectl, "bundle", "building-office", namespace)
    assert bundle["status"]["entities"]["knowledgeSets"] == 1 and bundle["status"]["entities"]["apps"] == 1

    [knowledge_set] = platform_list(platform, workspace, "knowledge-sets")
    assert knowledge_set["id"] == by_entity["knowledge_set:building_law"]["id"]
    sources = {s["key"]: s for s in knowledge_set["sources"]}
    assert sources["s3-1"]["bucket"] == "dormagen-bylaws"  # the installation's substitution
    [agent] = platform_list(platform, workspace, "agents")
    assert agent["knowledge_set_ids"] == [knowledge_set["id"]]
    dumped = kubectl.run("get", "bundleinstallation,bundle,events", "-n", namespace, "-o", "json").stdout
    for value in CREDENTIALS.values():
        assert value not in dumped

    # A source the user adds on the platform (engine tests show it is not drift) holds the set:
    own = httpx.post(
        f"{platform.url}/v1/workspaces/{workspace}/knowledge-sets/{knowledge_set['id']}/sources",
        json={"type": "ris", "host": "ris.dormagen.example"},
        timeout=10,
    )
    assert own.status_code == 201, own.text

    # deleting the installation waits for it, saying which source holds the set.
    kubectl.run("delete", "bundleinstallation", "building-office", "-n", namespace, "--wait=false")

    def blocked() -> str | None:
        events = kubectl.run("get", "events", "-n", namespace, "-o", "yaml").stdout
        return events if "UninstallBlocked" in events else None

    events = wait_until(blocked, 60, "the uninstall to be refused")
    assert f"sources/{own.json()['id']}" in events
    assert [s["id"] for s in platform_list(platform, workspace, "knowledge-sets")] == [knowledge_set["id"]]

    # Once the user removes their source, the deletion goes through: the set is deleted and the
    # app archived (running instances of it keep working), with the MCP its tools come from.
    httpx.delete(
        f"{platform.url}/v1/workspaces/{workspace}/knowledge-sets/{knowledge_set['id']}/sources/{own.json()['id']}",
        timeout=10,
    ).raise_for_status()
    wait_until(
        lambda: (
            kubectl.run("get", "bundleinstallation", "-n", namespace, "-o", "name").stdout.strip() == ""
            or None
        ),
        120,
        "the installation to be deleted",
    )
    assert platform_list(platform, workspace, "knowledge-sets") == []
    assert platform_list(platform, workspace, "agents") == []
    [app] = platform_list(platform, workspace, "apps")
    assert app["archived"] is True
    assert len(platform_list(platform, workspace, "mcp-instances")) == 1
