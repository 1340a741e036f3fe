"""The level-based reconcile of a BundleInstallation: resolve inputs, analyze, install or update,
check drift, write status. Create, update, resume, the drift timer, a changed Secret or Bundle and
the reconcile annotation all come here. No kopf types: handlers call it and map ``Retry``.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bundle_operator.document.issues import Code
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.apply import (
    BUNDLE_INVALID,
    Blocked,
    InstallFailed,
    Options,
    PersistFailed,
    Plan,
    apply,
    plan,
)
from bundle_operator.engine.correct import correct_drift
from bundle_operator.engine.drift import DriftReport, drift_from
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.record import Record
from bundle_operator.engine.snapshot import read_snapshot
from bundle_operator.engine.uninstall import UninstallRefused, uninstall
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.metrics import ReconcileResult
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.resources import (
    BUNDLE_PLURAL,
    INSTALLATION_PLURAL,
    BundleInstallationSpec,
    BundleSource,
)
from bundle_operator.k8s.setup import SetupProblem, read_setup, secret_value
from bundle_operator.k8s.sources import SourceError, SourceSettings, resolve, status_issues
from bundle_operator.k8s.state import (
    MAX_RECORD_BYTES,
    RecordTooLarge,
    StateConflict,
    StateStore,
    StateUnreadable,
    projected_size,
)
from bundle_operator.platform.errors import NotFound, PlatformError, PreconditionFailed, Unavailable
from bundle_operator.platform.protocol import PlatformAPI
from bundle_operator.platform.sharing import READ_POLICY, ReadPolicy

log = logging.getLogger(__name__)

ANNOTATION_PAUSED = "bundle-operator.dev/paused"
ANNOTATION_RECONCILE = "bundle-operator.dev/reconcile-requested-at"
ANNOTATION_INPUTS = "bundle-operator.dev/inputs-changed"
# A reconcile started by an event may use a list of its workspace that another installation
# started at most this long ago (the shortest drift interval is 5 s, so never older than one).
EVENT_READ_AGE = 5.0

_ON_CONFLICT = {
    "Fail": OnConflict.FAIL,
    "KeepMine": OnConflict.KEEP_MINE,
    "TakeTheirs": OnConflict.TAKE_THEIRS,
}
_PREVIEW_ACTION = {"CREATE": "Create", "REUSE": "Reuse", "UPDATE": "Update", "SKIPPED": "Skipped"}


class Retry(Exception):
    """A temporary failure: run again after ``delay`` seconds."""

    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


def backoff(
    attempt: int, *, base: float = 2.0, cap: float = 300.0, retry_after: float | None = None
) -> float:
    """Exponential backoff with full jitter, never below the platform's Retry-After."""
    ceiling = min(cap, base * (2 ** min(attempt, 12)))
    delay = random.uniform(ceiling / 2, ceiling)
    return max(delay, retry_after or 0.0)


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
class OperatorSettings:
    """What every reconcile shares: the default platform connection and source rules."""

    default_platform_url: str | None = None
    default_platform_token: str | None = None
    sources: SourceSettings = field(default_factory=SourceSettings)
    # Read at every use: a mounted Secret's token rotates without an operator restart.
    default_platform_token_file: Path | None = None

    def default_token(self) -> str | None:
        """The default platform's token, from the file when one was given."""
        if self.default_platform_token_file is not None:
            try:
                return self.default_platform_token_file.read_text().strip() or None
            except OSError:
                return self.default_platform_token
        return self.default_platform_token


def platform_key(url: str | None) -> str:
    """A platform URL normalized for comparing installations."""
    return (url or "").rstrip("/").lower()


def is_paused(body: dict[str, Any]) -> bool:
    """Whether the paused annotation asks for report-only runs."""
    value = (body.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_PAUSED, "")
    return str(value).strip().lower() in ("true", "yes", "1")


