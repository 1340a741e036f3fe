"""The operator end to end when things go wrong: a missing Secret, a failing platform, a rotated
credential, a secret given in the spec; and what must never leak (secret values) or be labelled
with user data (metrics)."""

from __future__ import annotations

import json
import re
import secrets
import time
from collections import Counter
from datetime import datetime
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
    state_record_text,
    wait_ready,
    with_workspace,
)
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

NAME = "github-triage"
SECRET_NAME = "github-triage-credentials"
STATE_SECRET = f"{NAME}-bundle-state"
SECRET_FILE = EXAMPLES / "github-triage-secret.yaml"
BUNDLE_FILE = EXAMPLES / "github-triage-bundle.yaml"
INSTALLATION_FILE = EXAMPLES / "github-triage-installation.yaml"

EXAMPLE_GITHUB_TOKEN = "github_pat_EXAMPLE_ONLY_0000000000000000000000"
EXAMPLE_TELEGRAM_TOKEN = "123456789:EXAMPLE-ONLY-not-a-real-bot-token"
# The value the rotation test writes; random so a leak cannot come from anywhere but this run.
ROTATED_GITHUB_TOKEN = f"github_pat_ROTATED_{secrets.token_hex(12)}"
# The secret field given as `value` in the spec (test 4): the spec holds it by the user's mistake,
# but status, events and logs must not repeat it.
INLINE_GITHUB_TOKEN = f"github_pat_INLINE_{secrets.token_hex(12)}"
SECRET_VALUES = (EXAMPLE_GITHUB_TOKEN, EXAMPLE_TELEGRAM_TOKEN, ROTATED_GITHUB_TOKEN)

# Every collection the example bundle writes to.
COLLECTIONS = (
    "mcp-servers",
    "mcp-instances",
    "skills",
    "agents",
    "channels",
    "triggers",
    "policies",
    "secrets",
)
# How many entities of each the example creates (mcp-servers: the spec behind the instance;
# secrets: the GitHub token the instance refers to, and the channel's bot token, which the
# platform keeps in its secret store).
EXPECTED_COUNTS = {
    "mcp-servers": 1,
    "mcp-instances": 1,
    "skills": 2,
    "agents": 1,
    "channels": 1,
    "triggers": 1,
    "policies": 2,
    "secrets": 2,
}


# --- helpers -----------------------------------------------------------------------------------


def workspace_contents(platform: PlatformProcess, workspace: str) -> dict[str, list[dict[str, Any]]]:
    """Every entity of every collection the example uses."""
    return {path: platform_list(platform, workspace, path) for path in COLLECTIONS}


