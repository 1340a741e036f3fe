"""The operator over an installation's life: updates that keep platform-side edits, conflicts, drift,
uninstall and orphaning, a 1 MB bundle, and an installation whose Bundle arrives later.

Every test drives the cluster with `kubectl apply` of files it writes, reads results with
`kubectl get -o json`, and edits the platform over its HTTP API as any other platform user would.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

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

NAME = "github-triage"
AGENT = "agent:triage_bot"
COLLECTIONS = ("agents", "skills", "mcp-instances", "policies", "triggers", "channels")


# --- helpers --------------------------------------------------------------------------------------


def example_bundle() -> dict[str, Any]:
    """The example Bundle resource as data."""
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "github-triage-bundle.yaml").read_text())
    return data


def document_of(bundle: dict[str, Any]) -> dict[str, Any]:
    """The inline bundle document of a Bundle resource."""
    doc: dict[str, Any] = bundle["spec"]["source"]["inline"]
    return doc


def example_installation(tmp_path: Path, workspace: str, **spec: Any) -> dict[str, Any]:
    """The example installation pointed at ``workspace``, with ``spec`` fields replaced."""
    path = with_workspace(EXAMPLES / "github-triage-installation.yaml", tmp_path, workspace)
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    data["spec"].update(spec)
    return data


def write(tmp_path: Path, name: str, obj: dict[str, Any]) -> Path:
    """One manifest file for `kubectl apply -f`."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


def apply_file(kubectl: Kubectl, tmp_path: Path, name: str, obj: dict[str, Any], namespace: str) -> None:
    kubectl.apply(write(tmp_path, name, obj), namespace=namespace)