@dataclass
class StatusDraft:
    """A status being built for one object: conditions merged, written with merge patches."""

    kube: Kube
    body: dict[str, Any]
    patch: dict[str, Any] = field(default_factory=dict)

    @property
    def generation(self) -> int | None:
        generation: int | None = self.body.get("metadata", {}).get("generation")
        return generation

    def previous(self) -> dict[str, Any]:
        status: dict[str, Any] = self.body.get("status") or {}
        return status

    def conditions(self, updates: Sequence[cond.Cond]) -> None:
        existing = self.patch.get("conditions", self.previous().get("conditions"))
        self.patch["conditions"] = cond.merge_conditions(existing, list(updates), self.generation)

    async def send(self, plural: str, *, observed: bool) -> bool:
        """Patch the status (observedGeneration too when ``observed``); False when the object is gone."""
        if observed:
            self.patch["observedGeneration"] = self.generation
        previous = self.previous()
        unchanged = all(
            _without_nulls(previous.get(key)) == _without_nulls(value) for key, value in self.patch.items()
        )
        if unchanged:
            # A drift check that found what the last one found writes nothing: a fleet's checks
            # would otherwise patch every status once per interval.
            return True
        meta = self.body["metadata"]
        try:
            await self.kube.patch_status(plural, meta["namespace"], meta["name"], self.patch)
        except KubeError as exc:
            if exc.not_found:
                return False  # deleted meanwhile: nothing to report on
            raise Retry(f"could not write status: {exc.reason or exc.status}", backoff(1)) from None
        return True


@dataclass
class _Status(StatusDraft):
    """An installation's status, told to the metrics once written."""

    on_status: StatusCallback | None = None

    async def write(self, *, observed: bool = True) -> None:
        if not await self.send(INSTALLATION_PLURAL, observed=observed) or self.on_status is None:
            return
        meta = self.body["metadata"]
        ready = next(
            (c["status"] for c in self.patch.get("conditions", []) if c["type"] == "Ready"), "Unknown"
        )
        drifted = len(self.patch.get("drift") or self.previous().get("drift") or [])
        self.on_status(meta["namespace"], meta["name"], ready, drifted)


StatusCallback = Callable[[str, str, str, int], None]


