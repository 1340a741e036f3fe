"""The inputs of a BundleInstallation's reconcile: its Bundle resolved and parsed, its platform,
its state, its setup values, and whether an older installation already claims the bundle.

Each problem a user must fix is a ``SetupProblem`` naming the field; a temporary one is ``Retry``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.plan import Options
from bundle_operator.engine.record import Record
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.bundle.sources import SourceError, resolve
from bundle_operator.k8s.installation.archives import SourceArchives
from bundle_operator.k8s.installation.setup import SetupProblem
from bundle_operator.k8s.installation.state import StateStore
from bundle_operator.k8s.kube import Kube
from bundle_operator.k8s.reconcile import OperatorSettings, Retry, backoff, platform_key
from bundle_operator.k8s.resources import BUNDLE_PLURAL, BundleInstallationSpec
from bundle_operator.platform.protocol import PlatformAPI
from bundle_operator.sources.models import BundleSource, RegistrySource, SourceStatus
from bundle_operator.sources.registry_source import pinned, resolve_registry
from bundle_operator.sources.resolution import Resolved

ANNOTATION_INPUTS = "bundle-operator.dev/inputs-changed"

_ON_CONFLICT = {
    "Fail": OnConflict.FAIL,
    "KeepMine": OnConflict.KEEP_MINE,
    "TakeTheirs": OnConflict.TAKE_THEIRS,
}


@dataclass(frozen=True)
class BundleClaim:
    """What a peer's Bundle resolved to, as the operator's watch last saw it."""

    exists: bool
    bundle_name: str | None = None
    stalled: bool = False


@dataclass(frozen=True)
class Peer:
    """Another installation that could claim the same bundle in the same workspace."""

    namespace: str
    name: str
    uid: str
    created: str
    bundle_ref: str
    platform_url: str
    workspace: str
    # None: not known, the reconciler reads the Bundle.
    bundle: BundleClaim | None = None


@dataclass(frozen=True)
class Inputs:
    """Everything the engine needs for one run, resolved from the cluster."""

    spec: BundleInstallationSpec
    parsed: ParsedBundle
    platform: PlatformAPI
    store: StateStore
    record: Record
    setup: dict[str, str]
    # The archives the Bundle's source provided (``sha256:<hex>``), which install may upload.
    archives: tuple[str, ...] = ()

    @property
    def workspace(self) -> str:
        """The platform workspace the spec installs into."""
        return self.spec.workspace

    @property
    def options(self) -> Options:
        """The engine's options from the spec."""
        return Options(
            activate=self.spec.activate,
            substitutions=dict(self.spec.substitutions),
            on_conflict=_ON_CONFLICT[self.spec.update_policy.on_conflict],
            artifacts=SourceArchives(frozenset(self.archives)) if self.archives else None,
        )


class CustomReader(Protocol):
    """Reads one custom object (``watch_cache.Bundles``: the watch's copy, else the API server)."""

    async def read(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        ...


async def read_bundle(
    kube: Kube,
    settings: OperatorSettings,
    namespace: str,
    spec: BundleInstallationSpec,
    bundles: CustomReader,
) -> Resolved:
    """The Bundle of ``spec.bundleRef`` as ``bundles`` has it, its source fetched (objects it names
    through ``kube``) and parsed; refused while it has blocking issues."""
    name = spec.bundle_ref.name
    obj = await bundles.read(BUNDLE_PLURAL, namespace, name)
    if obj is None:
        raise SetupProblem(
            "BundleNotFound",
            f"spec.bundleRef: Bundle '{name}' does not exist in namespace '{namespace}'; create it "
            "(the installation continues by itself once it exists)",
        )
    try:
        source = BundleSource.model_validate((obj.get("spec") or {}).get("source") or {})
    except ValidationError:
        raise SetupProblem("BundleNotReady", f"Bundle '{name}' has an invalid spec.source") from None
    try:
        if source.registry is not None:
            resolved = await _registry_as_resolved(source.registry, obj, settings)
        else:
            resolved = await resolve(source, namespace, kube, settings.sources)
    except SourceError as exc:
        if exc.permanent:
            raise SetupProblem("BundleNotReady", f"Bundle '{name}': {exc.message}") from None
        raise Retry(f"Bundle '{name}': {exc.message}", backoff(2)) from None
    parsed = resolved.parsed
    if parsed.bundle is None or parsed.blocking:
        codes = sorted({str(i.code) for i in parsed.issues if i.blocking})
        raise SetupProblem(
            "BundleInvalid",
            f"Bundle '{name}' has blocking issues ({', '.join(codes)}); see its status.issues and "
            "fix the document",
        )
    return resolved


async def _registry_as_resolved(
    source: RegistrySource, bundle: dict[str, Any], settings: OperatorSettings
) -> Resolved:
    """What the Bundle resolved its registry record to: that version and digest, never a newer read
    of ``latest`` that the Bundle's status does not show yet (DESIGN.md §9.3)."""
    name = bundle["metadata"]["name"]
    meta, status = bundle["metadata"], bundle.get("status") or {}
    try:
        used = SourceStatus.model_validate(status.get("source")) if status.get("source") else None
    except ValidationError:
        used = None
    if used is None or status.get("observedGeneration") != meta.get("generation"):
        raise SetupProblem(
            "BundleNotReady",
            f"Bundle '{name}' has not resolved its registry record yet; see its conditions "
            "(the installation continues by itself once it has)",
        )
    return await resolve_registry(pinned(source, used), settings.sources, reuse=True)


async def read_claim(kube: Kube, peer: Peer) -> BundleClaim:
    """What the peer's Bundle resolved to, read from the cluster."""
    other = await kube.read_custom(BUNDLE_PLURAL, peer.namespace, peer.bundle_ref)
    if other is None:
        return BundleClaim(exists=False)
    status = other.get("status") or {}
    name = status.get("bundleName")
    return BundleClaim(True, name if isinstance(name, str) else None, cond.is_true(status, "Stalled"))


async def first_claim(
    kube: Kube,
    settings: OperatorSettings,
    body: dict[str, Any],
    bundle_name: str,
    url: str,
    workspace: str,
    peers: Sequence[Peer],
) -> Peer | None:
    """The older installation of the same bundle into the same workspace and platform, if any."""
    meta = body["metadata"]
    mine = (meta.get("creationTimestamp", ""), meta["namespace"], meta["name"])
    rivals: list[Peer] = []
    for peer in peers:
        if peer.uid == meta.get("uid"):
            continue
        if platform_key(peer.platform_url or settings.default_platform_url) != platform_key(url):
            continue
        if peer.workspace != workspace or (peer.created, peer.namespace, peer.name) > mine:
            continue
        claim = peer.bundle or await read_claim(kube, peer)
        if not claim.exists:
            continue
        if claim.bundle_name == bundle_name:
            rivals.append(peer)
        elif claim.bundle_name is None and not claim.stalled:
            # Its Bundle is still resolving (a download, say): it may be this very bundle, and
            # it came first. Wait rather than install twice.
            raise Retry(
                f"waiting for Bundle {peer.namespace}/{peer.bundle_ref} of the older BundleInstallation "
                f"{peer.namespace}/{peer.name} to resolve, in case it installs the same bundle",
                backoff(2),
            )
    return min(rivals, key=lambda p: (p.created, p.namespace, p.name), default=None)


def inputs_marker(kind: str, name: str, version: str) -> str:
    """The value of the inputs-changed annotation: changes only when the input does."""
    return f"{kind}/{name}@" + hashlib.sha256(version.encode()).hexdigest()[:16]
