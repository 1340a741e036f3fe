"""Endpoints end to end: `kubectl apply` of an Endpoint serves an installation's gateway on the
platform, with the issued API key in a Secret the Endpoint owns; rotation, disabling, OAuth and
delete as a user sees them in the cluster and over the platform's API."""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import OperatorProcess, condition, platform_list, wait_ready
from tests.integration.platform.platform_harness import PlatformProcess

# Every test needs the operator running and the Endpoint CRD established.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("endpoint_crd")]

BUNDLE = "gw-kit"
INSTALLATION = "gw-kit"
ENDPOINT_CRD = "endpoints.bundle-operator.dev"
# Members need not answer: their health is reported, not required.
DOCUMENT: dict[str, Any] = bundle_document(
    BUNDLE,
    description="Weather and notes behind one gateway endpoint.",
    mcps=[
        {
            "key": "weather",
            "name": "Weather",
            "type": "url",
            "endpoint_url": "http://127.0.0.1:9/weather/mcp",
        },
        {"key": "notes", "name": "Notes", "type": "url", "endpoint_url": "http://127.0.0.1:9/notes/mcp"},
    ],
    gateway={"description": "Forecasts and notes.", "members": ["weather", "notes"]},
)


def write(tmp_path: Path, name: str, obj: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


def endpoint_manifest(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "Endpoint",
        "metadata": {"name": name},
        "spec": {"installationRef": {"name": INSTALLATION}, "credentialsSecretName": f"{name}-key", **spec},
    }


def apply_installation(kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    bundle = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "Bundle",
        "metadata": {"name": BUNDLE},
        "spec": {"source": {"inline": DOCUMENT}},
    }
    installation = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "BundleInstallation",
        "metadata": {"name": INSTALLATION},
        "spec": {"bundleRef": {"name": BUNDLE}, "workspace": namespace},
    }
    kubectl.apply(write(tmp_path, "bundle.yaml", bundle), namespace=namespace)
    kubectl.apply(write(tmp_path, "installation.yaml", installation), namespace=namespace)


def endpoint_name(namespace: str) -> str:
    # Endpoint names are URL paths, unique across the platform the tests share.
    return f"kit-{namespace.rsplit('-', 1)[-1]}"


def platform_endpoints(platform: PlatformProcess, workspace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in platform_list(platform, workspace, "endpoints") if e["name"] == name]


def secret_data(kubectl: Kubectl, name: str, namespace: str) -> dict[str, str]:
    secret = kubectl.get("secret", name, namespace)
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


@pytest.fixture
def endpoint_crd(kubectl: Kubectl, operator: OperatorProcess) -> None:
    kubectl.wait_for_condition("crd", ENDPOINT_CRD, "Established", timeout=30)


