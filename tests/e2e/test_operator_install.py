"""The operator end to end: `kubectl apply` of the examples becomes platform entities, with status."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.devcluster import Kubectl, wait_until
from tests.e2e.operator_harness import (
    EXAMPLES,
    OperatorProcess,
    condition,
    platform_list,
    wait_ready,
    with_workspace,
)
from tests.integration.engine.harness import TRIAGE_ENTITIES
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

EXAMPLE_SECRETS = (
    "github_pat_EXAMPLE_ONLY_0000000000000000000000",
    "123456789:EXAMPLE-ONLY-not-a-real-bot-token",
)


def test_example_installs_and_reports_ids(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    started = time.monotonic()
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=namespace)
    kubectl.apply(
        with_workspace(EXAMPLES / "github-triage-installation.yaml", tmp_path, workspace), namespace=namespace
    )
    installation = wait_ready(kubectl, "bundleinstallation", "github-triage", namespace)
    took = time.monotonic() - started
    print(f"kubectl apply to Ready: {took:.2f} s")

    status = installation["status"]
    assert status["installedVersion"] == "1.4.0"
    assert status["installedDigest"].startswith("sha256:")
    by_entity = {f"{e['kind']}:{e['key']}": e for e in status["entities"]}
    assert set(by_entity) >= set(TRIAGE_ENTITIES)
    assert all(e["id"] and e["action"] == "Created" for e in by_entity.values())
    agents = platform_list(platform, workspace, "agents")
    assert [a["id"] for a in agents] == [by_entity["agent:triage_bot"]["id"]]
    assert agents[0]["model"] == "gpt-5"  # the substitution took effect
    assert condition(installation, "Installed")["status"] == "True"
    assert condition(installation, "Activated")["status"] == "False"
    assert condition(installation, "Drifted")["status"] == "False"
    assert status["preview"]["blocking"] is False

    bundle = wait_ready(kubectl, "bundle", "github-triage", namespace)
    assert bundle["status"]["bundleName"] == "github-triage"
    assert bundle["status"]["digest"] == status["installedDigest"]
    assert bundle["status"]["entities"]["mcps"] == 1

    # The record lives in a Secret the installation owns; no secret value sits in any object.
    state = kubectl.get("secret", "github-triage-bundle-state", namespace)
    assert state["metadata"]["ownerReferences"][0]["kind"] == "BundleInstallation"
    dumped = kubectl.run("get", "bundleinstallation,bundle,events", "-n", namespace, "-o", "json").stdout
    for value in EXAMPLE_SECRETS:
        assert value not in dumped
    events = json.loads(kubectl.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    assert "Installed" in {e["reason"] for e in events}

    # A second apply of the same files writes nothing: the platform is not called to create.
    calls_before = len(platform_list(platform, workspace, "agents"))
    kubectl.run(
        "annotate",
        "bundleinstallation",
        "github-triage",
        "-n",
        namespace,
        f"bundle-operator.dev/reconcile-requested-at={time.time()}",
        "--overwrite",
    )
    wait_until(
        lambda: kubectl.get("bundleinstallation", "github-triage", namespace)["status"]["entities"] or None,
        30,
        "status after the reconcile request",
    )
    assert len(platform_list(platform, workspace, "agents")) == calls_before


def test_second_installation_of_the_same_bundle_into_one_workspace_is_refused(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=namespace)
    first = with_workspace(EXAMPLES / "github-triage-installation.yaml", tmp_path, namespace)
    kubectl.apply(first, namespace=namespace)
    wait_ready(kubectl, "bundleinstallation", "github-triage", namespace)

    second = tmp_path / "second.yaml"
    second.write_text(first.read_text().replace("name: github-triage\nspec:", "name: triage-again\nspec:"))
    kubectl.apply(second, namespace=namespace)

    def stalled() -> dict[str, Any] | None:
        obj = kubectl.get("bundleinstallation", "triage-again", namespace)
        found = condition(obj, "Stalled")
        return found if found and found["status"] == "True" else None

    cond = wait_until(stalled, 60, "the second installation to stall")
    assert cond["reason"] == "DuplicateInstallation"
    assert f"{namespace}/github-triage" in cond["message"]
    # One agent: the second installation wrote nothing, and the two never fight.
    assert len(platform_list(platform, namespace, "agents")) == 1
    assert (
        condition(kubectl.get("bundleinstallation", "github-triage", namespace), "Ready")["status"] == "True"
    )


def test_paused_installation_reports_without_writing(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=namespace)
    paused = with_workspace(EXAMPLES / "github-triage-installation.yaml", tmp_path, namespace)
    paused.write_text(
        paused.read_text().replace(
            "  name: github-triage\nspec:",
            '  name: github-triage\n  annotations:\n    bundle-operator.dev/paused: "true"\nspec:',
        )
    )
    kubectl.apply(paused, namespace=namespace)

    def reported() -> dict[str, Any] | None:
        obj = kubectl.get("bundleinstallation", "github-triage", namespace)
        ready = condition(obj, "Ready")
        return obj if ready and ready["reason"] == "Paused" else None

    obj = wait_until(reported, 60, "a paused report")
    assert condition(obj, "Ready")["status"] == "False"
    assert {e["action"] for e in obj["status"]["preview"]["entities"]} == {"Create"}
    assert platform_list(platform, namespace, "agents") == []

    kubectl.run(
        "annotate", "bundleinstallation", "github-triage", "-n", namespace, "bundle-operator.dev/paused-"
    )
    wait_ready(kubectl, "bundleinstallation", "github-triage", namespace)
    assert len(platform_list(platform, namespace, "agents")) == 1
