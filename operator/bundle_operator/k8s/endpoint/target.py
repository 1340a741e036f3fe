"""Where an Endpoint's platform endpoint lives: the gateway its BundleInstallation installed, on
that installation's platform and workspace; ``Waiting`` while there is no gateway to expose.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.kube import Kube
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.reconcile import OperatorSettings, connect
from bundle_operator.k8s.resources import INSTALLATION_PLURAL, BundleInstallationSpec, EndpointSpec
from bundle_operator.platform.protocol import PlatformAPI


class Waiting(cond.Failing):
    """Something the Endpoint needs is not there yet; it continues by itself once it is."""


@dataclass(frozen=True)
class Target:
    """Where the platform endpoint lives, as the referenced installation says."""

    installation: str
    platform_url: str
    platform: PlatformAPI
    workspace: str
    gateway_id: str


def gateway_id(installation_status: dict[str, Any] | None) -> str | None:
    """The platform id of the gateway bundle an installation installed, if it did."""
    for entity in (installation_status or {}).get("entities") or []:
        if isinstance(entity, dict) and entity.get("kind") == "gateway" and entity.get("id"):
            return str(entity["id"])
    return None


def installation_marker(installation: dict[str, Any] | None) -> str:
    """What of an installation its Endpoints depend on, hashed: changes only when one of them does."""
    if installation is None:
        return "deleted"
    spec = installation.get("spec") or {}
    meta = installation.get("metadata") or {}
    status = installation.get("status") or {}
    relevant = {
        "gateway": gateway_id(status),
        "platform": spec.get("platform"),
        "workspace": spec.get("workspace"),
        "deleting": bool(meta.get("deletionTimestamp")),
        "installed": cond.is_true(status, "Installed"),
    }
    text = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def find_target(
    kube: Kube,
    settings: OperatorSettings,
    platforms: PlatformPool,
    namespace: str,
    spec: EndpointSpec,
    *,
    deleting_ok: bool = False,
) -> Target:
    """Where the endpoint lives; Waiting while the installation has no gateway to expose. With
    ``deleting_ok`` an installation being deleted still counts (the Endpoint's own delete)."""
    ref = spec.installation_ref.name
    installation = await kube.read_custom(INSTALLATION_PLURAL, namespace, ref)
    if installation is None:
        raise Waiting(
            "InstallationNotFound",
            f"waiting for BundleInstallation '{ref}' (spec.installationRef) in namespace '{namespace}'; "
            "create it (the Endpoint continues by itself once it has installed a gateway)",
        )
    if (installation.get("metadata") or {}).get("deletionTimestamp") and not deleting_ok:
        raise Waiting(
            "InstallationDeleting",
            f"BundleInstallation '{ref}' is being deleted, and its gateway with it; the Endpoint "
            "waits for a new installation of that name",
        )
    try:
        installation_spec = BundleInstallationSpec.model_validate(installation.get("spec") or {})
    except ValidationError:
        raise Waiting(
            "InstallationNotInstalled",
            f"waiting for BundleInstallation '{ref}', whose spec is invalid (see its status); fix it",
        ) from None
    status = installation.get("status") or {}
    gateway = gateway_id(status)
    if gateway is None:
        if cond.is_true(status, "Installed"):
            raise Waiting(
                "NoGateway",
                f"BundleInstallation '{ref}' installed a bundle without a gateway section, so there "
                "is nothing to serve; add a gateway section to its Bundle (the Endpoint continues by "
                "itself)",
            )
        ready = cond.condition_of(status, "Ready") or {}
        detail = f" (its Ready condition: {ready.get('reason')}: {ready.get('message')})" if ready else ""
        raise Waiting(
            "InstallationNotInstalled",
            f"waiting for BundleInstallation '{ref}' to install its bundle's gateway{detail}",
        )
    url, platform = await connect(
        kube, settings, platforms, namespace, installation_spec, whose=f"BundleInstallation '{ref}'"
    )
    return Target(ref, url, platform, installation_spec.workspace, gateway)
