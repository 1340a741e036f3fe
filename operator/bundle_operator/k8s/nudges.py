"""Nudges: a changed input re-runs the objects that use it.

A nudge sets the inputs-changed annotation; kopf sees the change and runs the update handler,
with its retries, even across an operator restart. Setting the same marker twice changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.k8s.installation.inputs import ANNOTATION_INPUTS
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.resources import API_VERSION

log = logging.getLogger(__name__)


@dataclass
class Nudges:
    """Sets the inputs-changed marker on the objects that use a changed input."""

    kube: Kube
    # The last installation marker set on each Endpoint, so an installation's every status write
    # does not cost a patch per Endpoint.
    endpoint_markers: dict[tuple[str, str], str] = field(default_factory=dict)

    async def nudge(self, plural: str, namespace: str, names: Iterable[str] | None, marker: str) -> None:
        """Mark each of ``names``; one that is gone is skipped, other failures only logged."""
        for name in sorted(set(names or ())):
            try:
                await self.kube.patch_annotations(plural, namespace, name, {ANNOTATION_INPUTS: marker})
            except KubeError as exc:
                if not exc.not_found:
                    log.warning(
                        "could not nudge: %s", exc.reason, extra=object_extra(plural, namespace, name)
                    )

    async def nudge_endpoint(self, plural: str, namespace: str, name: str, marker: str) -> None:
        """Mark an Endpoint with its installation's marker, unless it already carries it."""
        if self.endpoint_markers.get((namespace, name)) != marker:
            await self.nudge(plural, namespace, [name], marker)
            self.endpoint_markers[(namespace, name)] = marker

    def forget_endpoint(self, namespace: str, name: str) -> None:
        """The Endpoint is gone: so is the marker remembered for it."""
        self.endpoint_markers.pop((namespace, name), None)


def secret_endpoints(
    namespace: str, users: Iterable[str] | None, by_installation: Any, meta: Mapping[str, Any]
) -> set[str]:
    """The Endpoints a Secret reaches: those of the installations that use it (their platform
    token), and the one that owns it (its credentials, changed or deleted by someone else)."""
    endpoints = {e for user in users or () for e in by_installation.get((namespace, user), ())}
    endpoints.update(
        owner["name"]
        for owner in meta.get("ownerReferences") or []
        if owner.get("apiVersion") == API_VERSION and owner.get("kind") == "Endpoint" and owner.get("name")
    )
    return endpoints


def referred_by(namespace: str | None, name: str, spec: Mapping[str, Any], ref: str) -> dict[Any, str]:
    """The object ``spec.<ref>.name`` names, as an index key for ``name`` (none without one)."""
    named = (spec.get(ref) or {}).get("name")
    return {(namespace, named): name} if isinstance(named, str) else {}


def bundle_inputs(spec: Mapping[str, Any], namespace: str | None, name: str) -> dict[Any, str]:
    """The ConfigMaps and Secrets a Bundle's source reads, as ``bundles_by_object`` keys."""
    source = spec.get("source") or {}
    keys: dict[Any, str] = {}
    if isinstance(source.get("configMapRef"), dict):
        keys[("ConfigMap", namespace, source["configMapRef"].get("name"))] = name
    mcpb = source.get("mcpb") or {}
    if isinstance(mcpb.get("configMapRef"), dict):
        keys[("ConfigMap", namespace, mcpb["configMapRef"].get("name"))] = name
    if isinstance(mcpb.get("secretRef"), dict):
        keys[("Secret", namespace, mcpb["secretRef"].get("name"))] = name
    return keys
