"""Which installations share a workspace, and which of them came first to claim its bundles.

The indexes come from kopf (``installations_by_target``, ``bundle_claims``, their entries made by
``target_of`` and ``claim_of``); ``PeersView`` keeps the live ones for the drift clock, which runs
outside any handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bundle_operator.k8s.conditions import is_true
from bundle_operator.k8s.installation.inputs import BundleClaim, Peer
from bundle_operator.k8s.reconcile import platform_key

# An installation spec -> the platform it names (or the operator's default).
UrlOf = Callable[[Mapping[str, Any]], str]


@dataclass
class PeersView:
    """The live ``installations_by_target`` and ``bundle_claims`` indexes, as a handler last saw them."""

    index: Any = None
    bundles: Any = None

    def follow(self, indexes: Mapping[str, Any]) -> None:
        """Keep the indexes a handler was given (kopf hands the same live objects to every one)."""
        self.index = indexes["installations_by_target"]
        self.bundles = indexes["bundle_claims"]

    def older_peers(self, obj: dict[str, Any], url_of: UrlOf) -> list[Peer]:
        """The installations of the same workspace that came before ``obj`` (only those can claim
        its bundle first; see ``first_claim``), with what their Bundles resolved to."""
        meta = obj.get("metadata") or {}
        mine = (meta.get("creationTimestamp", ""), meta.get("namespace", ""), meta.get("name", ""))
        older = [
            peer
            for peer in peers(obj.get("spec") or {}, self.index or {}, url_of)
            if (peer.created, peer.namespace, peer.name) < mine
        ]
        if self.bundles is None:
            return older  # the reconciler reads the peers' Bundles itself
        # What each peer's Bundle resolved to, from the watch: a hundred installations of one
        # workspace would otherwise each read up to a hundred Bundles.
        return [
            dataclasses.replace(
                peer, bundle=bundle_claim(self.bundles.get((peer.namespace, peer.bundle_ref)))
            )
            for peer in older
        ]


def peers(spec: Mapping[str, Any], installations_by_target: Any, url_of: UrlOf) -> list[Peer]:
    """Every installation into the same workspace of the same platform."""
    key = (platform_key(url_of(spec)), spec.get("workspace") or "")
    return list(installations_by_target.get(key, []))


def target_of(
    namespace: str, name: str, spec: Mapping[str, Any], meta: Mapping[str, Any], url: str
) -> dict[Any, Peer]:
    """An installation as an ``installations_by_target`` entry, keyed by platform and workspace."""
    workspace = spec.get("workspace") or ""
    bundle_ref = (spec.get("bundleRef") or {}).get("name", "")
    uid, created = meta.get("uid", ""), meta.get("creationTimestamp", "")
    peer = Peer(namespace, name, uid, created, bundle_ref, platform_url=url, workspace=workspace)
    return {(platform_key(url), workspace): peer}


def claim_of(spec: Mapping[str, Any], status: Mapping[str, Any]) -> BundleClaim:
    """What a Bundle claims, for ``bundle_claims``: the bundle it names, and whether it stalled."""
    bundle_name = status.get("bundleName")
    if not isinstance(bundle_name, str):
        # An inline document names its bundle before the Bundle's first run says so: a fleet
        # applied at once would otherwise wait for its Bundles before checking for duplicates.
        inline = (spec.get("source") or {}).get("inline")
        bundle_name = inline.get("name") if isinstance(inline, dict) else None
    named = bundle_name if isinstance(bundle_name, str) else None
    return BundleClaim(True, named, stalled=is_true(dict(status), "Stalled"))


def bundle_claim(found: Any) -> BundleClaim:
    """The claim a ``bundle_claims`` lookup found, or a Bundle that does not exist."""
    for state in found or ():
        return state  # type: ignore[no-any-return]
    return BundleClaim(exists=False)
