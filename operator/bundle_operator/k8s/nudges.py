"""Nudges: a changed input re-runs the objects that use it.

A nudge sets the inputs-changed annotation; kopf sees the change and runs the update handler,
with its retries, even across an operator restart. Setting the same marker twice changes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.k8s.endpoint.target import installation_marker
from bundle_operator.k8s.installation.inputs import ANNOTATION_INPUTS, Peer, inputs_marker
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.resources import API_VERSION, BUNDLE_PLURAL, ENDPOINT_PLURAL, INSTALLATION_PLURAL

log = logging.getLogger(__name__)


@dataclass
class Nudges:
    """Sets the inputs-changed marker on the objects that use a changed input."""

    kube: Kube
    # The last installation marker set on each Endpoint, so an installation's every status write
    # does not cost a patch per Endpoint.
    endpoint_markers: dict[tuple[str, str], str] = field(default_factory=dict)
    # The outcome each Bundle's installations were last nudged for (bundle_seen).
    bundle_markers: dict[tuple[str, str], str] = field(default_factory=dict)

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

    async def secret_changed(
        self, namespace: str, name: str, meta: Mapping[str, Any], deleted: bool, indexes: Mapping[str, Any]
    ) -> None:
        """A Secret changed: the installations, Bundles and Endpoints that read it run again."""
        marker = inputs_marker("Secret", name, str(meta.get("resourceVersion", "")))
        users = indexes["installations_by_secret"].get((namespace, name))
        await self.nudge(INSTALLATION_PLURAL, namespace, users, marker)
        bundles = indexes["bundles_by_object"].get(("Secret", namespace, name))
        await self.nudge(BUNDLE_PLURAL, namespace, bundles, marker)
        endpoints = secret_endpoints(namespace, users, indexes["endpoints_by_installation"], meta)
        marker = inputs_marker("Secret", name, "deleted") if deleted else marker
        await self.nudge(ENDPOINT_PLURAL, namespace, endpoints, marker)

    async def bundle_seen(
        self,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        event: str | None,
        users: Iterable[str] | None,
    ) -> None:
        """A Bundle's watch event: when the outcome of its reconcile is new, its installations run again.

        Taken from the watch, not from the Bundle's handler, because kopf indexes an event before
        it runs its handlers: an installation that read this Bundle before its outcome was known is
        among ``users`` here, and one indexed later reads the outcome. A handler's list of users,
        taken before a slow registry read, missed installations applied together with the Bundle.
        """
        key = (namespace, name)
        if event == "DELETED":
            self.bundle_markers.pop(key, None)
            return
        outcome = bundle_outcome(body)
        if outcome is None:
            return
        marker = inputs_marker("Bundle", name, outcome)
        before = self.bundle_markers.get(key)
        if before == marker:
            return
        self.bundle_markers[key] = marker
        if before is None and event is None:
            return  # the listing at start: every installation resumes, reading the Bundle as it is
        await self.nudge(INSTALLATION_PLURAL, namespace, users, marker)

    async def peer_deleted(self, namespace: str, name: str, same_workspace: Iterable[Peer]) -> None:
        """An installation refused as a duplicate of the deleted one may go ahead now."""
        marker = inputs_marker("Peer", name, "deleted")
        for peer in same_workspace:
            if peer.name != name or peer.namespace != namespace:
                await self.nudge(INSTALLATION_PLURAL, peer.namespace, [peer.name], marker)

    async def installation_changed(
        self, namespace: str, name: str, body: Mapping[str, Any] | None, endpoints: Iterable[str] | None
    ) -> None:
        """The Endpoints of an installation run again when what they depend on changes (its gateway
        appears or goes, it moves to another platform); its other status writes leave them alone."""
        marker = inputs_marker(
            "BundleInstallation", name, installation_marker(None if body is None else dict(body))
        )
        for endpoint in sorted(set(endpoints or ())):
            if self.endpoint_markers.get((namespace, endpoint)) != marker:
                await self.nudge(ENDPOINT_PLURAL, namespace, [endpoint], marker)
                self.endpoint_markers[(namespace, endpoint)] = marker

    def forget_endpoint(self, namespace: str, name: str) -> None:
        """The Endpoint is gone: so is the marker remembered for it."""
        self.endpoint_markers.pop((namespace, name), None)


def bundle_outcome(body: Mapping[str, Any]) -> str | None:
    """What an installation reads of its Bundle's last reconcile (the generation it handled, the
    digest, the registry version pinned), or None while it has handled none."""
    status = body.get("status") or {}
    observed = status.get("observedGeneration")
    if observed is None:
        return None
    return json.dumps([observed, status.get("digest"), status.get("source")], sort_keys=True)


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