def nonempty(contents: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """The collections that hold something, with the ids, for assertion messages."""
    return {path: [e.get("id", "?") for e in items] for path, items in contents.items() if items}


def apply_example(
    kubectl: Kubectl, namespace: str, tmp_path: Path, workspace: str, secret: bool = True
) -> None:
    """`kubectl apply` the examples (the Secret optional), the installation pointed at ``workspace``."""
    if secret:
        kubectl.apply(SECRET_FILE, namespace=namespace)
    kubectl.apply(BUNDLE_FILE, namespace=namespace)
    kubectl.apply(with_workspace(INSTALLATION_FILE, tmp_path, workspace), namespace=namespace)


def installation_events(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    """The Events of the installation, oldest first."""
    items = json.loads(kubectl.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    ours = [
        e
        for e in items
        if e.get("involvedObject", {}).get("kind") == "BundleInstallation"
        and e.get("involvedObject", {}).get("name") == NAME
    ]
    return sorted(ours, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


def event_with(kubectl: Kubectl, namespace: str, reason: str) -> dict[str, Any] | None:
    """The first Event of the installation with ``reason``, if any."""
    return next((e for e in installation_events(kubectl, namespace) if e.get("reason") == reason), None)


def stalled_with(kubectl: Kubectl, namespace: str, reason: str, timeout: float = 30.0) -> dict[str, Any]:
    """Wait until the installation is Stalled=True with ``reason`` (the current generation observed)."""
    last: dict[str, Any] | None = None

    def stalled() -> dict[str, Any] | None:
        nonlocal last
        last = kubectl.get_or_none("bundleinstallation", NAME, namespace)
        if last is None:
            return None
        status = last.get("status") or {}
        if status.get("observedGeneration") != last["metadata"].get("generation"):
            return None
        found = condition(last, "Stalled")
        return last if found and found["status"] == "True" and found["reason"] == reason else None

    try:
        return wait_until(stalled, timeout, f"Stalled=True reason {reason}")
    except AssertionError as error:
        seen = ((last or {}).get("status") or {}).get("conditions")
        raise AssertionError(f"{error}; last conditions: {seen}") from None


def secret_manifest(tmp_path: Path, github_token: str) -> Path:
    """The example Secret with another GitHub token."""
    doc = yaml.safe_load(SECRET_FILE.read_text())
    doc["stringData"]["github_token"] = github_token
    out = tmp_path / "op-fail-rotated-secret.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


def mcp_secrets(platform: PlatformProcess, workspace: str) -> set[tuple[str, int, str]]:
    """(id, revision, updated_at) of every platform secret the MCP instances refer to."""
    ids: set[str] = set()
    for instance in platform_list(platform, workspace, "mcp-instances"):
        for group in ("env", "headers"):
            for value in (instance.get(group) or {}).values():
                if isinstance(value, dict) and value.get("secret_id"):
                    ids.add(value["secret_id"])
        for value in instance.get("args") or []:
            if isinstance(value, dict) and value.get("secret_id"):
                ids.add(value["secret_id"])
    out: set[tuple[str, int, str]] = set()
    for secret_id in ids:
        response = httpx.get(f"{platform.url}/v1/workspaces/{workspace}/secrets/{secret_id}", timeout=10)
        response.raise_for_status()
        body = response.json()
        assert "value" not in body, "the platform returned a secret value"
        out.add((body["id"], body["revision"], body["updated_at"]))
    return out


def decoded_record(state: dict[str, Any]) -> str:
    """The record of a state Secret, decoded."""
    return state_record_text(state)


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of each sample in Prometheus text."""
    out = []
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \S+)?", line)
        if match is None or line.startswith("#"):
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        out.append((match.group(1), labels, float(match.group(3))))
    return out


def arm_fault(platform: PlatformProcess, **spec: Any) -> dict[str, Any]:
    """Arm a fault on the reference platform."""
    response = httpx.post(f"{platform.url}/_admin/faults", json=spec, timeout=10)
    assert response.status_code == 201, response.text
    armed: dict[str, Any] = response.json()
    return armed


def clear_faults(platform: PlatformProcess) -> None:
    """Disarm every fault."""
    httpx.delete(f"{platform.url}/_admin/faults", timeout=10).raise_for_status()


# --- tests -------------------------------------------------------------------------------------


def test_missing_secret_stalls_and_recovers_when_it_appears(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    apply_example(kubectl, namespace, tmp_path, workspace, secret=False)

    installation = stalled_with(kubectl, namespace, "SecretNotFound")
    ready = condition(installation, "Ready")
    assert ready is not None and ready["status"] == "False", ready
    stalled = condition(installation, "Stalled")
    assert stalled is not None
    assert SECRET_NAME in str(stalled["message"]), stalled
    assert "spec.setup[key=" in str(stalled["message"]), stalled
    contents = workspace_contents(platform, workspace)
    assert nonempty(contents) == {}, "a stalled installation wrote to the platform"

    # The Secret alone, no touch of the installation: it continues by itself.
    started = time.monotonic()
    kubectl.apply(SECRET_FILE, namespace=namespace)
    installed = wait_ready(kubectl, "bundleinstallation", NAME, namespace, timeout=60)
    print(f"Secret applied to Ready: {time.monotonic() - started:.2f} s")
    stalled_after = condition(installed, "Stalled")
    assert stalled_after is None or stalled_after["status"] == "False", stalled_after
    assert [a["id"] for a in platform_list(platform, workspace, "agents")] == [
        e["id"] for e in installed["status"]["entities"] if e["kind"] == "agent"
    ]


def test_platform_fault_mid_install_rolls_back_then_retry_installs_once(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    # Every POST of an agent in this workspace fails with 503: more than the client's retries
    # (RetryPolicy.attempts = 4 per call), over several reconciles, until the test clears it.
    fault = arm_fault(
        platform, method="POST", path=f"/v1/workspaces/{workspace}/agents", after=0, times=1000, status=503
    )
    # A pass-through fault (no status) only counts calls: proof that the run wrote skills before
    # the agent failed, so the rollback had something to delete.
    spy = arm_fault(platform, method="POST", path=f"/v1/workspaces/{workspace}/skills", times=1000)
    try:
        apply_example(kubectl, namespace, tmp_path, workspace)

        def failed() -> dict[str, Any] | None:
            event = event_with(kubectl, namespace, "RolledBack")
            if event is not None:
                return event
            obj = kubectl.get_or_none("bundleinstallation", NAME, namespace)
            ready = condition(obj, "Ready") if obj else None
            return {"reason": "InstallFailed"} if ready and ready.get("reason") == "InstallFailed" else None

        report = wait_until(failed, 45, "the operator to report the failed install")
        print(f"failure reported: {report.get('reason')}: {report.get('message')}")
        faults = httpx.get(f"{platform.url}/_admin/faults", timeout=10).json()["items"]
        ours = next(f for f in faults if f["id"] == fault["id"])
        assert ours["injected"] >= 4, f"the fault was hit {ours['injected']} times, expected every retry"
        skills_posted = next(f for f in faults if f["id"] == spy["id"])["matched"]
        assert skills_posted >= 2, f"{skills_posted} skill creates before the failure; expected both skills"

        # Rolled back: the workspace empties (between attempts) and holds nothing of any kind. An
        # orphan left by a rollback would keep it from ever being empty.
        last: dict[str, list[str]] = {}

        def empty() -> bool:
            nonlocal last
            last = nonempty(workspace_contents(platform, workspace))
            return not last

        try:
            wait_until(empty, 20, "the rolled-back workspace to hold no entities", interval=0.1)
        except AssertionError as error:
            raise AssertionError(f"{error}; still there: {last}") from None
        obj = kubectl.get("bundleinstallation", NAME, namespace)
        ready = condition(obj, "Ready")
        assert ready is None or ready["status"] != "True", ready
    finally:
        clear_faults(platform)

    # The operator's own backoff retries; nothing touches the installation.
    installed = wait_ready(kubectl, "bundleinstallation", NAME, namespace, timeout=60)
    contents = workspace_contents(platform, workspace)
    counts = {path: len(items) for path, items in contents.items()}
    for path, expected in EXPECTED_COUNTS.items():
        names = sorted(str(e.get("name")) for e in contents[path])
        assert counts[path] == expected, f"{path}: {names}, expected {expected}: {counts}"
    for path, items in contents.items():
        names = Counter(str(e.get("name")) for e in items if e.get("name") is not None)
        duplicates = {n: c for n, c in names.items() if c > 1}
        assert not duplicates, f"{path} holds duplicates: {duplicates}"
    by_entity = {f"{e['kind']}:{e['key']}": e for e in installed["status"]["entities"]}
    assert [a["id"] for a in contents["agents"]] == [by_entity["agent:triage_bot"]["id"]]
    assert {s["id"] for s in contents["skills"]} == {
        by_entity["skill:triage"]["id"],
        by_entity["skill:release_notes"]["id"],
    }
    assert "Installed" in {e["reason"] for e in installation_events(kubectl, namespace)}


def test_rotated_secret_updates_the_platform_secret(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    apply_example(kubectl, namespace, tmp_path, workspace)
    before_obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    before = mcp_secrets(platform, workspace)
    assert before, "the MCP instance refers to no platform secret"
    state_before = decoded_record(kubectl.get("secret", STATE_SECRET, namespace))
    agents_before = [a["id"] for a in platform_list(platform, workspace, "agents")]

    kubectl.apply(secret_manifest(tmp_path, ROTATED_GITHUB_TOKEN), namespace=namespace)

    last: set[tuple[str, int, str]] = set()

    def rotated() -> bool:
        nonlocal last
        last = mcp_secrets(platform, workspace)
        return bool(last) and last != before

    try:
        wait_until(rotated, 60, "the platform secret behind the MCP to change", interval=0.5)
    except AssertionError as error:
        raise AssertionError(f"{error}; before {before}, now {last}; log {operator.log}") from None
    print(f"MCP secret before {sorted(before)}, after {sorted(last)}")
    same_ids = {i for i, _, _ in before} & {i for i, _, _ in last}
    for secret_id in same_ids:  # updated in place: a new revision
        old = next(r for i, r, _ in before if i == secret_id)
        new = next(r for i, r, _ in last if i == secret_id)
        assert new > old, f"secret {secret_id}: revision {old} -> {new}"

    updated = wait_until(lambda: event_with(kubectl, namespace, "Updated"), 30, "an Updated event")
    print(f"Updated event: {updated.get('message')}")
    after_obj = wait_ready(kubectl, "bundleinstallation", NAME, namespace)
    assert condition(after_obj, "Ready")["status"] == "True"
    assert [a["id"] for a in platform_list(platform, workspace, "agents")] == agents_before
    assert {e["id"] for e in after_obj["status"]["entities"]} == {
        e["id"] for e in before_obj["status"]["entities"]
    }

    # The record holds HMACs: the new value changed it, but neither value is in it.
    state_after = wait_until(
        lambda: (r := decoded_record(kubectl.get("secret", STATE_SECRET, namespace))) != state_before and r,
        30,
        "the record to change",
    )
    for text in (state_before, state_after):
        for value in SECRET_VALUES:
            assert value not in text, "a raw secret value is in the state Secret's record.json"


def test_secret_field_given_as_value_is_refused(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    workspace = namespace
    doc = yaml.safe_load(with_workspace(INSTALLATION_FILE, tmp_path, workspace).read_text())
    doc["spec"]["setup"] = [
        {"key": "github_token", "value": INLINE_GITHUB_TOKEN} if s["key"] == "github_token" else s
        for s in doc["spec"]["setup"]
    ]
    manifest = tmp_path / "op-fail-value-in-spec.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    kubectl.apply(SECRET_FILE, namespace=namespace)
    kubectl.apply(BUNDLE_FILE, namespace=namespace)
    # Server-side, so kubectl keeps no last-applied copy: every annotation is then the operator's.
    kubectl.apply(manifest, namespace=namespace, server_side=True)

    installation = stalled_with(kubectl, namespace, "SecretValueInSpec")
    stalled = condition(installation, "Stalled")
    assert stalled is not None
    assert "spec.setup[key=github_token]" in str(stalled["message"]), stalled
    ready = condition(installation, "Ready")
    assert ready is not None and ready["status"] == "False", ready
    assert nonempty(workspace_contents(platform, workspace)) == {}, "a refused installation wrote"
    # The value sits in the spec by the user's mistake; the operator must not repeat it.
    status_and_events = json.dumps(installation.get("status")) + json.dumps(
        installation_events(kubectl, namespace)
    )
    assert INLINE_GITHUB_TOKEN not in status_and_events
    assert INLINE_GITHUB_TOKEN not in operator.log.read_text(errors="replace")

    def diff_base() -> dict[str, str] | None:
        # kopf writes its diff base after the handler's status write: Stalled can come first.
        found = kubectl.get_or_none("bundleinstallation", NAME, namespace) or {}
        annotations: dict[str, str] = found.get("metadata", {}).get("annotations") or {}
        return annotations if any(k.endswith("last-handled-configuration") for k in annotations) else None

    annotations = wait_until(diff_base, 30, "kopf's diff base on the installation")
    assert not any(INLINE_GITHUB_TOKEN in f"{k}={v}" for k, v in annotations.items()), sorted(annotations)


def test_metrics_count_reconciles_and_label_routes_without_workspaces(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    # A workspace named apart from the namespace: the namespace is a legitimate label of
    # bundle_operator_drifted_entities, the workspace is user data no series may carry.
    workspace = f"wsm-{secrets.token_hex(5)}"
    apply_example(kubectl, namespace, tmp_path, workspace)
    wait_ready(kubectl, "bundleinstallation", NAME, namespace)

    text = operator.metrics()
    successes = [
        value
        for name, labels, value in samples(text)
        if name == "bundle_operator_reconciles_total"
        and labels.get("kind") == "BundleInstallation"
        and labels.get("result") == "success"
    ]
    assert successes, "no reconciles_total series for successful BundleInstallation reconciles"
    assert successes[0] > 0, successes
    calls = [labels for name, labels, _ in samples(text) if name == "bundle_operator_platform_calls_total"]
    assert calls, "no bundle_operator_platform_calls_total series"
    routes = {labels.get("route", "") for labels in calls}
    assert "/v1/workspaces/{ws}/agents" in routes, routes
    assert all(r.startswith("/v1/workspaces/{ws}") or r in ("other", "/healthz") for r in routes), routes
    assert workspace not in text, "a workspace name appears in the metrics"
    per_installation = ("bundle_operator_drifted_entities{", f"{CONDITION_SINCE}{{")
    for line in text.splitlines():
        if namespace in line:
            assert line.startswith(per_installation), f"the namespace labels: {line}"

    def conditions_shown() -> str | None:
        """None while a write between the scrape and the read makes them differ, else the text."""
        scraped = operator.metrics()
        installation = kubectl.get("bundleinstallation", NAME, namespace)
        return scraped if condition_series_match(scraped, installation, namespace) else None

    wait_until(conditions_shown, 30, "one series per condition of the installation, as its status says")


CONDITION_SINCE = "bundle_operator_installation_condition_since_timestamp_seconds"


def condition_series_match(text: str, installation: dict[str, Any], namespace: str) -> bool:
    """Each condition of the installation has exactly one since-series, with its status and reason,
    dated no earlier than its lastTransitionTime and not in the future."""
    series = [
        (labels, value)
        for name, labels, value in samples(text)
        if name == CONDITION_SINCE and labels.get("namespace") == namespace and labels.get("name") == NAME
    ]
    conditions = installation["status"]["conditions"]
    assert {c["type"] for c in conditions} >= {"Ready", "Reconciling", "Stalled"}, conditions
    if sorted(labels["condition"] for labels, _ in series) != sorted(c["type"] for c in conditions):
        return False
    for c in conditions:
        labels, value = next((labels, v) for labels, v in series if labels["condition"] == c["type"])
        if (labels["status"], labels["reason"]) != (c["status"], c["reason"]):
            return False
        transitioned = datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
        assert transitioned <= value <= time.time() + 1, (c, value)
    return True


def test_no_secret_value_anywhere(kubectl: Kubectl, operator: OperatorProcess) -> None:
    """Runs last in this module: everything the tests above produced, searched for secret values."""
    dumped = kubectl.run(
        "get", "bundles,bundleinstallations,configmaps,events", "-A", "-o", "json", timeout=120
    ).stdout
    assert json.loads(dumped)["items"], "nothing to search"
    log = operator.log.read_text(errors="replace")
    assert log, f"the operator log {operator.log} is empty"
    for value in SECRET_VALUES:
        assert value not in dumped, "a secret value is in a Bundle, BundleInstallation, ConfigMap or Event"
        assert value not in log, f"a secret value is in the operator log {operator.log}"
    # Only HMACs in the records of installations whose namespaces still exist.
    all_secrets = json.loads(kubectl.run("get", "secrets", "-A", "-o", "json", timeout=120).stdout)["items"]
    states = [s for s in all_secrets if s["metadata"]["name"].endswith("-bundle-state")]
    print(f"searched {len(json.loads(dumped)['items'])} objects, {len(log)} log bytes, {len(states)} records")
    for state in states:
        record = decoded_record(state)
        for value in SECRET_VALUES:
            assert value not in record, f"a raw value in {state['metadata']['namespace']}/{STATE_SECRET}"