class InstallationReconciler:
    """Reconciles BundleInstallations against their platforms."""

    def __init__(
        self,
        kube: Kube,
        settings: OperatorSettings,
        platforms: PlatformPool,
        events: Events,
        on_status: StatusCallback | None = None,
    ) -> None:
        self.on_status = on_status
        self.kube = kube
        self.settings = settings
        self.platforms = platforms
        self.events = events

    # --- inputs ----------------------------------------------------------------------------------

    async def _bundle(self, namespace: str, spec: BundleInstallationSpec) -> ParsedBundle:
        name = spec.bundle_ref.name
        obj = await self.kube.read_custom(BUNDLE_PLURAL, namespace, name)
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
            resolved = await resolve(source, namespace, self.kube, self.settings.sources)
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
        return parsed

    async def _platform(self, namespace: str, spec: BundleInstallationSpec) -> tuple[str, PlatformAPI]:
        if spec.platform is not None:
            token = None
            if spec.platform.token_secret_ref is not None:
                token = await secret_value(
                    self.kube, namespace, spec.platform.token_secret_ref, "spec.platform.tokenSecretRef"
                )
            return spec.platform.url, self.platforms.get(spec.platform.url, token)
        url = self.settings.default_platform_url
        if not url:
            raise SetupProblem(
                "NoPlatform",
                "no platform: set spec.platform.url, or start the operator with --platform-url",
            )
        return url, self.platforms.get(url, self.settings.default_token())

    async def _first_claim(
        self, body: dict[str, Any], bundle_name: str, url: str, workspace: str, peers: Sequence[Peer]
    ) -> Peer | None:
        """The older installation of the same bundle into the same workspace and platform, if any."""
        meta = body["metadata"]
        mine = (meta.get("creationTimestamp", ""), meta["namespace"], meta["name"])
        rivals: list[Peer] = []
        for peer in peers:
            if peer.uid == meta.get("uid"):
                continue
            if platform_key(peer.platform_url or self.settings.default_platform_url) != platform_key(url):
                continue
            if peer.workspace != workspace or (peer.created, peer.namespace, peer.name) > mine:
                continue
            claim = peer.bundle or await self._claim(peer)
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

    async def _claim(self, peer: Peer) -> BundleClaim:
        other = await self.kube.read_custom(BUNDLE_PLURAL, peer.namespace, peer.bundle_ref)
        if other is None:
            return BundleClaim(exists=False)
        status = other.get("status") or {}
        name = status.get("bundleName")
        return BundleClaim(True, name if isinstance(name, str) else None, cond.is_true(status, "Stalled"))

    # --- reconcile -------------------------------------------------------------------------------

    async def reconcile(
        self,
        body: dict[str, Any],
        peers: Sequence[Peer] = (),
        *,
        attempt: int = 0,
        reads_since: float | None = None,
    ) -> ReconcileResult:
        """Bring the platform to the installation's bundle; returns the result for metrics.

        Lists of the workspace that started at ``reads_since`` (``time.monotonic()``) or later may be
        shared with other installations; by default those of the last ``EVENT_READ_AGE`` seconds.
        """
        since = time.monotonic() - EVENT_READ_AGE if reads_since is None else reads_since
        # Whose calls these are (the platform gate's CALLER) is set by the handler that runs this.
        policy = READ_POLICY.set(ReadPolicy(not_before=since))
        try:
            return await self._reconcile(body, peers, attempt)
        finally:
            READ_POLICY.reset(policy)

    async def _reconcile(self, body: dict[str, Any], peers: Sequence[Peer], attempt: int) -> ReconcileResult:
        status = _Status(self.kube, body, on_status=self.on_status)
        meta = body["metadata"]
        namespace = meta["namespace"]
        try:
            spec = BundleInstallationSpec.model_validate(body.get("spec") or {})
        except ValidationError as exc:
            status.conditions(cond.stalled("InvalidSpec", f"{cond.spec_error(exc)}; fix the resource"))
            await status.write()
            return "stalled"
        try:
            parsed = await self._bundle(namespace, spec)
            assert parsed.bundle is not None
            url, platform = await self._platform(namespace, spec)
            store = StateStore(self.kube, body)
            record = await store.load(spec.workspace)
            # An installation that already wrote keeps its claim, whoever is older.
            claimant = (
                None
                if record.entities
                else await self._first_claim(body, parsed.bundle.name, url, spec.workspace, peers)
            )
            if claimant is not None:
                raise SetupProblem(
                    "DuplicateInstallation",
                    f"bundle '{parsed.bundle.name}' is already installed into workspace '{spec.workspace}' "
                    f"of this platform by BundleInstallation {claimant.namespace}/{claimant.name}; "
                    "delete one of the two",
                )
            setup = await read_setup(spec, parsed.bundle, namespace, self.kube)
        except SetupProblem as exc:
            status.conditions(
                [*cond.stalled(exc.reason, exc.message), cond.false("Analyzed", exc.reason, exc.message)]
            )
            await status.write()
            return "stalled"
        except StateUnreadable as exc:
            status.conditions(cond.stalled("StateUnreadable", str(exc)))
            await status.write()
            return "stalled"
        except KubeError as exc:
            raise Retry(f"the Kubernetes API answered {exc.status} {exc.reason}", backoff(attempt)) from None
        options = Options(
            activate=spec.activate,
            substitutions=dict(spec.substitutions),
            on_conflict=_ON_CONFLICT[spec.update_policy.on_conflict],
        )
        try:
            return await self._converge(
                body, spec, status, parsed, setup, platform, store, record, options, attempt
            )
        except PlatformError as exc:
            return await self._platform_failure(body, status, exc, attempt)
        except StateConflict as exc:
            raise Retry(str(exc), backoff(0)) from None

    async def _converge(
        self,
        body: dict[str, Any],
        spec: BundleInstallationSpec,
        status: _Status,
        parsed: ParsedBundle,
        setup: dict[str, str],
        platform: PlatformAPI,
        store: StateStore,
        record: Record,
        options: Options,
        attempt: int,
    ) -> ReconcileResult:
        assert parsed.bundle is not None
        started = time.monotonic()
        planned = await plan(platform, spec.workspace, parsed, setup, record, options)
        calls = planned.snapshot.calls
        status.patch["preview"] = _preview(planned)
        if planned.preview.blocking:
            return await self._blocked(body, status, planned)
        status.patch["conflicts"] = []
        # An entity deleted on the platform is drift: Warn reports it, Correct (or the next change of
        # the bundle or its inputs) installs it again. Parts whose delete failed earlier are retried
        # by the next run that writes, not by a run of their own that would flap Ready.
        gone = {
            i.desired.entity
            for i in planned.items
            if i.action == "CREATE" and i.recorded is not None and not i.replaces
        }
        recreate = spec.drift_policy.mode == "Correct"
        writes_needed = bool(
            record.journal
            or record.unresolved
            or planned.removals
            or record.digest != parsed.digest
            or any(i.action != "REUSE" and (recreate or i.desired.entity not in gone) for i in planned.items)
        )
        hold = "Paused" if is_paused(body) else "Suspended" if spec.suspend else None
        if hold is not None:
            return await self._held(status, planned, record, hold, writes_needed)
        report: DriftReport
        corrected: dict[str, list[str]] = {}
        if (
            writes_needed
            and projected_size(record, [i.desired.spec for i in planned.items]) > MAX_RECORD_BYTES
        ):
            message = (
                f"what this bundle writes would not fit in the installation's state Secret (over "
                f"{MAX_RECORD_BYTES // 1024} KiB compressed); nothing was written. Split the bundle, or move "
                "large skills to a GitHub source"
            )
            status.conditions(cond.stalled("RecordTooLarge", message))
            await status.write()
            return "stalled"
        if writes_needed:
            status.conditions(
                [
                    *cond.progressing("Installing", "writing the bundle's entities to the platform"),
                    cond.true("Analyzed", "Analyzed", _analyzed_message(planned)),
                ]
            )
            await status.write(observed=False)  # the preview is in status before the first write
            try:
                result = await apply(
                    platform, spec.workspace, parsed, setup, record, store.persist, options, planned
                )
            except Blocked as exc:  # the platform changed between the two plans
                planned.preview = exc.preview
                status.patch["preview"] = _preview(planned)
                return await self._blocked(body, status, planned)
            except InstallFailed as exc:
                return await self._install_failed(body, status, exc, attempt)
            except PersistFailed as exc:
                # As after a crash: the next run resumes from the state Secret as it stands.
                delay = backoff(0 if isinstance(exc.cause, StateConflict) else attempt)
                raise Retry(f"could not write the installation's state: {exc}", delay) from None
            calls += result.calls
            await self._installed_event(body, result.created, result.updated, result.deleted, result.kept)
            if result.conflicts:
                status.patch["conflicts"] = [
                    {"entity": e, "path": p} for e, paths in sorted(result.conflicts.items()) for p in paths
                ]
            # Right after the run the platform's answers to its writes are the live state: listing
            # again would cost a list per kind per installation. A gateway's contents are read.
            snapshot = result.snapshot
            if snapshot is None or record.find("gateway:gateway") is not None:
                snapshot = await read_snapshot(platform, spec.workspace, record)
                calls += snapshot.calls
            report = drift_from(record, snapshot)
            actions = _actions(result.created, result.updated, result.kept)
        else:
            report = drift_from(record, planned.snapshot)
            actions = {}
            if report.changed and spec.drift_policy.mode == "Correct":
                # The plan just read is not blocking (that returned above) and holds the revisions.
                correction = await correct_drift(platform, spec.workspace, record, store.persist, planned)
                corrected = correction.corrected
                if corrected:
                    await self.events.post(
                        body,
                        "Normal",
                        "DriftCorrected",
                        "wrote back "
                        + "; ".join(f"{e} ({', '.join(p)})" for e, p in sorted(corrected.items())),
                    )
                for entity in corrected:
                    report.changed.pop(entity, None)
        if spec.drift_policy.mode == "Disabled":
            report = DriftReport()
        status.patch["entities"] = _entities(record, planned, actions, status.previous())
        status.patch["installedDigest"] = record.digest
        status.patch["installedVersion"] = record.bundle_version
        await self._drift_status(body, status, report, spec.drift_policy.mode)
        status.conditions(
            [
                *cond.ready(*_ready_reason(report, corrected, len(record.entities))),
                cond.true("Analyzed", "Analyzed", _analyzed_message(planned)),
                cond.true("Installed", "Installed", _installed_message(record)),
                cond.false("Conflict", "NoConflict", ""),
                (
                    cond.true("Activated", "Activated", "channels and automations run")
                    if spec.activate
                    else cond.false("Activated", "NotActivated", "set spec.activate to true to run them")
                ),
            ]
        )
        await status.write()
        meta = body["metadata"]
        log.info(
            "reconciled in %.2f s with %d platform calls",
            time.monotonic() - started,
            calls,
            extra=object_extra("BundleInstallation", meta["namespace"], meta["name"], meta.get("uid")),
        )
        return "success"

    async def _held(
        self, status: _Status, planned: Plan, record: Record, hold: str, writes_needed: bool
    ) -> ReconcileResult:
        report = drift_from(record, planned.snapshot) if record.entities else DriftReport()
        status.patch["drift"] = [{"entity": e, "paths": p} for e, p in sorted(report.changed.items())]
        what = (
            "the bundle-operator.dev/paused annotation is set" if hold == "Paused" else "spec.suspend is true"
        )
        if writes_needed:
            message = f"{what}: nothing is written; the preview shows what would change"
            status.conditions(
                [
                    cond.false("Ready", hold, message),
                    cond.false("Reconciling", hold, ""),
                    cond.false("Stalled", hold, ""),
                    cond.true("Analyzed", "Analyzed", _analyzed_message(planned)),
                ]
            )
        else:
            status.conditions(
                [
                    *cond.ready(hold, f"up to date; {what}, so nothing would be written"),
                    cond.true("Analyzed", "Analyzed", _analyzed_message(planned)),
                ]
            )
        await status.write()
        return "success"

    async def _blocked(self, body: dict[str, Any], status: _Status, planned: Plan) -> ReconcileResult:
        blocking = [i for i in planned.preview.issues if i.blocking]
        conflicts = [i for i in blocking if i.code == Code.UPDATE_CONFLICT and i.path]
        if conflicts:
            status.patch["conflicts"] = [{"entity": i.entity, "path": i.path} for i in conflicts]
            where = ", ".join(f"{i.entity} {i.path}" for i in conflicts[:5])
            message = (
                f"the bundle and a platform-side edit changed the same field ({where}); nothing was written. "
                "Set spec.updatePolicy.onConflict to KeepMine or TakeTheirs, or undo one of the edits"
            )
            previous = cond.condition_of(status.previous(), "Conflict")
            if previous is None or previous.get("status") != "True":
                await self.events.post(body, "Warning", "Conflict", message)
            status.conditions(
                [
                    *cond.stalled("Conflict", message),
                    cond.true("Conflict", "UpdateConflict", message),
                    cond.true("Analyzed", "Blocked", _analyzed_message(planned)),
                ]
            )
        else:
            codes = sorted({str(i.code) for i in blocking})
            message = f"analyze found blocking issues ({', '.join(codes)}): {blocking[0].message}"
            if len(blocking) > 1:
                message += f" (and {len(blocking) - 1} more in status.preview.issues)"
            status.conditions(
                [
                    *cond.stalled("Blocked", message),
                    cond.true("Analyzed", "Blocked", _analyzed_message(planned)),
                ]
            )
        await status.write()
        return "blocked"

    async def _install_failed(
        self, body: dict[str, Any], status: _Status, exc: InstallFailed, attempt: int
    ) -> ReconcileResult:
        cause = exc.cause
        detail = str(cause) if isinstance(cause, PlatformError) else type(cause).__name__
        where = f" at {exc.entity}" if getattr(exc, "entity", None) else ""
        fields = getattr(exc, "fields", None)
        if fields:
            where += f" ({', '.join(fields)})"
        left = f"; could not delete {', '.join(exc.rollback_failures)}" if exc.rollback_failures else ""
        message = f"the install failed{where} and was rolled back: {detail}{left}"
        await self.events.post(body, "Warning", "RolledBack", message)
        permanent = (
            isinstance(cause, RecordTooLarge)
            or exc.code == BUNDLE_INVALID
            or (isinstance(cause, PlatformError) and not _temporary(cause))
        )
        if permanent:
            status.conditions(
                [*cond.stalled("InstallFailed", message + "; fix the cause and edit the resource")]
            )
            await status.write()
            return "stalled"
        status.conditions(cond.progressing("InstallFailed", message + "; retrying"))
        await status.write(observed=False)
        retry_after = cause.retry_after if isinstance(cause, Unavailable) else None
        raise Retry(message, backoff(attempt, retry_after=retry_after))

    async def _platform_failure(
        self, body: dict[str, Any], status: _Status, exc: PlatformError, attempt: int
    ) -> ReconcileResult:
        if _temporary(exc):
            status.conditions(
                cond.progressing("PlatformUnavailable", f"the platform answered {exc}; retrying")
            )
            await status.write(observed=False)
            retry_after = exc.retry_after if isinstance(exc, Unavailable) else None
            raise Retry(str(exc), backoff(attempt, retry_after=retry_after))
        status.conditions(cond.stalled("PlatformRefused", f"the platform refused a call: {exc}"))
        await status.write()
        return "stalled"

    async def _installed_event(
        self,
        body: dict[str, Any],
        created: list[str],
        updated: list[str],
        deleted: list[str],
        kept: list[str],
    ) -> None:
        parts = []
        for word, items in (("created", created), ("updated", updated), ("deleted", deleted), ("kept", kept)):
            if items:
                parts.append(f"{word} {', '.join(items)}")
        if not parts:
            return
        reason = "Installed" if created and not updated and not deleted else "Updated"
        await self.events.post(body, "Normal", reason, "; ".join(parts))

    async def _drift_status(
        self, body: dict[str, Any], status: _Status, report: DriftReport, mode: str
    ) -> None:
        drift = [{"entity": e, "paths": p} for e, p in sorted(report.changed.items())]
        drift += [{"entity": e, "paths": [""]} for e in sorted(report.missing)]
        status.patch["drift"] = drift
        if mode == "Disabled":
            status.conditions(
                [cond.false("Drifted", "DriftCheckDisabled", "spec.driftPolicy.mode is Disabled")]
            )
            return
        if not drift:
            status.conditions([cond.false("Drifted", "NoDrift", "the platform matches what was installed")])
            return
        summary = "; ".join(f"{d['entity']} ({', '.join(d['paths'][:3]) or 'deleted'})" for d in drift[:5])
        message = (
            f"{len(drift)} entities differ from what was installed: {summary}; status.drift lists every path"
        )
        if mode == "Warn":
            message += ". Undo the edit, or set spec.driftPolicy.mode to Correct to write it back"
        if (status.previous().get("drift") or []) != drift:
            await self.events.post(body, "Warning", "DriftDetected", message)
        status.conditions([cond.true("Drifted", "DriftDetected", message)])

    # --- delete ----------------------------------------------------------------------------------

    async def finalize(self, body: dict[str, Any], *, attempt: int = 0) -> None:
        """Uninstall (Delete) or leave the platform alone (Orphan); Retry keeps the finalizer."""
        # No read policy: an uninstall lists the platform as it is now.
        try:
            await self._finalize(body, attempt)
        except KubeError as exc:
            raise Retry(f"the Kubernetes API answered {exc.status} {exc.reason}", backoff(attempt)) from None
        self.platforms.forget(body.get("metadata", {}).get("uid") or "")

    async def _finalize(self, body: dict[str, Any], attempt: int) -> None:
        namespace = body["metadata"]["namespace"]
        store = StateStore(self.kube, body)
        try:
            spec = BundleInstallationSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            await store.release()  # never installed anything a valid spec would have
            return
        if spec.deletion_policy == "Orphan":
            await self.events.post(body, "Normal", "Orphaned", "the platform's entities are left in place")
            await store.release()
            return
        try:
            record = await store.load(spec.workspace)
        except StateUnreadable as exc:
            await self.events.post(body, "Warning", "UninstallSkipped", str(exc))
            await store.release()
            return
        if not record.entities and not record.journal and not record.leftovers and not record.unresolved:
            await store.release()
            return
        try:
            _, platform = await self._platform(namespace, spec)
            result = await uninstall(platform, spec.workspace, record, store.persist)
        except SetupProblem as exc:
            await self.events.post(body, "Warning", "UninstallBlocked", exc.message)
            raise Retry(exc.message, backoff(attempt, cap=120)) from None
        except UninstallRefused as exc:
            # Nothing was deleted; the finalizer stays until the foreign users let go (or the
            # user switches deletionPolicy to Orphan), and each retry says who holds what.
            await self.events.post(body, "Warning", "UninstallBlocked", str(exc))
            raise Retry(str(exc), backoff(attempt, cap=300)) from None
        except PlatformError as exc:
            await self.events.post(
                body, "Warning", "UninstallFailed", f"the platform answered {exc}; retrying"
            )
            raise Retry(str(exc), backoff(attempt, retry_after=getattr(exc, "retry_after", None))) from None
        except StateConflict as exc:
            raise Retry(str(exc), backoff(0)) from None
        message = f"deleted {len(result.deleted)} entities"
        if result.kept:
            message += "; kept (edited on the platform): " + ", ".join(
                f"{e} ({', '.join(p[:3])})" for e, p in result.kept.items()
            )
        await self.events.post(body, "Normal", "Uninstalled", message)
        if not result.complete:
            failed = ", ".join(result.failed)
            await self.events.post(body, "Warning", "UninstallFailed", f"could not delete {failed}; retrying")
            raise Retry(f"could not delete {failed}", backoff(attempt))
        await store.release()


