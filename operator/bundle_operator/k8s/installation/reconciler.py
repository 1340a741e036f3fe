"""The level-based reconcile of a BundleInstallation, as named steps:

    read_spec -> resolve -> analyze -> hold -> fits -> gate -> apply | observe -> report

Each step takes what the steps before it produced and returns what the next needs, or ``Done``
when the run ends there with its status written (stalled, blocked, held, awaiting approval). A new
check between plan and apply is one more step in ``_run``. Create, update, resume, the drift clock,
a changed Secret or Bundle and the reconcile annotation all come here. No kopf types: handlers
call it and map ``Retry``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from bundle_operator.document.issues import Code
from bundle_operator.engine.apply import BUNDLE_INVALID, InstallFailed, PersistFailed, apply
from bundle_operator.engine.correct import correct_drift
from bundle_operator.engine.drift import DriftReport, drift_from, troubles
from bundle_operator.engine.live import read_snapshot
from bundle_operator.engine.plan import Plan, plan
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s import spans
from bundle_operator.k8s.event_reasons import (
    CONFLICT,
    DRIFT_CORRECTED,
    DRIFT_DETECTED,
    POLICIES_DISAGREE,
    ROLLED_BACK,
)
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.installation.gate import gate, spec_changed
from bundle_operator.k8s.installation.inputs import (
    Inputs,
    Peer,
    first_claim,
    read_bundle,
)
from bundle_operator.k8s.installation.setup import SetupProblem, read_setup
from bundle_operator.k8s.installation.state import (
    MAX_RECORD_BYTES,
    RecordTooLarge,
    StateConflict,
    StateStore,
    StateUnreadable,
    projected_size,
)
from bundle_operator.k8s.installation.status import (
    InstallationStatus,
    StatusCallback,
    actions_of,
    analyzed_message,
    drift_rows,
    entity_rows,
    installed_event,
    installed_message,
    not_running_message,
    plan_status,
    policy_warning,
    preview_status,
    ready_reason,
)
from bundle_operator.k8s.installation.uninstall import Uninstaller
from bundle_operator.k8s.installation.watch_cache import WatchCaches
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.reconcile import (
    Done,
    OperatorSettings,
    Retry,
    backoff,
    connect,
    is_paused,
    kube_retry,
    retry_after,
    temporary,
)
from bundle_operator.k8s.resources import BundleInstallationSpec
from bundle_operator.platform.errors import PlatformError
from bundle_operator.platform.sharing import READ_POLICY, ReadPolicy
from bundle_operator.telemetry import tracing

log = logging.getLogger(__name__)
T = TypeVar("T")
# The other installations of the same workspace, or how to find them: only a first install asks.
Peers = Sequence[Peer] | Callable[[], Sequence[Peer]]

# A reconcile started by an event may use a list of its workspace that another installation
# started at most this long ago (the shortest drift interval is 5 s, so never older than one).
EVENT_READ_AGE = 5.0
# A run still writing after this many seconds shows Installing in status (quicker ones write once).
INSTALLING_SHOWN_AFTER = 5.0


@dataclass
class Run:
    """One reconcile of one installation: the object as read, its status draft, the attempt."""

    body: dict[str, Any]
    status: InstallationStatus
    attempt: int
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    approved: str | None = None  # the approved plan this run carries out, under approval Manual

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])


@dataclass
class Converged:
    """What a run that got through found: the drift left, what it did and what it wrote back."""

    report: DriftReport
    actions: dict[str, str] = field(default_factory=dict)
    corrected: dict[str, list[str]] = field(default_factory=dict)


class InstallationReconciler:
    """Reconciles BundleInstallations against their platforms."""

    def __init__(
        self,
        kube: Kube,
        settings: OperatorSettings,
        platforms: PlatformPool,
        events: Events,
        on_status: StatusCallback | None = None,
        caches: WatchCaches | None = None,
    ) -> None:
        self.on_status = on_status
        self.kube = kube
        # What the watches delivered (watch_cache.py); without kopf, every read is the API server's.
        self.caches = caches if caches is not None else WatchCaches(kube)
        self.settings = settings
        self.platforms = platforms
        self.events = events

    async def reconcile(
        self,
        body: dict[str, Any],
        peers: Peers = (),
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
            run = Run(body, InstallationStatus(self.kube, body, on_status=self.on_status), attempt)
            return (await self._run(run, peers)).result
        finally:
            READ_POLICY.reset(policy)

    async def _run(self, run: Run, peers: Peers) -> Done:
        """The steps in order; each may end the run. Each is a span under the reconcile's."""
        spans.installation(run.body)
        spec = self._read_spec(run)
        if isinstance(spec, Done):
            return await self._written(run, spec)
        with tracing.span("resolve"):
            inputs = await self._resolve(run, spec, peers)
        if isinstance(inputs, Done):
            return inputs
        if (bundle := inputs.parsed.bundle) is not None:
            tracing.set_attributes({spans.BUNDLE_NAME: bundle.name, spans.BUNDLE_VERSION: bundle.version})
        try:
            with tracing.span("analyze"):
                planned = await self._analyze(run, inputs)
            if isinstance(planned, Done):
                return planned
            # An entity deleted on the platform is drift: Warn reports it, Correct (or the next change
            # of the bundle or its inputs) installs it again. Parts whose delete failed earlier are
            # retried by the next run that writes, not by a run of their own that would flap Ready.
            correct = inputs.spec.drift_policy.mode == "Correct"
            writes = planned.writes(recreate_deleted=correct, retry_leftovers=False)
            with tracing.span("hold"):
                held = await self._hold(run, inputs, planned, writes)
            if held is not None:
                return held
            if writes:
                with tracing.span("fits"):
                    too_large = await self._fits(run, inputs, planned)
                if too_large is not None:
                    return too_large
            with tracing.span("gate"):
                waiting = await self._gate(run, inputs, planned, writes)
            if waiting is not None:
                return waiting
            with tracing.span("apply" if writes else "observe"):
                converged = await (
                    self._apply(run, inputs, planned) if writes else self._observe(run, inputs, planned)
                )
            if isinstance(converged, Done):
                return converged
            with tracing.span("report"):
                return await self._report(run, inputs, planned, converged)
        except PlatformError as exc:
            return await self._platform_failure(run, exc)
        except StateConflict as exc:
            raise Retry(str(exc), backoff(0)) from None

    async def _written(self, run: Run, done: Done) -> Done:
        await run.status.write()
        return done

    # --- the steps -------------------------------------------------------------------------------

    def _read_spec(self, run: Run) -> BundleInstallationSpec | Done:
        """The spec, validated; a spec the API server let through but the models refuse stalls."""
        try:
            return BundleInstallationSpec.model_validate(run.body.get("spec") or {})
        except ValidationError as exc:
            run.status.conditions(cond.stalled("InvalidSpec", f"{cond.spec_error(exc)}; fix the resource"))
            return Done("stalled")

    async def _resolve(self, run: Run, spec: BundleInstallationSpec, peers: Peers) -> Inputs | Done:
        """The Bundle, the platform, the state and the setup values; stalled on what a user must fix."""
        try:
            caches = self.caches
            resolved = await read_bundle(self.kube, self.settings, run.namespace, spec, caches.bundles)
            parsed = resolved.parsed
            assert parsed.bundle is not None
            url, platform = await connect(caches.secrets, self.settings, self.platforms, run.namespace, spec)
            store = StateStore(self.kube, run.body, caches.states)
            record = await store.load(spec.workspace)
            # An installation that already wrote keeps its claim, whoever is older.
            claimant = (
                None
                if record.entities
                else await first_claim(
                    self.kube,
                    self.settings,
                    run.body,
                    parsed.bundle.name,
                    url,
                    spec.workspace,
                    peers() if callable(peers) else peers,
                )
            )
            if claimant is not None:
                raise SetupProblem(
                    "DuplicateInstallation",
                    f"bundle '{parsed.bundle.name}' is already installed into workspace '{spec.workspace}' "
                    f"of this platform by BundleInstallation {claimant.namespace}/{claimant.name}; "
                    "delete one of the two",
                )
            setup = await read_setup(spec, parsed.bundle, run.namespace, caches.secrets)
        except SetupProblem as exc:
            run.status.conditions(
                [*cond.stalled(exc.reason, exc.message), cond.false("Analyzed", exc.reason, exc.message)]
            )
            return await self._written(run, Done("stalled"))
        except StateUnreadable as exc:
            run.status.conditions(cond.stalled("StateUnreadable", str(exc)))
            return await self._written(run, Done("stalled"))
        except KubeError as exc:
            raise kube_retry(exc, run.attempt) from None
        return Inputs(spec, parsed, platform, store, record, setup, resolved.archives)

    async def _analyze(self, run: Run, inputs: Inputs) -> Plan | Done:
        """Plan against the platform as it is; blocked (nothing written) when analyze says so."""
        planned = await plan(
            inputs.platform, inputs.workspace, inputs.parsed, inputs.setup, inputs.record, inputs.options
        )
        run.calls += planned.snapshot.calls
        run.status.patch["preview"] = preview_status(planned)
        if planned.preview.blocking:
            return await self._blocked(run, planned)
        run.status.patch["conflicts"] = []
        return planned

    async def _hold(self, run: Run, inputs: Inputs, planned: Plan, writes: bool) -> Done | None:
        """Paused or suspended: report the preview and the drift, and write nothing."""
        spec = inputs.spec
        hold = "Paused" if is_paused(run.body) else "Suspended" if spec.suspend else None
        if hold is None:
            return None
        record = inputs.record
        report = drift_from(record, planned.snapshot) if record.entities else DriftReport()
        run.status.patch["drift"] = [{"entity": e, "paths": p} for e, p in sorted(report.changed.items())]
        what = (
            "the bundle-operator.dev/paused annotation is set" if hold == "Paused" else "spec.suspend is true"
        )
        analyzed = cond.true("Analyzed", "Analyzed", analyzed_message(planned))
        if writes:
            message = f"{what}: nothing is written; the preview shows what would change"
            run.status.conditions(
                [
                    cond.false("Ready", hold, message),
                    cond.false("Reconciling", hold, ""),
                    cond.false("Stalled", hold, ""),
                    analyzed,
                ]
            )
        else:
            run.status.conditions(
                [*cond.ready(hold, f"up to date; {what}, so nothing would be written"), analyzed]
            )
        return await self._written(run, Done("success"))

    async def _fits(self, run: Run, inputs: Inputs, planned: Plan) -> Done | None:
        """Stalled before any write when the record would outgrow the state Secret."""
        if projected_size(inputs.record, [i.desired.spec for i in planned.items]) <= MAX_RECORD_BYTES:
            return None
        message = (
            f"what this bundle writes would not fit in the installation's state Secret (over "
            f"{MAX_RECORD_BYTES // 1024} KiB compressed); nothing was written. Split the bundle, or move "
            "large skills to a GitHub source"
        )
        run.status.conditions(cond.stalled("RecordTooLarge", message))
        return await self._written(run, Done("stalled"))

    async def _gate(self, run: Run, inputs: Inputs, planned: Plan, writes: bool) -> Done | None:
        """Under approval Manual, go on only with the plan spec.approvedPlan names (gate.py)."""
        outcome = await gate(run.status, run.body, self.events, inputs, planned, writes)
        if outcome.waiting:
            return await self._written(run, Done("success"))
        run.approved = outcome.approved
        return None

    async def _apply(self, run: Run, inputs: Inputs, planned: Plan) -> Converged | Done:
        """Install or update by compensation, then read what the platform now holds."""
        status, record = run.status, inputs.record
        status.conditions(
            [
                *cond.progressing("Installing", "writing the bundle's entities to the platform"),
                cond.true("Analyzed", "Analyzed", analyzed_message(planned)),
            ]
        )
        try:
            persist = inputs.store.persist
            result = await self._shown_when_slow(run, apply(inputs.platform, planned, record, persist))
        except InstallFailed as exc:
            return await self._install_failed(run, exc)
        except PersistFailed as exc:
            # As after a crash: the next run resumes from the state Secret as it stands.
            delay = backoff(0 if isinstance(exc.cause, StateConflict) else run.attempt)
            raise Retry(f"could not write the installation's state: {exc}", delay) from None
        run.calls += result.calls
        event = installed_event(result.created, result.updated, result.deleted, result.kept)
        if event is not None:
            await self.events.post(run.body, *event)
        if result.conflicts:
            status.patch["conflicts"] = [
                {"entity": e, "path": p} for e, paths in sorted(result.conflicts.items()) for p in paths
            ]
        # Right after the run the platform's answers to its writes are the live state: listing
        # again would cost a list per kind per installation. A gateway's contents are read.
        snapshot = result.snapshot
        if snapshot is None:
            snapshot = await read_snapshot(inputs.platform, inputs.workspace, record)
            run.calls += snapshot.calls
        return Converged(
            drift_from(record, snapshot), actions_of(result.created, result.updated, result.kept)
        )

    async def _shown_when_slow(self, run: Run, work: Awaitable[T]) -> T:
        """Await ``work``; while it is still writing after ``INSTALLING_SHOWN_AFTER`` seconds, status
        shows Installing and the preview. A quick run writes its status once, when it is done: a
        fleet applied at once would otherwise write every status twice."""
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task}, timeout=INSTALLING_SHOWN_AFTER)
            if not done:
                try:
                    await run.status.write(observed=False)
                except Retry as exc:  # the writes go on: the final status says how they ended
                    meta = run.body["metadata"]
                    log.info(
                        "could not show Installing in status: %s",
                        exc,
                        extra=object_extra("BundleInstallation", meta["namespace"], meta["name"]),
                    )
            return await task
        finally:
            if not task.done():  # this run was cancelled (the operator stops): so are its writes
                task.cancel()

    async def _observe(self, run: Run, inputs: Inputs, planned: Plan) -> Converged:
        """Nothing to write: compare with the plan's reads, and write drift back under Correct."""
        report = drift_from(inputs.record, planned.snapshot)
        if not report.changed or inputs.spec.drift_policy.mode != "Correct":
            return Converged(report)
        # The plan just read is not blocking (that ended the run) and holds the revisions.
        correction = await correct_drift(inputs.platform, inputs.record, inputs.store.persist, planned)
        corrected = correction.corrected
        if corrected:
            await self.events.post(
                run.body,
                DRIFT_CORRECTED,
                "wrote back " + "; ".join(f"{e} ({', '.join(p)})" for e, p in sorted(corrected.items())),
            )
        for entity in corrected:
            report.changed.pop(entity, None)
        return Converged(report, corrected=corrected)

    async def _report(self, run: Run, inputs: Inputs, planned: Plan, converged: Converged) -> Done:
        """Status of a run that got through: entities, drift and the conditions."""
        spec, record, status = inputs.spec, inputs.record, run.status
        report = DriftReport() if spec.drift_policy.mode == "Disabled" else converged.report
        status.patch["entities"] = entity_rows(record, planned, converged.actions, status.previous())
        status.patch["installedDigest"] = record.digest
        status.patch["installedVersion"] = record.bundle_version
        if spec.approval == "Manual":
            last_applied = run.approved or (status.previous().get("plan") or {}).get("lastAppliedId")
            status.patch["plan"] = plan_status(None, last_applied)
        await self._drift_status(run, report, spec.drift_policy.mode)
        if spec_changed(status) and (warning := policy_warning(spec)) is not None:
            await self.events.post(run.body, POLICIES_DISAGREE, warning)
        troubled = troubles(record, planned.snapshot)
        ready = (
            cond.not_running(
                "McpNotRunning",
                not_running_message(troubled),
                stalled=any(not why.startswith("crashed") for why in troubled.values()),
            )
            if troubled
            else cond.ready(*ready_reason(report, converged.corrected, len(record.entities)))
        )
        status.conditions(
            [
                *ready,
                cond.true("Analyzed", "Analyzed", analyzed_message(planned)),
                cond.true("Installed", "Installed", installed_message(record)),
                cond.false("Conflict", "NoConflict", ""),
                (
                    cond.true("Activated", "Activated", "channels and automations run")
                    if spec.activate
                    else cond.false("Activated", "NotActivated", "set spec.activate to true to run them")
                ),
            ]
        )
        await status.write()
        meta = run.body["metadata"]
        log.info(
            "reconciled in %.2f s with %d platform calls",
            time.monotonic() - run.started,
            run.calls,
            extra=object_extra("BundleInstallation", meta["namespace"], meta["name"], meta.get("uid")),
        )
        return Done("success")

    # --- how a run ends otherwise ----------------------------------------------------------------

    async def _blocked(self, run: Run, planned: Plan) -> Done:
        status = run.status
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
                await self.events.post(run.body, CONFLICT, message)
            status.conditions(
                [
                    *cond.stalled("Conflict", message),
                    cond.true("Conflict", "UpdateConflict", message),
                    cond.true("Analyzed", "Blocked", analyzed_message(planned)),
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
                    cond.true("Analyzed", "Blocked", analyzed_message(planned)),
                ]
            )
        return await self._written(run, Done("blocked"))

    async def _install_failed(self, run: Run, exc: InstallFailed) -> Done:
        cause = exc.cause
        detail = str(cause) if isinstance(cause, PlatformError) else type(cause).__name__
        where = f" at {exc.entity}" if getattr(exc, "entity", None) else ""
        fields = getattr(exc, "fields", None)
        if fields:
            where += f" ({', '.join(fields)})"
        left = f"; could not delete {', '.join(exc.rollback_failures)}" if exc.rollback_failures else ""
        message = f"the install failed{where} and was rolled back: {detail}{left}"
        await self.events.post(run.body, ROLLED_BACK, message)
        permanent = (
            isinstance(cause, RecordTooLarge)
            or exc.code == BUNDLE_INVALID
            or (isinstance(cause, PlatformError) and not temporary(cause))
        )
        if permanent:
            run.status.conditions(
                [*cond.stalled("InstallFailed", message + "; fix the cause and edit the resource")]
            )
            return await self._written(run, Done("stalled"))
        run.status.conditions(cond.progressing("InstallFailed", message + "; retrying"))
        await run.status.write(observed=False)
        wait = retry_after(cause) if isinstance(cause, PlatformError) else None
        raise Retry(message, backoff(run.attempt, retry_after=wait))

    async def _platform_failure(self, run: Run, exc: PlatformError) -> Done:
        if temporary(exc):
            run.status.conditions(
                cond.progressing("PlatformUnavailable", f"the platform answered {exc}; retrying")
            )
            await run.status.write(observed=False)
            raise Retry(str(exc), backoff(run.attempt, retry_after=retry_after(exc)))
        run.status.conditions(cond.stalled("PlatformRefused", f"the platform refused a call: {exc}"))
        return await self._written(run, Done("stalled"))

    async def _drift_status(self, run: Run, report: DriftReport, mode: str) -> None:
        status = run.status
        drift = drift_rows(report)
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
            await self.events.post(run.body, DRIFT_DETECTED, message)
        status.conditions([cond.true("Drifted", "DriftDetected", message)])

    async def finalize(self, body: dict[str, Any], *, attempt: int = 0) -> None:
        """Uninstall (Delete) or leave the platform alone (Orphan); Retry keeps the finalizer."""
        kept = (self.kube, self.settings, self.platforms, self.events, self.caches, self.on_status)
        await Uninstaller(*kept).finalize(body, attempt=attempt)
