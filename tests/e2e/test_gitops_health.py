"""GitOps health with the real evaluators: the Argo CD health check (gitops/argocd-health.lua) run
by gopher-lua, and kstatus itself, on statuses the operator really wrote in this control plane.

Each case puts an object in one state (installed, waiting, stalled, suspended, disabled), waits for
the operator to say so in status, and then asks both evaluators what a GitOps tool would show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import OperatorProcess, condition, resource, wait_ready
from tests.gitops.tools import argocd_health, kstatus
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HEALTH_LUA = ROOT / "gitops" / "argocd-health.lua"
GITOPS_DOC = ROOT / "docs" / "how-to" / "gitops.md"
KINDS = ("Bundle", "BundleInstallation", "Endpoint")

DOCUMENT: dict[str, Any] = bundle_document(
    "health-kit",
    setup=[{"key": "api_token", "label": "API token", "type": "secret"}],
    mcps=[
        {
            "key": "notes",
            "name": "Notes",
            "type": "url",
            "endpoint_url": "http://127.0.0.1:9/notes/mcp",
            "headers": {"Authorization": "Bearer ${setup.api_token}"},
        }
    ],
    agents=[{"key": "helper", "name": "Helper", "instructions": "Help.", "mcps": ["notes"]}],
    gateway={"description": "Notes.", "members": ["notes"]},
)


def apply(kubectl: Kubectl, tmp_path: Path, namespace: str, *objects: dict[str, Any]) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    kubectl.apply(path, namespace=namespace)


def installation(name: str, namespace: str, secret: str, **extra: Any) -> dict[str, Any]:
    setup = [{"key": "api_token", "secretKeyRef": {"name": secret, "key": "token"}}]
    return resource(
        "BundleInstallation",
        name,
        {"bundleRef": {"name": "health-kit"}, "workspace": f"{namespace}-{name}", "setup": setup, **extra},
    )


def evaluated(kubectl: Kubectl, kind: str, name: str, namespace: str) -> tuple[str, str, dict[str, Any]]:
    obj = kubectl.get(kind, name, namespace)
    return argocd_health(HEALTH_LUA, obj)["status"], kstatus(obj)["status"], obj


def settled(
    kubectl: Kubectl, kind: str, name: str, namespace: str, ready_reason: str, observed: bool = True
) -> dict[str, Any]:
    """The object once its status has the given Ready reason (for the current generation, unless
    ``observed`` is False: a waiting object does not claim to have handled its spec)."""

    def check() -> dict[str, Any] | None:
        obj = kubectl.get_or_none(kind, name, namespace)
        if obj is None:
            return None
        status = obj.get("status") or {}
        ready = condition(obj, "Ready")
        current = not observed or status.get("observedGeneration") == obj["metadata"]["generation"]
        return obj if current and ready is not None and ready.get("reason") == ready_reason else None

    return wait_until(check, 90, f"{kind} {name} with Ready reason {ready_reason}")


def test_argo_cd_and_kstatus_read_what_the_operator_reports(
    kubectl: Kubectl,
    operator: OperatorProcess,
    platform: PlatformProcess,
    namespace: str,
    tmp_path: Path,
) -> None:
    kubectl.wait_for_condition("crd", "endpoints.bundle-operator.dev", "Established", timeout=30)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "health-token"},
        "stringData": {"token": "t" * 40},
    }
    apply(
        kubectl,
        tmp_path,
        namespace,
        secret,
        resource("Bundle", "health-kit", {"source": {"inline": DOCUMENT}}),
        installation("installed", namespace, "health-token"),
        installation("stalled", namespace, "no-such-secret"),
        installation("suspended", namespace, "health-token", suspend=True),
        installation("awaiting", namespace, "health-token", approval="Manual"),
        resource(
            "Endpoint",
            "health-waiting",
            {"installationRef": {"name": "not-yet"}, "credentialsSecretName": "health-waiting-key"},
        ),
    )
    seen: dict[str, tuple[str, str]] = {}

    wait_ready(kubectl, "bundle", "health-kit", namespace)
    seen["bundle ready"] = evaluated(kubectl, "bundle", "health-kit", namespace)[:2]

    wait_ready(kubectl, "bundleinstallation", "installed", namespace)
    seen["installation ready"] = evaluated(kubectl, "bundleinstallation", "installed", namespace)[:2]

    def stalled() -> bool:
        cond = condition(kubectl.get("bundleinstallation", "stalled", namespace), "Stalled")
        return cond is not None and cond.get("status") == "True"

    wait_until(lambda: stalled() or None, 60, "the installation with a missing Secret stalled")
    argo, ks, obj = evaluated(kubectl, "bundleinstallation", "stalled", namespace)
    seen["installation stalled"] = (argo, ks)
    argo_message = argocd_health(HEALTH_LUA, obj)["message"]
    assert "no-such-secret" in argo_message  # the operator's message reaches the Argo CD UI

    settled(kubectl, "bundleinstallation", "suspended", namespace, "Suspended")
    seen["installation suspended"] = evaluated(kubectl, "bundleinstallation", "suspended", namespace)[:2]

    settled(kubectl, "bundleinstallation", "awaiting", namespace, "AwaitingApproval")
    argo, ks, obj = evaluated(kubectl, "bundleinstallation", "awaiting", namespace)
    seen["installation awaiting approval"] = (argo, ks)
    assert obj["status"]["plan"]["id"] in argocd_health(HEALTH_LUA, obj)["message"]

    waiting = settled(kubectl, "bep", "health-waiting", namespace, "InstallationNotFound", observed=False)
    assert condition(waiting, "Reconciling")["status"] == "True"  # type: ignore[index]
    seen["endpoint waiting"] = evaluated(kubectl, "bep", "health-waiting", namespace)[:2]

    # An Endpoint serving, then disabled.
    endpoint = resource(
        "Endpoint",
        f"health-{namespace.rsplit('-', 1)[-1]}",
        {"installationRef": {"name": "installed"}, "credentialsSecretName": "health-key"},
    )
    apply(kubectl, tmp_path, namespace, endpoint)
    name = endpoint["metadata"]["name"]
    wait_ready(kubectl, "bep", name, namespace)
    seen["endpoint serving"] = evaluated(kubectl, "bep", name, namespace)[:2]
    endpoint["spec"]["enabled"] = False
    apply(kubectl, tmp_path, namespace, endpoint)
    settled(kubectl, "bep", name, namespace, "Disabled")
    seen["endpoint disabled"] = evaluated(kubectl, "bep", name, namespace)[:2]

    # A spec the operator has not looked at yet: generation ahead of observedGeneration.
    obj = kubectl.get("bundleinstallation", "installed", namespace)
    obj["metadata"]["generation"] = obj["metadata"]["generation"] + 1
    seen["installation changed, not yet observed"] = (
        argocd_health(HEALTH_LUA, obj)["status"],
        kstatus(obj)["status"],
    )

    print(json.dumps(seen, indent=2))
    assert seen == {
        "bundle ready": ("Healthy", "Current"),
        "installation ready": ("Healthy", "Current"),
        "installation stalled": ("Degraded", "Failed"),
        # kstatus has no suspended state: with writes held back the object is not Ready, so a
        # Flux health check waits (docs/how-to/gitops.md says so).
        "installation suspended": ("Suspended", "InProgress"),
        # Waiting for a person, like a suspension: Argo CD shows it Suspended, kstatus in progress.
        "installation awaiting approval": ("Suspended", "InProgress"),
        "endpoint waiting": ("Progressing", "InProgress"),
        "endpoint serving": ("Healthy", "Current"),
        "endpoint disabled": ("Suspended", "Current"),
        "installation changed, not yet observed": ("Progressing", "InProgress"),
    }


def test_the_documented_health_check_is_the_tested_one() -> None:
    """docs/how-to/gitops.md embeds the script for argocd-cm; it must be the file the test runs."""
    text = GITOPS_DOC.read_text()
    script = HEALTH_LUA.read_text()
    blocks = re.findall(
        r"resource\.customizations\.health\.bundle-operator\.dev_(\w+): \|\n((?:      .*\n|\n)+)", text
    )
    assert sorted(kind for kind, _ in blocks) == sorted(KINDS)
    for _kind, block in blocks:
        embedded = "\n".join(line[6:] for line in block.rstrip("\n").split("\n")) + "\n"
        assert embedded == script