def install(
    kubectl: Kubectl, namespace: str, tmp_path: Path, bundle: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """Apply the Secret, the Bundle and the installation; wait until the installation is Ready."""
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    apply_file(kubectl, tmp_path, "bundle.yaml", bundle or example_bundle(), namespace)
    apply_file(
        kubectl, tmp_path, "installation.yaml", example_installation(tmp_path, namespace, **spec), namespace
    )
    return wait_ready(kubectl, "bundleinstallation", NAME, namespace)


def entity_id(installation: dict[str, Any], entity: str) -> str:
    """The platform id status.entities gives for ``kind:key``."""
    for row in installation["status"]["entities"]:
        if f"{row['kind']}:{row['key']}" == entity:
            found: str = row["id"]
            return found
    raise AssertionError(f"{entity} not in status.entities: {installation['status']['entities']}")


def platform_get(platform: PlatformProcess, workspace: str, path: str, entity: str) -> dict[str, Any]:
    response = httpx.get(f"{platform.url}/v1/workspaces/{workspace}/{path}/{entity}", timeout=10)
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def platform_edit(
    platform: PlatformProcess, workspace: str, path: str, entity: str, changes: dict[str, Any]
) -> dict[str, Any]:
    """A platform user's edit: read the entity, PATCH the changes at the revision just read."""
    current = platform_get(platform, workspace, path, entity)
    response = httpx.patch(
        f"{platform.url}/v1/workspaces/{workspace}/{path}/{entity}",
        json=changes,
        headers={"If-Match": f'"{current["revision"]}"'},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    assert data["revision"] != current["revision"]
    return data


def events(kubectl: Kubectl, namespace: str, reason: str | None = None) -> list[dict[str, Any]]:
    """The namespace's Events about the installation (of one reason when given)."""
    items = json.loads(kubectl.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [
        e
        for e in items
        if e.get("involvedObject", {}).get("kind") == "BundleInstallation"
        and (reason is None or e.get("reason") == reason)
    ]


def wait_event(kubectl: Kubectl, namespace: str, reason: str, timeout: float = 30) -> list[dict[str, Any]]:
    return wait_until(lambda: events(kubectl, namespace, reason) or None, timeout, f"an Event {reason}")


def get_bi(kubectl: Kubectl, namespace: str) -> dict[str, Any]:
    return kubectl.get("bundleinstallation", NAME, namespace)


def cond_status(obj: dict[str, Any], type_: str) -> str | None:
    found = condition(obj, type_)
    return None if found is None else str(found.get("status"))


def wait_condition(
    kubectl: Kubectl, namespace: str, type_: str, status: str, timeout: float = 60
) -> dict[str, Any]:
    """The installation once ``type_`` has ``status`` for its current generation."""
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        nonlocal last
        last = get_bi(kubectl, namespace)
        found = condition(last, type_)
        if found is None or found.get("status") != status:
            return None
        if last.get("status", {}).get("observedGeneration") != last["metadata"].get("generation"):
            return None
        return last

    try:
        return wait_until(reached, timeout, f"{type_}={status}")
    except Exception as error:
        raise AssertionError(f"{error}; last status: {json.dumps(last.get('status'), indent=1)}") from None


def wait_ready_with(
    kubectl: Kubectl, namespace: str, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60
) -> dict[str, Any]:
    """The installation once it is Ready for its generation and ``check`` holds."""
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        nonlocal last
        last = get_bi(kubectl, namespace)
        status = last.get("status") or {}
        if status.get("observedGeneration") != last["metadata"].get("generation"):
            return None
        return last if cond_status(last, "Ready") == "True" and check(last) else None

    try:
        return wait_until(reached, timeout, f"Ready with {what}")
    except Exception as error:
        raise AssertionError(f"{error}; last status: {json.dumps(last.get('status'), indent=1)}") from None


def workspace_contents(platform: PlatformProcess, workspace: str) -> dict[str, list[dict[str, Any]]]:
    return {path: platform_list(platform, workspace, path) for path in COLLECTIONS}


# --- update, conflict, drift ----------------------------------------------------------------------


def test_update_in_place_keeps_a_platform_side_edit(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    installed = install(kubectl, namespace, tmp_path)
    agent_id = entity_id(installed, AGENT)
    digest = installed["status"]["installedDigest"]
    edited = "Edited on the platform: labels issues for the infra team."
    platform_edit(platform, namespace, "agents", agent_id, {"description": edited})

    bundle = example_bundle()
    new_instructions = "You triage GitHub issues. Version two: always add an area label first.\n"
    document_of(bundle)["agents"][0]["instructions"] = new_instructions
    apply_file(kubectl, tmp_path, "bundle.yaml", bundle, namespace)

    updated = wait_ready_with(
        kubectl, namespace, lambda bi: bi["status"].get("installedDigest") != digest, "a new installedDigest"
    )
    assert updated["status"]["installedDigest"].startswith("sha256:")
    assert entity_id(updated, AGENT) == agent_id  # updated in place, not re-created
    agents = platform_list(platform, namespace, "agents")
    assert [a["id"] for a in agents] == [agent_id]
    assert agents[0]["instructions"] == new_instructions
    assert agents[0]["description"] == edited  # the platform-side edit survived
    assert cond_status(updated, "Conflict") == "False"
    assert AGENT in " ".join(e["message"] for e in wait_event(kubectl, namespace, "Updated"))


def test_conflict_stalls_until_take_theirs(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    installed = install(kubectl, namespace, tmp_path)
    agent_id = entity_id(installed, AGENT)
    mine = "Platform-side instructions: only label, never comment.\n"
    platform_edit(platform, namespace, "agents", agent_id, {"instructions": mine})

    bundle = example_bundle()
    theirs = "Bundle-side instructions: label and comment with a summary.\n"
    document_of(bundle)["agents"][0]["instructions"] = theirs
    apply_file(kubectl, tmp_path, "bundle.yaml", bundle, namespace)

    stalled = wait_condition(kubectl, namespace, "Conflict", "True")
    assert cond_status(stalled, "Stalled") == "True"
    assert cond_status(stalled, "Ready") != "True"
    assert {"entity": AGENT, "path": "/instructions"} in stalled["status"]["conflicts"]
    assert "/instructions" in str(condition(stalled, "Conflict")["message"])
    assert platform_get(platform, namespace, "agents", agent_id)["instructions"] == mine  # nothing written
    wait_event(kubectl, namespace, "Conflict")

    apply_file(
        kubectl,
        tmp_path,
        "installation.yaml",
        example_installation(tmp_path, namespace, updatePolicy={"onConflict": "TakeTheirs"}),
        namespace,
    )
    ready = wait_condition(kubectl, namespace, "Ready", "True")
    assert cond_status(ready, "Conflict") == "False"
    assert cond_status(ready, "Stalled") != "True"
    assert platform_get(platform, namespace, "agents", agent_id)["instructions"] == theirs
    assert entity_id(ready, AGENT) == agent_id


def test_drift_is_reported_then_corrected(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    drift_policy = {"interval": "5s", "mode": "Warn"}
    installed = install(kubectl, namespace, tmp_path, driftPolicy=drift_policy)
    agent_id = entity_id(installed, AGENT)
    assert cond_status(installed, "Drifted") == "False"
    installed_model = platform_get(platform, namespace, "agents", agent_id)["model"]
    assert installed_model == "gpt-5"
    platform_edit(platform, namespace, "agents", agent_id, {"model": "gpt-4.1-mini"})

    def drifted() -> dict[str, Any] | None:
        bi = get_bi(kubectl, namespace)
        rows = {d["entity"]: d["paths"] for d in bi["status"].get("drift") or []}
        return bi if "/model" in rows.get(AGENT, []) and cond_status(bi, "Drifted") == "True" else None

    seen = wait_until(drifted, 30, "status.drift naming the agent's /model")
    assert AGENT in str(condition(seen, "Drifted")["message"])
    assert cond_status(seen, "Ready") == "True"  # drift is reported, it does not make it unready
    assert (
        platform_get(platform, namespace, "agents", agent_id)["model"] == "gpt-4.1-mini"
    )  # Warn writes nothing
    wait_event(kubectl, namespace, "DriftDetected")

    apply_file(
        kubectl,
        tmp_path,
        "installation.yaml",
        example_installation(tmp_path, namespace, driftPolicy={**drift_policy, "mode": "Correct"}),
        namespace,
    )
    corrected = wait_condition(kubectl, namespace, "Drifted", "False", timeout=30)
    assert platform_get(platform, namespace, "agents", agent_id)["model"] == installed_model
    assert cond_status(corrected, "Ready") == "True"
    assert not corrected["status"].get("drift")


def test_an_entity_deleted_on_the_platform_is_drift_under_warn_and_keepmine_with_correct_warns(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    automation = "automation:morning_digest"
    drift_policy = {"interval": "5s", "mode": "Warn"}
    installed = install(kubectl, namespace, tmp_path, driftPolicy=drift_policy)
    trigger = f"{platform.url}/v1/workspaces/{namespace}/triggers/{entity_id(installed, automation)}"
    assert httpx.delete(trigger, timeout=10).status_code == 204

    def drifted() -> dict[str, Any] | None:
        bi = get_bi(kubectl, namespace)
        rows = {d["entity"]: d["paths"] for d in bi["status"].get("drift") or []}
        return bi if rows.get(automation) == [""] and cond_status(bi, "Drifted") == "True" else None

    seen = wait_until(drifted, 30, "status.drift naming the automation deleted on the platform")
    assert f"{automation} (deleted)" in str(condition(seen, "Drifted")["message"])
    assert cond_status(seen, "Ready") == "True"
    assert httpx.get(trigger, timeout=10).status_code == 404  # Warn writes nothing back
    assert not events(kubectl, namespace, "PoliciesDisagree")

    apply_file(
        kubectl,
        tmp_path,
        "installation.yaml",
        example_installation(
            tmp_path,
            namespace,
            driftPolicy={**drift_policy, "mode": "Correct"},
            updatePolicy={"onConflict": "KeepMine"},
        ),
        namespace,
    )
    warned = wait_event(kubectl, namespace, "PoliciesDisagree")
    assert "KeepMine" in warned[0]["message"] and "Correct" in warned[0]["message"]
    corrected = wait_condition(kubectl, namespace, "Drifted", "False", timeout=30)
    assert not corrected["status"].get("drift")
    recreated = entity_id(corrected, automation)
    assert (
        httpx.get(f"{platform.url}/v1/workspaces/{namespace}/triggers/{recreated}", timeout=10).status_code
        == 200
    )


# --- delete ---------------------------------------------------------------------------------------


def test_delete_uninstalls_everything(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    install(kubectl, namespace, tmp_path)
    before = workspace_contents(platform, namespace)
    assert all(
        before[path] for path in ("agents", "skills", "mcp-instances", "policies", "triggers", "channels")
    )

    kubectl.run("delete", "bundleinstallation", NAME, "-n", namespace, "--wait=false")
    wait_until(
        lambda: kubectl.get_or_none("bundleinstallation", NAME, namespace) is None,
        60,
        "the installation gone (finalizer released)",
    )
    left = {path: items for path, items in workspace_contents(platform, namespace).items() if items}
    assert left == {}
    assert "kept" not in " ".join(e["message"] for e in wait_event(kubectl, namespace, "Uninstalled"))


def test_deleting_the_namespace_uninstalls(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, tmp_path: Path
) -> None:
    # The namespace controller deletes the state Secret together with the installation; the
    # record must still be there when the installation's finalizer uninstalls.
    namespace = f"e2e-nsdelete-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", namespace)
    install(kubectl, namespace, tmp_path)
    assert workspace_contents(platform, namespace)["agents"]

    kubectl.run("delete", "namespace", namespace, "--wait=false")
    wait_until(lambda: kubectl.get_or_none("namespace", namespace) is None, 90, "the namespace gone")
    left = {path: items for path, items in workspace_contents(platform, namespace).items() if items}
    assert left == {}


def test_delete_keeps_an_entity_edited_on_the_platform(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    installed = install(kubectl, namespace, tmp_path)
    agent_id = entity_id(installed, AGENT)
    platform_edit(platform, namespace, "agents", agent_id, {"description": "Ours now; do not delete."})

    kubectl.run("delete", "bundleinstallation", NAME, "-n", namespace, "--wait=false")
    wait_until(
        lambda: kubectl.get_or_none("bundleinstallation", NAME, namespace) is None,
        60,
        "the installation gone (finalizer released)",
    )
    agents = platform_list(platform, namespace, "agents")
    assert [a["id"] for a in agents] == [agent_id]
    assert agents[0]["description"] == "Ours now; do not delete."
    messages = [e["message"] for e in wait_event(kubectl, namespace, "Uninstalled")]
    assert any("kept" in m and AGENT in m for m in messages), messages


def test_delete_waits_while_a_foreign_agent_uses_the_bundles_mcp(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    installed = install(kubectl, namespace, tmp_path)
    instance = entity_id(installed, "mcp:github")
    foreign = httpx.post(
        f"{platform.url}/v1/workspaces/{namespace}/agents",
        json={"name": "Someone Else", "model": "gpt-5", "mcp_instance_ids": [instance]},
        headers={"Idempotency-Key": f"foreign-{namespace}"},
        timeout=10,
    )
    foreign.raise_for_status()
    before = workspace_contents(platform, namespace)

    kubectl.run("delete", "bundleinstallation", NAME, "-n", namespace, "--wait=false")
    blocked = wait_event(kubectl, namespace, "UninstallBlocked", timeout=60)
    assert "Someone Else" in blocked[0]["message"] or foreign.json()["id"] in blocked[0]["message"]
    # Nothing was deleted, and the installation waits with its finalizer.
    assert workspace_contents(platform, namespace) == before
    assert kubectl.get_or_none("bundleinstallation", NAME, namespace) is not None

    httpx.delete(f"{platform.url}/v1/workspaces/{namespace}/agents/{foreign.json()['id']}", timeout=10)
    wait_until(
        lambda: kubectl.get_or_none("bundleinstallation", NAME, namespace) is None,
        120,
        "the installation gone once the foreign agent let go",
    )
    left = {path: items for path, items in workspace_contents(platform, namespace).items() if items}
    assert left == {}


def test_orphan_leaves_the_platform_alone(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    installed = install(kubectl, namespace, tmp_path, deletionPolicy="Orphan")
    before = workspace_contents(platform, namespace)
    ids = {row["id"] for row in installed["status"]["entities"]}

    kubectl.run("delete", "bundleinstallation", NAME, "-n", namespace, "--wait=false")
    wait_until(
        lambda: kubectl.get_or_none("bundleinstallation", NAME, namespace) is None,
        60,
        "the installation gone (finalizer released)",
    )
    after = workspace_contents(platform, namespace)
    assert {p: sorted(i["id"] for i in v) for p, v in after.items()} == {
        p: sorted(i["id"] for i in v) for p, v in before.items()
    }
    assert ids <= {i["id"] for items in after.values() for i in items}
    wait_event(kubectl, namespace, "Orphaned")


# --- a 1 MB bundle --------------------------------------------------------------------------------

BIG_SKILLS = 5
# Under the platform's 256 KiB per SKILL.md (skill_rules.MAX_SKILL_MD); five make a document of
# just over 1 MB that still fits a ConfigMap (1 MiB of data at most).
BIG_SKILL_BYTES = 200_000
DOCUMENT_MIN, DOCUMENT_MAX = 1_000_000, 1_040_000


def big_skill_content(index: int) -> str:
    """A valid SKILL.md of about BIG_SKILL_BYTES: front matter, then long lines of text."""
    head = (
        f"---\nname: big-handbook-{index}\ndescription: Part {index} of the triage handbook.\n---\n"
        "# Handbook\n\n"
    )
    sentence = f"Handbook part {index}: read the issue, find the component, label it, link duplicates. "
    line = sentence * (1000 // len(sentence)) + "\n"
    return head + line * ((BIG_SKILL_BYTES - len(head)) // len(line))


def big_document(skills: int = BIG_SKILLS) -> dict[str, Any]:
    doc = copy.deepcopy(document_of(example_bundle()))
    for index in range(skills):
        doc["skills"].append(
            {"key": f"handbook_{index}", "source_type": "inline", "content": big_skill_content(index)}
        )
        doc["agents"][0]["skills"].append(f"handbook_{index}")
    return doc


class _BlockDumper(yaml.SafeDumper):
    """YAML as a person writes it: multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def dump(obj: dict[str, Any]) -> str:
    return yaml.dump(obj, Dumper=_BlockDumper, sort_keys=False, width=4096)


def test_a_one_megabyte_bundle_installs(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    doc = big_document()
    assert DOCUMENT_MIN <= len(dump(doc).encode()) <= DOCUMENT_MAX
    bundle = example_bundle()
    bundle["spec"]["source"]["inline"] = doc
    path = tmp_path / "big-bundle.yaml"
    path.write_text(dump(bundle))

    # Client-side apply cannot carry it: the last-applied annotation alone would pass 256 KiB.
    refused = kubectl.apply(path, namespace=namespace, check=False)
    assert refused.returncode != 0
    assert "annotation" in refused.stderr.lower() or "too long" in refused.stderr.lower(), refused.stderr
    assert kubectl.get_or_none("bundle", NAME, namespace) is None

    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    kubectl.apply(path, namespace=namespace, server_side=True)
    ready_bundle = wait_ready(kubectl, "bundle", NAME, namespace)
    assert ready_bundle["status"]["entities"]["skills"] == 2 + BIG_SKILLS

    def handled_annotations() -> dict[str, str] | None:
        # kopf stores its diff base after the handler's status write: Ready can come first.
        obj = kubectl.get_or_none("bundle", NAME, namespace) or {}
        found: dict[str, str] = obj.get("metadata", {}).get("annotations") or {}
        return found if any(k.endswith("last-handled-configuration") for k in found) else None

    annotations = wait_until(handled_annotations, 30, "kopf's diff base on the Bundle")
    assert all(len(value) < 4096 for value in annotations.values()), {
        k: len(v) for k, v in annotations.items()
    }
    assert not any("Handbook part" in value for value in annotations.values())
    # kopf's diff base is there, with the document replaced by its hash.
    handled = [v for k, v in annotations.items() if k.endswith("last-handled-configuration")]
    assert handled and "sha256" in handled[0], annotations

    apply_file(kubectl, tmp_path, "installation.yaml", example_installation(tmp_path, namespace), namespace)
    installed = wait_ready(kubectl, "bundleinstallation", NAME, namespace, timeout=120)
    skills = {s["id"]: s for s in platform_list(platform, namespace, "skills")}
    for index in range(BIG_SKILLS):
        skill = skills[entity_id(installed, f"skill:handbook_{index}")]
        assert skill["name"] == f"big-handbook-{index}"
    assert ready_bundle["status"]["digest"] == installed["status"]["installedDigest"]


def test_a_one_megabyte_bundle_installs_from_a_config_map(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    document = tmp_path / "bundle.yaml"
    document.write_text(dump(big_document()))
    assert DOCUMENT_MIN <= document.stat().st_size <= DOCUMENT_MAX
    kubectl.run("create", "configmap", "big-triage", "-n", namespace, f"--from-file=bundle.yaml={document}")
    bundle = example_bundle()
    bundle["spec"]["source"] = {"configMapRef": {"name": "big-triage", "key": "bundle.yaml"}}
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    apply_file(kubectl, tmp_path, "bundle-resource.yaml", bundle, namespace)
    ready_bundle = wait_ready(kubectl, "bundle", NAME, namespace)
    assert ready_bundle["status"]["entities"]["skills"] == 2 + BIG_SKILLS

    apply_file(kubectl, tmp_path, "installation.yaml", example_installation(tmp_path, namespace), namespace)
    installed = wait_ready(kubectl, "bundleinstallation", NAME, namespace, timeout=120)
    names = {s["name"] for s in platform_list(platform, namespace, "skills")}
    assert {f"big-handbook-{i}" for i in range(BIG_SKILLS)} <= names
    assert len(installed["status"]["entities"]) >= 8 + BIG_SKILLS


def test_a_bundle_over_a_mebibyte_installs_inline(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    """Past 1 MiB a document no longer fits a ConfigMap, but inline (server-side apply) it still does:
    the document cap is 5 MiB and the README sends large bundles to `kubectl apply --server-side`."""
    skills = 6
    doc = big_document(skills)
    assert len(dump(doc).encode()) > 1_150_000
    bundle = example_bundle()
    bundle["spec"]["source"]["inline"] = doc
    path = tmp_path / "bigger-bundle.yaml"
    path.write_text(dump(bundle))
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    kubectl.apply(path, namespace=namespace, server_side=True)
    assert wait_ready(kubectl, "bundle", NAME, namespace)["status"]["entities"]["skills"] == 2 + skills

    apply_file(kubectl, tmp_path, "installation.yaml", example_installation(tmp_path, namespace), namespace)
    installed = wait_ready_with(
        kubectl, namespace, lambda bi: True, "the 1.2 MB bundle installed", timeout=60
    )
    names = {s["name"] for s in platform_list(platform, namespace, "skills")}
    assert {f"big-handbook-{i}" for i in range(skills)} <= names
    assert len(installed["status"]["entities"]) >= 8 + skills


# --- a Bundle that arrives later ------------------------------------------------------------------


def test_missing_bundle_stalls_then_installs_when_created(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=namespace)
    apply_file(kubectl, tmp_path, "installation.yaml", example_installation(tmp_path, namespace), namespace)

    stalled = wait_condition(kubectl, namespace, "Stalled", "True")
    stalled_cond = condition(stalled, "Stalled")
    assert stalled_cond["reason"] == "BundleNotFound"
    assert NAME in str(stalled_cond["message"])
    assert cond_status(stalled, "Ready") != "True"
    assert platform_list(platform, namespace, "agents") == []

    apply_file(kubectl, tmp_path, "bundle.yaml", example_bundle(), namespace)
    ready = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    assert cond_status(ready, "Stalled") != "True"
    assert [a["id"] for a in platform_list(platform, namespace, "agents")] == [entity_id(ready, AGENT)]