def test_endpoint_serves_the_gateway_rotates_its_key_disables_and_deletes(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    apply_installation(kubectl, namespace, tmp_path)
    installation = wait_ready(kubectl, "bundleinstallation", INSTALLATION, namespace)
    [gateway] = [e for e in installation["status"]["entities"] if e["kind"] == "gateway"]

    name = endpoint_name(namespace)
    manifest = endpoint_manifest(name)
    started = time.monotonic()
    kubectl.apply(write(tmp_path, "endpoint.yaml", manifest), namespace=namespace)
    endpoint = wait_ready(kubectl, "bep", name, namespace, timeout=60)
    print(f"Endpoint apply to Ready: {time.monotonic() - started:.2f} s")

    status = endpoint["status"]
    assert status["url"].endswith(f"/{name}/mcp")
    assert condition(endpoint, "Ready")["reason"] == "Serving"
    assert condition(endpoint, "Stalled")["status"] == "False"
    assert condition(endpoint, "Reconciling")["status"] == "False"
    assert [m["name"] for m in status["members"]] == ["weather", "notes"]
    assert all(isinstance(m["healthy"], bool) for m in status["members"])
    served = [
        t["presented_name"]
        for t in platform_list(platform, namespace, f"gateway-bundles/{gateway['id']}/tools")
        if t.get("served", True)
    ]
    assert status.get("presentedTools", []) == served

    [on_platform] = platform_endpoints(platform, namespace, name)
    assert on_platform["gateway_bundle_id"] == gateway["id"]
    assert (on_platform["auth_mode"], on_platform["profile"], on_platform["enabled"]) == (
        "ApiKey",
        "Default",
        True,
    )
    assert on_platform["url"] == status["url"]

    secret = kubectl.get("secret", f"{name}-key", namespace)
    [owner] = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Endpoint",
        name,
        endpoint["metadata"]["uid"],
        True,
    )
    data = secret_data(kubectl, f"{name}-key", namespace)
    assert set(data) == {"apiKey", "url"}
    assert data["url"] == status["url"]
    first_key = data["apiKey"]
    assert first_key

    # Rotation: a new value of the annotation issues a new key into the same Secret, once.
    kubectl.run(
        "annotate",
        "bep",
        name,
        "-n",
        namespace,
        "bundle-operator.dev/rotate-key-requested-at=2026-01-02T03:04:05Z",
        "--overwrite",
    )

    def new_key() -> str | None:
        key = secret_data(kubectl, f"{name}-key", namespace)["apiKey"]
        return key if key != first_key else None

    second_key = wait_until(new_key, 60, "a rotated key in the Secret")
    rotated = kubectl.get("secret", f"{name}-key", namespace)
    assert rotated["metadata"]["annotations"]["bundle-operator.dev/rotated-for"] == "2026-01-02T03:04:05Z"
    assert len(platform_endpoints(platform, namespace, name)) == 1

    def reasons() -> set[str]:
        events = json.loads(kubectl.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
        return {e["reason"] for e in events if e["involvedObject"].get("kind") == "Endpoint"}

    wait_until(lambda: "KeyRotated" in reasons() or None, 30, "a KeyRotated event")
    assert {"Created", "KeyIssued"} <= reasons()

    # No key in any object a user reads besides its Secret, and none in the operator's log.
    dumped = kubectl.run("get", "bep,bi,events", "-n", namespace, "-o", "json").stdout
    log = operator.log.read_text()
    for key in (first_key, second_key):
        assert key not in dumped
        assert key not in log

    # enabled: false disables the platform endpoint without deleting it.
    manifest["spec"]["enabled"] = False
    kubectl.apply(write(tmp_path, "endpoint.yaml", manifest), namespace=namespace)
    wait_until(
        lambda: [e for e in platform_endpoints(platform, namespace, name) if not e["enabled"]] or None,
        60,
        "the platform endpoint disabled",
    )
    disabled = wait_ready(kubectl, "bep", name, namespace, timeout=60)
    assert disabled["metadata"]["generation"] == 2
    assert condition(disabled, "Ready")["reason"] == "Disabled"
    assert platform_endpoints(platform, namespace, name)[0]["id"] == on_platform["id"]
    assert secret_data(kubectl, f"{name}-key", namespace)["apiKey"] == second_key

    # The printer columns a user sees.
    table = kubectl.run("get", "bep", name, "-n", namespace, "-o", "wide").stdout
    assert "Disabled" in table and status["url"] in table

    # Delete: the platform endpoint goes, and the Secret by garbage collection.
    kubectl.run("delete", "bep", name, "-n", namespace, "--wait=true", "--timeout=60s")
    wait_until(
        lambda: not platform_endpoints(platform, namespace, name) or None,
        30,
        "the platform endpoint deleted",
    )
    wait_until(
        lambda: kubectl.get_or_none("secret", f"{name}-key", namespace) is None or None,
        60,
        "the credentials Secret collected",
    )


def test_endpoint_waits_for_its_installation_and_never_takes_a_foreign_secret(
    kubectl: Kubectl, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    name = endpoint_name(namespace)
    kubectl.apply(write(tmp_path, "endpoint.yaml", endpoint_manifest(name)), namespace=namespace)

    def waiting() -> dict[str, Any] | None:
        obj = kubectl.get("bep", name, namespace)
        found = condition(obj, "Reconciling")
        return found if found and found["status"] == "True" else None

    reconciling = wait_until(waiting, 60, "the Endpoint waiting for its installation")
    assert reconciling["reason"] == "InstallationNotFound"
    assert f"BundleInstallation '{INSTALLATION}'" in reconciling["message"]

    # The installation arrives later: the Endpoint goes on by itself, nudged by the installation's
    # change well before its refresh timer (30 s after it was created) would look again.
    apply_installation(kubectl, namespace, tmp_path)
    wait_ready(kubectl, "bundleinstallation", INSTALLATION, namespace)
    wait_ready(kubectl, "bep", name, namespace, timeout=20)

    # Its Secret deleted by someone: a new key is issued into a new one (a key is never read back).
    first_key = secret_data(kubectl, f"{name}-key", namespace)["apiKey"]
    kubectl.run("delete", "secret", f"{name}-key", "-n", namespace)

    def rewritten() -> str | None:
        found = kubectl.get_or_none("secret", f"{name}-key", namespace)
        key = base64.b64decode((found or {}).get("data", {}).get("apiKey", "")).decode()
        return key if key and key != first_key else None

    wait_until(rewritten, 20, "the credentials Secret written again")

    # A second Endpoint whose Secret name belongs to someone else stalls and creates nothing.
    other = f"{name}-b"
    kubectl.run("create", "secret", "generic", "users-own", "-n", namespace, "--from-literal=apiKey=mine")
    kubectl.apply(
        write(tmp_path, "other.yaml", endpoint_manifest(other, credentialsSecretName="users-own")),
        namespace=namespace,
    )

    def stalled() -> dict[str, Any] | None:
        found = condition(kubectl.get("bep", other, namespace), "Stalled")
        return found if found and found["status"] == "True" else None

    refused = wait_until(stalled, 60, "the second Endpoint to stall")
    assert refused["reason"] == "SecretNotOwned" and "'users-own'" in refused["message"]
    assert secret_data(kubectl, "users-own", namespace) == {"apiKey": "mine"}
    assert not platform_endpoints(platform, namespace, other)


def test_an_oauth_endpoint_is_served_with_its_issuer_and_keeps_no_secret(
    kubectl: Kubectl, platform: PlatformProcess, namespace: str, tmp_path: Path
) -> None:
    apply_installation(kubectl, namespace, tmp_path)
    wait_ready(kubectl, "bundleinstallation", INSTALLATION, namespace)
    name = endpoint_name(namespace)
    oauth = {
        "issuer": "https://login.example",
        "requiredScopes": ["mcp:tools"],
        "toolScopes": {"github__*": ["repo"]},
    }
    manifest = endpoint_manifest(name, auth={"mode": "OAuth", "oauth": oauth})
    del manifest["spec"]["credentialsSecretName"]
    manifest["spec"]["rateLimit"] = {"requestsPerMinute": 120, "burst": 10}
    manifest["spec"]["allowedOrigins"] = ["https://app.example"]
    kubectl.apply(write(tmp_path, "endpoint.yaml", manifest), namespace=namespace)
    obj = wait_ready(kubectl, "bep", name, namespace)
    [served] = platform_endpoints(platform, namespace, name)
    assert served["auth_mode"] == "OAuth" and served["url"] == obj["status"]["url"]  # type: ignore[index]
    assert served["oauth"]["issuer"] == "https://login.example"
    assert served["oauth"]["tool_scopes"] == {"github__*": ["repo"]}
    assert served["rate_limit"] == {"requests_per_minute": 120, "burst": 10}
    assert served["allowed_origins"] == ["https://app.example"]
    secrets = json.loads(kubectl.run("get", "secrets", "-n", namespace, "-o", "json").stdout)["items"]
    assert not [s for s in secrets if s["metadata"].get("ownerReferences")
                and s["metadata"]["ownerReferences"][0]["kind"] == "Endpoint"]  # fmt: skip

    # A changed scope, limit and origins reach the platform endpoint in place.
    manifest["spec"]["auth"]["oauth"]["requiredScopes"] = ["mcp:tools", "mcp:read"]
    del manifest["spec"]["rateLimit"]
    manifest["spec"]["allowedOrigins"] = ["https://app.example", "http://localhost:3000"]
    kubectl.apply(write(tmp_path, "endpoint.yaml", manifest), namespace=namespace)
    wait_until(
        lambda: (
            platform_endpoints(platform, namespace, name)[0]["oauth"]["required_scopes"]
            == ["mcp:tools", "mcp:read"]
            or None
        ),
        60,
        "the new scopes on the platform",
    )
    assert platform_endpoints(platform, namespace, name)[0]["rate_limit"] is None
    assert platform_endpoints(platform, namespace, name)[0]["allowed_origins"] == [
        "https://app.example",
        "http://localhost:3000",
    ]

    # OAuth without its issuer is refused by the API server itself.
    bare = endpoint_manifest(endpoint_name(namespace) + "x", auth={"mode": "OAuth"})
    del bare["spec"]["credentialsSecretName"]
    refused = kubectl.run("apply", "-n", namespace, "-f", str(write(tmp_path, "e1.yaml", bare)), check=False)
    assert refused.returncode != 0 and "auth.oauth (at least its issuer) is required" in refused.stderr

    # The API server refuses what the operator could not do: switching the auth mode, an ApiKey
    # Endpoint without a Secret to write to, a name that cannot be a URL path segment.
    manifest["spec"]["auth"] = {"mode": "ApiKey"}
    manifest["spec"]["credentialsSecretName"] = "k"
    switched = kubectl.run(
        "apply", "-n", namespace, "-f", str(write(tmp_path, "e2.yaml", manifest)), check=False
    )
    assert switched.returncode != 0 and "auth.mode cannot change" in switched.stderr
    keyless = endpoint_manifest("keyless")
    del keyless["spec"]["credentialsSecretName"]
    refused = kubectl.run(
        "apply", "-n", namespace, "-f", str(write(tmp_path, "e3.yaml", keyless)), check=False
    )
    assert refused.returncode != 0 and "credentialsSecretName is required" in refused.stderr
    moved = {
        **manifest,
        "spec": {"installationRef": {"name": "another"}, "auth": {"mode": "OAuth", "oauth": oauth}},
    }
    refused = kubectl.run("apply", "-n", namespace, "-f", str(write(tmp_path, "e5.yaml", moved)), check=False)
    assert refused.returncode != 0 and "installationRef cannot change" in refused.stderr
    dotted = endpoint_manifest("has.dots")
    refused = kubectl.run(
        "apply", "-n", namespace, "-f", str(write(tmp_path, "e4.yaml", dotted)), check=False
    )
    assert refused.returncode != 0 and "URL path segment" in refused.stderr

    # Deleting it deletes the platform endpoint and does not hang.
    kubectl.run("delete", "bep", name, "-n", namespace, "--wait=true", "--timeout=60s")
    assert not platform_endpoints(platform, namespace, name)


def test_deleting_a_namespace_uninstalls_with_its_token_secret_and_keeps_what_orphan_keeps(
    kubectl: Kubectl, operator: OperatorProcess, platform: PlatformProcess, tmp_path: Path
) -> None:
    # Everything in the namespace goes at once, the platform token Secret too: the operator holds
    # that Secret (bundle-operator.dev/in-use) until the uninstalls that need it are done.
    namespace = f"e2e-nsgone-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", namespace)
    kubectl.run(
        "create", "secret", "generic", "platform-token", "-n", namespace, "--from-literal=token=t0ken"
    )
    bundle = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": "Bundle",
        "metadata": {"name": BUNDLE},
        "spec": {"source": {"inline": DOCUMENT}},
    }
    kubectl.apply(write(tmp_path, "bundle.yaml", bundle), namespace=namespace)
    policies = {"gw-kit": "Delete", "gw-keep": "Orphan", "gw-third": "Delete"}
    for name, policy in policies.items():
        installation = {
            "apiVersion": "bundle-operator.dev/v1alpha1",
            "kind": "BundleInstallation",
            "metadata": {"name": name},
            "spec": {
                "bundleRef": {"name": BUNDLE},
                "workspace": f"{namespace}-{name}",
                "deletionPolicy": policy,
                "platform": {
                    "url": platform.url,
                    "tokenSecretRef": {"name": "platform-token", "key": "token"},
                },
            },
        }
        kubectl.apply(write(tmp_path, f"{name}.yaml", installation), namespace=namespace)
    for name in policies:
        wait_ready(kubectl, "bundleinstallation", name, namespace, timeout=90)
    endpoint = f"gone-{namespace.rsplit('-', 1)[-1]}"
    kubectl.apply(write(tmp_path, "endpoint.yaml", endpoint_manifest(endpoint)), namespace=namespace)
    wait_ready(kubectl, "bep", endpoint, namespace, timeout=60)
    assert platform_endpoints(platform, f"{namespace}-gw-kit", endpoint)
    held = kubectl.get("secret", "platform-token", namespace)
    assert "bundle-operator.dev/in-use" in (held["metadata"].get("finalizers") or [])

    kubectl.run("delete", "namespace", namespace, "--wait=false")
    wait_until(lambda: kubectl.get_or_none("namespace", namespace) is None, 120, "the namespace gone")

    for name, policy in policies.items():
        left = {
            path: items
            for path in ("agents", "mcp-servers", "mcp-instances", "gateway-bundles", "endpoints")
            if (items := platform_list(platform, f"{namespace}-{name}", path))
        }
        if policy == "Orphan":
            assert left.get("gateway-bundles") and left.get("mcp-instances"), f"Orphan kept nothing: {left}"
        else:
            assert left == {}, f"{name} left {left} on the platform"
