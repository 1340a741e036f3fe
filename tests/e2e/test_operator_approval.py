"""The approval gate on the dev control plane: under spec.approval Manual the operator shows its
plan in status.plan, writes nothing to the platform until spec.approvedPlan names that exact plan,
never applies an outdated approval, and holds a deletion until its Uninstall plan is approved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import condition, platform_list, resource, wait_ready
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("operator")]

BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
NAME = "gated"
BUNDLE = "gate-kit"


def document(instructions: str) -> dict[str, Any]:
    return bundle_document(
        BUNDLE,
        agents=[{"key": "bot", "name": "Gate Bot", "model": "gpt-5", "instructions": instructions}],
        policies=[{"key": "cap", "type": "spend_cap", "agent": "bot", "config": {"limit_usd": 10}}],
    )


def apply(kubectl: Kubectl, tmp_path: Path, namespace: str, *objects: dict[str, Any]) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    kubectl.apply(path, namespace=namespace)


def bundle(instructions: str) -> dict[str, Any]:
    return resource("Bundle", BUNDLE, {"source": {"inline": document(instructions)}})


def installation(namespace: str, **extra: Any) -> dict[str, Any]:
    return resource(
        "BundleInstallation", NAME, {"bundleRef": {"name": BUNDLE}, "workspace": namespace, **extra}
    )


def waiting(
    kubectl: Kubectl, namespace: str, not_id: str | None = None, timeout: float = 60
) -> dict[str, Any]:
    """The installation once a plan other than ``not_id`` waits for approval (its spec observed)."""

    def check() -> dict[str, Any] | None:
        obj = kubectl.get_or_none("bundleinstallation", NAME, namespace)
        if obj is None:
            return None
        ready, plan = condition(obj, "Ready"), (obj.get("status") or {}).get("plan") or {}
        if ready is None or ready.get("reason") != "AwaitingApproval" or not plan.get("id"):
            return None
        if plan["id"] == not_id:
            return None
        return obj

    found: dict[str, Any] = wait_until(check, timeout, "a plan waiting for approval")
    return found


def agent_instructions(platform: PlatformProcess, workspace: str) -> list[str]:
    return [a["instructions"] for a in platform_list(platform, workspace, "agents")]


def events(kubectl: Kubectl, namespace: str, reason: str) -> list[str]:
    items = json.loads(kubectl.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [
        e.get("message", "")
        for e in items
        if e.get("reason") == reason and e.get("involvedObject", {}).get("name") == NAME
    ]


def approve(devcluster: DevCluster, namespace: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(devcluster.kubeconfig)}
    return subprocess.run(
        [BUNDLECTL, "approve", NAME, "-n", namespace, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def patch_approval(kubectl: Kubectl, namespace: str, plan_id: str) -> None:
    patch = json.dumps({"spec": {"approvedPlan": plan_id}})
    kubectl.run("patch", "bundleinstallation", NAME, "-n", namespace, "--type", "merge", "-p", patch)


def installed_manually(
    kubectl: Kubectl, devcluster: DevCluster, namespace: str, tmp_path: Path
) -> tuple[dict[str, Any], str]:
    """A Manual installation whose Install plan was shown, checked and approved with bundlectl."""
    apply(kubectl, tmp_path, namespace, bundle("Be brief."), installation(namespace, approval="Manual"))
    plan = waiting(kubectl, namespace)["status"]["plan"]
    wrong = approve(devcluster, namespace, "--plan", "sha256:" + "0" * 64)
    assert wrong.returncode == 1 and "nothing was approved" in wrong.stderr
    assert "approvedPlan" not in kubectl.get("bundleinstallation", NAME, namespace)["spec"]
    done = approve(devcluster, namespace)
    assert done.returncode == 0, done.stderr
    obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    return obj, plan["id"]


def test_a_manual_install_shows_its_plan_writes_nothing_and_applies_the_approved_plan(
    kubectl: Kubectl, devcluster: DevCluster, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, namespace, bundle("Be brief."), installation(namespace, approval="Manual"))
    obj = waiting(kubectl, namespace)
    plan = obj["status"]["plan"]
    assert plan["operation"] == "Install" and plan["summary"] == "Install: 2 create"
    assert [(e["kind"], e["key"], e["action"]) for e in plan["entities"]] == [
        ("agent", "bot", "create"),
        ("policy", "cap", "create"),
    ]
    assert plan["id"].startswith("sha256:") and len(plan["id"]) == 71
    ready, stalled = condition(obj, "Ready"), condition(obj, "Stalled")
    assert (
        ready is not None
        and plan["id"] in str(ready["message"])
        and f"bundlectl approve {NAME}" in str(ready["message"])
    )
    assert stalled is not None and stalled["status"] == "False"
    assert platform_list(platform, namespace, "agents") == []  # nothing was written
    assert any(plan["id"] in m for m in events(kubectl, namespace, "PlanReady"))
    columns = kubectl.run("get", "bundleinstallation", NAME, "-n", namespace).stdout
    assert "Install: 2 create" in columns and "AwaitingApproval" in columns

    # The same inputs keep the same plan: a forced reconcile shows the same id.
    kubectl.run(
        "annotate",
        "bundleinstallation",
        NAME,
        "-n",
        namespace,
        "bundle-operator.dev/reconcile-requested-at=now",
        "--overwrite",
    )
    assert waiting(kubectl, namespace)["status"]["plan"]["id"] == plan["id"]

    wrong = approve(devcluster, namespace, "--plan", "sha256:" + "0" * 64)
    assert wrong.returncode == 1 and "nothing was approved" in wrong.stderr
    shown = approve(devcluster, namespace, "--plan", plan["id"])
    assert shown.returncode == 0, shown.stderr
    assert plan["id"] in shown.stdout and "create  agent:bot" in shown.stdout
    obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    assert obj["status"]["plan"].get("id") is None and obj["status"]["plan"]["lastAppliedId"] == plan["id"]
    assert agent_instructions(platform, namespace) == ["Be brief."]
    assert events(kubectl, namespace, "PlanApproved")
    # A spent approval is neither applied again nor called outdated.
    again = approve(devcluster, namespace)
    assert again.returncode == 1 and "no plan" in again.stderr


def test_an_update_waits_for_its_own_approval_and_an_outdated_approval_is_never_applied(
    kubectl: Kubectl, devcluster: DevCluster, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    _, installed = installed_manually(kubectl, devcluster, namespace, tmp_path)
    apply(kubectl, tmp_path, namespace, bundle("Be thorough."))
    first = waiting(kubectl, namespace)["status"]["plan"]
    assert first["operation"] == "Update"
    by_entity = {(e["kind"], e["key"]): e for e in first["entities"]}
    assert by_entity[("agent", "bot")]["action"] == "update"
    assert by_entity[("agent", "bot")]["paths"] == ["/instructions"]
    assert by_entity[("policy", "cap")]["action"] == "keep"
    assert agent_instructions(platform, namespace) == ["Be brief."]  # installed entities stay as they are
    assert not events(kubectl, namespace, "ApprovedPlanOutdated")  # the spent approval is not outdated

    # The bundle changes again before anyone approves: approving the plan that was shown first
    # is an approval of an outdated plan, and nothing is written.
    apply(kubectl, tmp_path, namespace, bundle("Be quick."))
    second = waiting(kubectl, namespace, not_id=first["id"])["status"]["plan"]
    patch_approval(kubectl, namespace, first["id"])
    wait_until(
        lambda: events(kubectl, namespace, "ApprovedPlanOutdated") or None,
        60,
        "the ApprovedPlanOutdated event",
    )
    obj = waiting(kubectl, namespace)
    assert obj["status"]["plan"]["id"] == second["id"]
    assert agent_instructions(platform, namespace) == ["Be brief."]

    # An approval racing a bundle change: whatever the operator saw first, only an approved plan
    # reaches the platform ("Be quick." was never approved, "Be slow." neither).
    apply(kubectl, tmp_path, namespace, bundle("Be slow."))
    patch_approval(kubectl, namespace, second["id"])
    third = waiting(kubectl, namespace, not_id=second["id"])["status"]["plan"]
    assert agent_instructions(platform, namespace) in (["Be brief."], ["Be quick."])
    assert third["id"] not in (installed, first["id"], second["id"])

    patch_approval(kubectl, namespace, third["id"])
    obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    assert obj["status"]["plan"]["lastAppliedId"] == third["id"]
    assert agent_instructions(platform, namespace) == ["Be slow."]


def test_deleting_a_manual_installation_waits_for_an_approved_uninstall_plan(
    kubectl: Kubectl, devcluster: DevCluster, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    installed_manually(kubectl, devcluster, namespace, tmp_path)
    kubectl.run("delete", "bundleinstallation", NAME, "-n", namespace, "--wait=false")
    plan = waiting(kubectl, namespace)["status"]["plan"]
    assert plan["operation"] == "Uninstall"
    assert sorted((e["kind"], e["key"], e["action"]) for e in plan["entities"]) == [
        ("agent", "bot", "delete"),
        ("policy", "cap", "delete"),
    ]
    assert len(platform_list(platform, namespace, "agents")) == 1  # nothing deleted yet
    done = approve(devcluster, namespace)
    assert done.returncode == 0, done.stderr
    kubectl.wait_for_deletion("bundleinstallation", NAME, namespace, timeout=60)
    assert platform_list(platform, namespace, "agents") == []
    assert platform_list(platform, namespace, "policies") == []


def test_a_malformed_approval_is_refused_and_one_on_an_auto_installation_is_harmless(
    kubectl: Kubectl, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    refused = kubectl.apply(
        yaml.safe_dump(installation(namespace, approval="Manual", approvedPlan="yes please")),
        namespace=namespace,
        check=False,
    )
    assert refused.returncode != 0 and "spec.approvedPlan" in refused.stderr
    auto = installation(namespace, approvedPlan="sha256:" + "a" * 64)
    apply(kubectl, tmp_path, namespace, bundle("Be brief."), auto)
    obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    assert (obj.get("status") or {}).get("plan") is None
    assert agent_instructions(platform, namespace) == ["Be brief."]
    wait_until(lambda: events(kubectl, namespace, "ApprovalIgnored") or None, 30, "the ApprovalIgnored event")


def test_drift_correction_under_manual_waits_for_an_approved_correct_plan(
    kubectl: Kubectl, devcluster: DevCluster, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    drift = {"interval": "5s", "mode": "Correct"}
    apply(
        kubectl,
        tmp_path,
        namespace,
        bundle("Be brief."),
        installation(namespace, approval="Manual", driftPolicy=drift),
    )
    install = waiting(kubectl, namespace)["status"]["plan"]
    patch_approval(kubectl, namespace, install["id"])
    wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    [agent] = platform_list(platform, namespace, "agents")
    edit = {"instructions": "Ramble on."}
    answer = httpx.patch(
        f"{platform.url}/v1/workspaces/{namespace}/agents/{agent['id']}",
        json=edit,
        headers={"If-Match": f'"{agent["revision"]}"'},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    plan = waiting(kubectl, namespace, not_id=install["id"])["status"]["plan"]
    assert plan["operation"] == "Correct"
    assert [(e["kind"], e["key"], e["action"], e["paths"]) for e in plan["entities"]] == [
        ("agent", "bot", "update", ["/instructions"])
    ]
    assert agent_instructions(platform, namespace) == ["Ramble on."]  # not written back unapproved
    done = approve(devcluster, namespace)
    assert done.returncode == 0, done.stderr
    wait_until(
        lambda: agent_instructions(platform, namespace) == ["Be brief."] or None,
        60,
        "the approved correction",
    )
    obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    assert obj["status"]["plan"]["lastAppliedId"] == plan["id"]