def _without_nulls(value: Any) -> Any:
    """``value`` without null fields, as the API server stores it (a structural schema drops them)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _installed_message(record: Record) -> str:
    message = f"{len(record.entities)} entities installed"
    stuck = len(record.leftovers) + len(record.unresolved)
    if stuck:
        message += (
            f"; {stuck} platform entities this installation no longer uses could not be deleted yet; "
            "the next run that writes tries again, and uninstall does too"
        )
    return message


def _temporary(exc: PlatformError) -> bool:
    # 412: someone edited meanwhile, and the next run plans from the new state. 404: an entity the
    # plan saw in a (shared) list was deleted since; the failed write makes the next run list
    # afresh, and it creates the entity again. Any other 409 (a name taken, an entity in use)
    # stays until somebody changes something.
    return isinstance(exc, Unavailable | PreconditionFailed | NotFound) or (
        exc.status is not None and exc.status >= 500
    )


def _preview(planned: Plan) -> dict[str, Any]:
    preview = planned.preview
    return {
        "entities": [
            {
                "kind": e.kind,
                "key": e.key,
                "action": _PREVIEW_ACTION[e.action],
                "reason": e.reason,
                **({"id": e.id} if e.id else {}),
            }
            for e in preview.entities
        ],
        "issues": status_issues(preview.issues),
        "blocking": preview.blocking,
    }


def _analyzed_message(planned: Plan) -> str:
    counts: dict[str, int] = {}
    for e in planned.preview.entities:
        counts[e.action] = counts.get(e.action, 0) + 1
    summary = ", ".join(f"{n} {a.lower()}" for a, n in sorted(counts.items()))
    blocking = sum(1 for i in planned.preview.issues if i.blocking)
    warnings = len(planned.preview.issues) - blocking
    return f"{summary or 'no entities'}; {blocking} blocking issues, {warnings} warnings"


def _actions(created: list[str], updated: list[str], kept: list[str]) -> dict[str, str]:
    out = {e: "Created" for e in created}
    out.update({e: "Updated" for e in updated})
    out.update({e: "Kept" for e in kept})
    return out


def _entities(
    record: Record, planned: Plan, actions: dict[str, str], previous: dict[str, Any]
) -> list[dict[str, Any]]:
    """What is installed, with ids; an entity keeps the action of the run that last wrote it."""
    before = {
        f"{e.get('kind')}:{e.get('key')}": e for e in previous.get("entities") or [] if isinstance(e, dict)
    }
    rows: list[dict[str, Any]] = []
    for recorded in record.entities:
        entity = recorded.entity
        action = actions.get(entity)
        if action is None:
            old = before.get(entity)
            action = old["action"] if old and old.get("id") == recorded.primary_id else "Reused"
        rows.append({"kind": recorded.kind, "key": recorded.key, "id": recorded.primary_id, "action": action})
    for entity_plan in planned.preview.entities:
        if entity_plan.action == "SKIPPED":
            rows.append({"kind": entity_plan.kind, "key": entity_plan.key, "id": None, "action": "Skipped"})
    return rows


def _ready_reason(report: DriftReport, corrected: dict[str, list[str]], count: int) -> tuple[str, str]:
    if report.drifted:
        return "InstalledWithDrift", f"{count} entities installed; the platform drifted (see Drifted)"
    if corrected:
        return "DriftCorrected", f"{count} entities installed; drift in {len(corrected)} was written back"
    return "Installed", f"{count} entities installed and matching the bundle"


def inputs_marker(kind: str, name: str, version: str) -> str:
    """The value of the inputs-changed annotation: changes only when the input does."""
    return f"{kind}/{name}@" + hashlib.sha256(version.encode()).hexdigest()[:16]
