"""The operator end to end: `kubectl apply` of the examples becomes platform entities, with status."""

from __future__ import annotations

import json
import time
from pathlib import Path

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
    assert set(by_entity) >= {
        "mcp:github",
        "skill:triage",
        "skill:release_notes",
        "agent:triage_bot",
        "channel:maintainers_chat",
        "automation:morning_digest",
        "policy:answer_check",
        "policy:spend_cap",
    }
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
