"""kopf registrations only: each handler is a few lines that call a reconciler.

Everything registers on ``REGISTRY`` (not kopf's global one), so importing this module has no
effect until ``run.py`` starts an operator with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import kopf

from bundle_operator.k8s.bundle import BundleReconciler
from bundle_operator.k8s.conditions import is_true
from bundle_operator.k8s.drift_clock import DriftClock, drift_slot, parse_interval, stalled_and_seen
from bundle_operator.k8s.endpoint import EndpointReconciler
from bundle_operator.k8s.endpoint_target import installation_marker
from bundle_operator.k8s.health import Liveness
from bundle_operator.k8s.installation import InstallationReconciler
from bundle_operator.k8s.installation_inputs import ANNOTATION_INPUTS, BundleClaim, Peer, inputs_marker
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.metrics import (
    METRICS,
    RECONCILE_KINDS,
    InstallationGauges,
    ReconcileResult,
)
from bundle_operator.k8s.reconcile import Retry, backoff, platform_key
from bundle_operator.k8s.resources import (
    API_VERSION,
    BUNDLE_PLURAL,
    ENDPOINT_PLURAL,
    GROUP,
    INSTALLATION_PLURAL,
    VERSION,
)
from bundle_operator.k8s.secret_holds import SecretHolds, uninstall_secret
from bundle_operator.k8s.setup import referenced_secrets
from bundle_operator.k8s.state import LABEL_INSTALLATION
from bundle_operator.k8s.watch_cache import bundle_view, state_view
from bundle_operator.k8s.watch_lag import Deliveries
from bundle_operator.platform.gate import CALLER

log = logging.getLogger(__name__)

REGISTRY = kopf.OperatorRegistry()
STORAGE_PREFIX = f"kopf.{GROUP}"
FINALIZER = f"{GROUP}/finalizer"
DRIFT_IDLE_SECONDS = 10.0
# How often an Endpoint's served tools and members' health are read again.
ENDPOINT_REFRESH_SECONDS = 30.0
GAUGES = InstallationGauges(METRICS)
# Reconciles of one kind at once: enough to keep a slow platform busy, few enough that the API
# server sees a bounded number of status writes and Secret writes in flight.
DEFAULT_WORKERS = 64
QUEUE_IDLE_SECONDS = 0.5


@dataclass
class Runtime:
    """What the handlers share; set by ``run.py`` before the operator starts."""

    kube: Kube
    installations: InstallationReconciler
    bundles: BundleReconciler
    liveness: Liveness
    default_platform_url: str | None
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    last_run: dict[str, float] = field(default_factory=dict)
    # When an object's last run failed for a passing reason (monotonic), to wake it on recovery.
    failed_at: dict[str, float] = field(default_factory=dict)
    endpoints: EndpointReconciler | None = None
    workers: int = DEFAULT_WORKERS
    holds: SecretHolds | None = None
    drift: DriftClock | None = None
    kind_slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    drift_task: asyncio.Task[None] | None = None

    def secret_holds(self) -> SecretHolds:
        """The in-use finalizers this process put on Secrets (secret_holds.py)."""
        if self.holds is None:
            self.holds = SecretHolds(self.kube)
        return self.holds

    def attach_caches(self, indexes: dict[str, Any]) -> None:
        """Hand kopf's live indexes to the watch caches (any handler of an installation has them)."""
        caches = self.installations.caches
        if caches.states.index is None:
            caches.attach(indexes["bundle_objects"], indexes["state_secrets"])

    def drift_clock(self) -> DriftClock:
        """The one scheduler of every installation's drift checks (drift_clock.py)."""
        if self.drift is None:
            self.drift = DriftClock(
                _drift_check,
                platform_url=self.platform_url_of,
                gate_for=self.installations.platforms.gate_for,
                last_run=self.last_run,
                failed_at=self.failed_at,
                touch=self.liveness.touch,
            )
        return self.drift

    def platform_url_of(self, spec: Mapping[str, Any]) -> str:
        """The platform an installation spec names, or the operator's default."""
        return str((spec.get("platform") or {}).get("url") or self.default_platform_url or "")

    def start_drift_clock(self) -> None:
        """Run the drift checks while kopf runs (a standby checks nothing)."""
        if self.drift_task is None or self.drift_task.done():
            self.drift_task = asyncio.create_task(self.drift_clock().run(), name="drift-clock")

    async def stop_drift_clock(self) -> None:
        """kopf stops: so do the checks, and what its watches delivered is forgotten."""
        task, self.drift_task = self.drift_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.drift_clock().forget_all()

    def slots(self, kind: str) -> asyncio.Semaphore:
        """Reconciles of one kind at once (--workers): bounds the writes in flight to the API server."""
        return self.kind_slots.setdefault(kind, asyncio.Semaphore(self.workers))

    def forget(self, uid: str) -> None:
        """The object is gone: what was kept per object goes too (its lock unless a run holds it)."""
        self.last_run.pop(uid, None)
        self.failed_at.pop(uid, None)
        lock = self.locks.get(uid)
        if lock is not None and not lock.locked():
            del self.locks[uid]

    def lock(self, uid: str) -> asyncio.Lock:
        """One lock per object: the drift timer never runs beside a reconcile of the same object."""
        return self.locks.setdefault(uid, asyncio.Lock())

    def endpoint_reconciler(self) -> EndpointReconciler:
        """The Endpoints' reconciler, sharing the installations' settings, platform clients and events."""
        if self.endpoints is None:
            inst = self.installations
            self.endpoints = EndpointReconciler(self.kube, inst.settings, inst.platforms, inst.events)
        return self.endpoints


RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    """The shared runtime (set before the operator starts)."""
    assert RUNTIME is not None, "the operator runtime is not set up"
    return RUNTIME


class SpecDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base, with the inline bundle document replaced by its hash and no setup values.

    kopf keeps the last handled spec in one annotation, capped at 256 KiB with all annotations; a
    1 MB inline document would make every patch fail. A setup ``value`` may be a secret typed into
    the spec by mistake (refused, but there): the annotation must not repeat it, and a digest of a
    short secret could be guessed. Handlers are level-based and read the live object, so the diff
    base only has to change when the spec does: a setup value stands in as the generation that
    carried it, which changes with every change of the spec.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        essence = super().build(body=_essential(body), extra_fields=extra_fields)
        spec = essence.get("spec")
        if not isinstance(spec, dict):
            return essence
        source = spec.get("source")
        if isinstance(source, dict) and "inline" in source:
            text = json.dumps(source["inline"], sort_keys=True, separators=(",", ":"))
            source["inline"] = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        setup = spec.get("setup")
        if isinstance(setup, list):
            generation = body.get("metadata", {}).get("generation")
            for entry in setup:
                if isinstance(entry, dict) and "value" in entry:
                    entry["value"] = f"(not kept: generation {generation})"
        return essence


def _essential(body: kopf.Body) -> kopf.Body:
    """The body without what kopf's essence drops anyway: kopf deep-copies the whole object first,
    status and managedFields included, then throws all but the spec, labels and annotations away."""
    meta = body.get("metadata") or {}
    light: dict[str, Any] = {k: v for k, v in body.items() if k not in ("metadata", "status")}
    light["metadata"] = {k: meta[k] for k in ("labels", "annotations") if k in meta}
    return kopf.Body(cast(kopf.RawBody, light))


@kopf.on.startup(registry=REGISTRY)
def _configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=STORAGE_PREFIX)
    settings.persistence.diffbase_storage = SpecDiffBase(
        prefix=STORAGE_PREFIX, key="last-handled-configuration"
    )
    # Our own Events say what happened; kopf's per-handler ones would repeat error texts.
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    # No limit on kopf's per-object workers: at startup each one waits, before any handler, until
    # every object of every indexed kind is indexed, so with more objects of a kind than the limit
    # the workers holding the slots wait for the ones that cannot start, for ever (a restart with
    # more than 64 installations never reconciled anything). Reconciles at once are bounded in
    # _guarded instead, by --workers per kind. An idle worker goes soon: it holds its object's body.
    settings.queueing.worker_limit = None
    settings.queueing.idle_timeout = QUEUE_IDLE_SECONDS


@kopf.on.login(registry=REGISTRY)
def _login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


# --- indexes: who refers to what ----------------------------------------------------------------
# Coroutines, though none of them waits for anything: kopf runs a plain function in its thread pool,
# a hop to another thread and back for every index of every event of every object.


@kopf.index(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installations_by_secret(
    namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[Any, str]:
    return {(namespace, secret): name for secret in referenced_secrets(dict(spec))}


@kopf.index(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def uninstall_secrets(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[Any, str]:
    secret = uninstall_secret(dict(spec))
    return {(namespace, secret): name} if secret is not None else {}


@kopf.index(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installations_by_bundle(
    namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[Any, str]:
    ref = (spec.get("bundleRef") or {}).get("name")
    return {(namespace, ref): name} if isinstance(ref, str) else {}


@kopf.index(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installations_by_target(
    namespace: str | None, name: str, spec: kopf.Spec, meta: kopf.Meta, **_: Any
) -> dict[Any, Peer]:
    url = runtime().platform_url_of(spec)
    workspace = spec.get("workspace") or ""
    peer = Peer(
        namespace=namespace or "",
        name=name,
        uid=meta.get("uid", ""),
        created=meta.get("creationTimestamp", ""),
        bundle_ref=(spec.get("bundleRef") or {}).get("name", ""),
        platform_url=url,
        workspace=workspace,
    )
    return {(platform_key(url), workspace): peer}


@kopf.index(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def endpoints_by_installation(
    namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[Any, str]:
    ref = (spec.get("installationRef") or {}).get("name")
    return {(namespace, ref): name} if isinstance(ref, str) else {}


@kopf.index(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundle_claims(
    namespace: str | None, name: str, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[Any, BundleClaim]:
    bundle_name = status.get("bundleName")
    if not isinstance(bundle_name, str):
        # An inline document names its bundle before the Bundle's first run says so: a fleet
        # applied at once would otherwise wait for its Bundles before checking for duplicates.
        inline = (spec.get("source") or {}).get("inline")
        bundle_name = inline.get("name") if isinstance(inline, dict) else None
    return {
        (namespace, name): BundleClaim(
            exists=True,
            bundle_name=bundle_name if isinstance(bundle_name, str) else None,
            stalled=is_true(dict(status), "Stalled"),
        )
    }


@kopf.index(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundles_by_object(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[Any, str]:
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


@kopf.index(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundle_objects(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    return {(namespace, name): bundle_view(body)}


@kopf.index("", "v1", "secrets", registry=REGISTRY, labels={LABEL_INSTALLATION: kopf.PRESENT})
async def state_secrets(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    if RUNTIME is not None and namespace is not None:
        RUNTIME.installations.caches.states.delivered(namespace, name, body)
    return {(namespace, name): state_view(body)}


# --- nudges: a changed input re-runs the objects that use it -------------------------------------


async def _nudge(plural: str, namespace: str, names: Any, marker: str) -> None:
    """Set the inputs-changed annotation; kopf sees the change and runs the update handler, with
    its retries, even across an operator restart. Setting the same marker twice changes nothing."""
    for name in sorted(set(names or ())):
        try:
            await runtime().kube.patch_annotations(plural, namespace, name, {ANNOTATION_INPUTS: marker})
        except KubeError as exc:
            if not exc.not_found:
                log.warning("could not nudge: %s", exc.reason, extra=object_extra(plural, namespace, name))


# The installations' own state Secrets change at every step of an install: not inputs of anything.
@kopf.on.event("", "v1", "secrets", registry=REGISTRY, labels={LABEL_INSTALLATION: kopf.ABSENT})
async def secret_changed(
    namespace: str | None, name: str, meta: kopf.Meta, body: kopf.Body, **kwargs: Any
) -> None:
    if namespace is None:
        return
    # First: the nudges below start runs that read this Secret from the cache.
    runtime().installations.caches.secrets.observe(
        namespace, name, None if kwargs.get("type") == "DELETED" else body
    )
    # Seen at every start too: a hold no installation needs any more (its spec changed while the
    # operator was away) is released; a Secret made after the installation that needs it is held.
    await _keep_or_release(namespace, name, kwargs["uninstall_secrets"], meta)
    marker = inputs_marker("Secret", name, str(meta.get("resourceVersion", "")))
    users = kwargs["installations_by_secret"].get((namespace, name))
    await _nudge(INSTALLATION_PLURAL, namespace, users, marker)
    await _nudge(
        BUNDLE_PLURAL, namespace, kwargs["bundles_by_object"].get(("Secret", namespace, name)), marker
    )
    # An installation's platform token reaches its Endpoints too; an Endpoint's own credentials
    # Secret, changed or deleted by someone else, is written again.
    by_installation = kwargs["endpoints_by_installation"]
    endpoints = {e for user in users or () for e in by_installation.get((namespace, user), ())}
    endpoints.update(
        owner["name"]
        for owner in meta.get("ownerReferences") or []
        if owner.get("apiVersion") == API_VERSION and owner.get("kind") == "Endpoint" and owner.get("name")
    )
    if kwargs.get("type") == "DELETED":
        marker = inputs_marker("Secret", name, "deleted")
    await _nudge(ENDPOINT_PLURAL, namespace, endpoints, marker)


@kopf.on.event("", "v1", "configmaps", registry=REGISTRY)
async def config_map_changed(namespace: str | None, name: str, meta: kopf.Meta, **kwargs: Any) -> None:
    if namespace is None:
        return
    marker = inputs_marker("ConfigMap", name, str(meta.get("resourceVersion", "")))
    users = kwargs["bundles_by_object"].get(("ConfigMap", namespace, name))
    await _nudge(BUNDLE_PLURAL, namespace, users, marker)


# --- Bundle ----------------------------------------------------------------------------------------


async def _guarded(
    kind: str,
    body: kopf.Body,
    retry: int,
    run: Callable[[dict[str, Any]], Awaitable[ReconcileResult]],
    *,
    plural: str | None = None,
) -> None:
    """Run ``run`` under the object's lock, mapping failures to kopf's retries.

    With ``plural``, the object is read again first; an installation runs from its event's body,
    which is as new as the drift clock's (both come from the same watch, in order).
    """
    rt = runtime()
    obj: dict[str, Any] = dict(body)
    uid = obj["metadata"]["uid"]
    started = time.monotonic()
    result: ReconcileResult = "error"
    caller = CALLER.set(uid)  # the platform's calls are shared fairly between objects
    try:
        async with rt.slots(kind), rt.lock(uid):
            if plural is not None:
                # The event may be older than what a drift run that held the lock just saw: work
                # from the object as it is now, never from an older generation.
                meta = obj["metadata"]
                fresh = await rt.kube.read_custom(plural, meta["namespace"], meta["name"])
                if fresh is None or fresh["metadata"].get("uid") != uid:
                    result = "success"
                    return
                obj = fresh
            result = await run(obj)
            rt.last_run[uid] = time.monotonic()
            rt.liveness.touch()
    except Retry as exc:
        result = "retry"
        rt.failed_at[uid] = time.monotonic()  # a recovered platform wakes it (drift_clock.py)
        raise kopf.TemporaryError(str(exc), delay=exc.delay) from None
    except kopf.TemporaryError:
        result = "retry"
        raise
    except Exception as exc:
        # Unknown: logged with the object's identity and retried with backoff, never a hot loop.
        meta = obj["metadata"]
        log.exception(
            "reconcile failed unexpectedly",
            extra=object_extra(kind, meta.get("namespace"), meta.get("name", ""), meta.get("uid")),
        )
        raise kopf.TemporaryError(f"unexpected {type(exc).__name__}", delay=backoff(retry)) from None
    finally:
        CALLER.reset(caller)
        _observe(kind, result, time.monotonic() - started)


def _observe(kind: str, result: ReconcileResult, seconds: float) -> None:
    # The metrics know the operator's own kinds only.
    for known in RECONCILE_KINDS:
        if kind == known:
            METRICS.observe_reconcile(known, result, seconds)


@kopf.on.resume(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
@kopf.on.create(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
@kopf.on.update(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundle_changed(
    body: kopf.Body, retry: int, namespace: str | None, name: str, **kwargs: Any
) -> None:
    users = kwargs["installations_by_bundle"].get((namespace, name))

    async def run(obj: dict[str, Any]) -> ReconcileResult:
        outcome = await runtime().bundles.reconcile(obj, attempt=retry)
        marker = inputs_marker("Bundle", name, outcome.digest or "unresolved")
        await _nudge(INSTALLATION_PLURAL, namespace or "", users, marker)
        return outcome.result

    await _guarded("Bundle", body, retry, run, plural=BUNDLE_PLURAL)


@kopf.on.delete(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY, optional=True)
async def bundle_deleted(namespace: str | None, name: str, **kwargs: Any) -> None:
    users = kwargs["installations_by_bundle"].get((namespace, name))
    await _nudge(INSTALLATION_PLURAL, namespace or "", users, inputs_marker("Bundle", name, "deleted"))


def _registry_source(spec: kopf.Spec, **_: Any) -> bool:
    return isinstance((spec.get("source") or {}).get("registry"), dict)


# After a record changed between its two reads (a publish under way), read it again this soon.
REGISTRY_CHANGED_RETRY_SECONDS = 60.0


@kopf.daemon(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY, cancellation_timeout=10, when=_registry_source)
async def registry_refresh(
    stopped: kopf.DaemonStopped,
    body: kopf.Body,
    meta: kopf.Meta,
    namespace: str | None,
    name: str,
    **kwargs: Any,
) -> None:
    """Reads a registry source's record again every ``refreshInterval``, through the same reconcile:
    a new latest version, a deprecation or a deletion shows in status and reaches installations."""
    rt = runtime()
    uid = meta["uid"]
    extra = object_extra("Bundle", namespace, name, uid)
    wait: float | None = None
    attempt = 0
    while not stopped and namespace is not None:
        # kopf keeps ``body`` current: a changed interval applies from the next wait on.
        registry = ((body.get("spec") or {}).get("source") or {}).get("registry") or {}
        interval = parse_interval(registry.get("refreshInterval"), 3600.0)
        await stopped.wait(interval if wait is None else min(wait, interval))
        if stopped:
            return
        wait = None
        try:
            fresh = await rt.kube.read_custom(BUNDLE_PLURAL, namespace, name)
            if (
                fresh is None
                or fresh["metadata"].get("uid") != uid
                or fresh["metadata"].get("deletionTimestamp")
            ):
                return
            async with rt.lock(uid):
                outcome = await rt.bundles.reconcile(fresh, attempt=attempt)
                rt.last_run[uid] = time.monotonic()
            attempt = 0
            if outcome.reason == "RegistryRecordChanged":
                wait = REGISTRY_CHANGED_RETRY_SECONDS
            marker = inputs_marker("Bundle", name, outcome.digest or "unresolved")
            await _nudge(
                INSTALLATION_PLURAL,
                namespace,
                kwargs["installations_by_bundle"].get((namespace, name)),
                marker,
            )
        except Retry as exc:
            wait, attempt = exc.delay, attempt + 1
            log.info("registry refresh will be retried in %.0f s: %s", exc.delay, exc, extra=extra)
        except Exception:
            wait, attempt = backoff(attempt), attempt + 1
            log.exception("registry refresh failed", extra=extra)


# --- BundleInstallation ---------------------------------------------------------------------------


def _peers(spec: Any, installations_by_target: Any) -> list[Peer]:
    """Every installation into the same workspace of the same platform."""
    url = runtime().platform_url_of(spec)
    return list(installations_by_target.get((platform_key(url), spec.get("workspace") or ""), []))


def _older_peers(obj: dict[str, Any], installations_by_target: Any) -> list[Peer]:
    """The installations of the same workspace that came before ``obj`` (only those can claim its
    bundle first; see ``first_claim``), with what their Bundles resolved to."""
    meta = obj.get("metadata") or {}
    mine = (meta.get("creationTimestamp", ""), meta.get("namespace", ""), meta.get("name", ""))
    older = [
        peer
        for peer in _peers(obj.get("spec") or {}, installations_by_target)
        if (peer.created, peer.namespace, peer.name) < mine
    ]
    bundles = PEERS_VIEW.bundles
    if bundles is None:
        return older  # the reconciler reads the peers' Bundles itself
    # What each peer's Bundle resolved to, from the watch: a hundred installations of one workspace
    # would otherwise each read up to a hundred Bundles.
    return [
        dataclasses.replace(peer, bundle=_bundle_claim(bundles.get((peer.namespace, peer.bundle_ref))))
        for peer in older
    ]


def _bundle_claim(found: Any) -> BundleClaim:
    for state in found or ():
        return state  # type: ignore[no-any-return]
    return BundleClaim(exists=False)


@kopf.on.resume(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
@kopf.on.create(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
@kopf.on.update(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installation_changed(
    body: kopf.Body, spec: kopf.Spec, retry: int, reason: str, **kwargs: Any
) -> None:
    PEERS_VIEW.index = kwargs["installations_by_target"]
    PEERS_VIEW.bundles = kwargs["bundle_claims"]
    index = PEERS_VIEW.index
    # After a restart every installation resumes at once: they share their workspace's lists of
    # this drift interval like drift checks do. A create or an edit reads lists of the last seconds.
    since = _slot_of(dict(spec)) if reason == "resume" else None

    async def run(obj: dict[str, Any]) -> ReconcileResult:
        peers = functools.partial(_older_peers, obj, index)
        return await runtime().installations.reconcile(obj, peers, attempt=retry, reads_since=since)

    runtime().attach_caches(kwargs)
    await _guarded("BundleInstallation", body, retry, run)


@kopf.on.delete(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installation_deleted(
    body: kopf.Body, spec: kopf.Spec, retry: int, namespace: str | None, name: str, **kwargs: Any
) -> None:
    async def run(obj: dict[str, Any]) -> ReconcileResult:
        await runtime().installations.finalize(obj, attempt=retry)
        return "success"

    await _guarded("BundleInstallation", body, retry, run)
    GAUGES.forget(namespace or "", name)
    runtime().forget(body.get("metadata", {}).get("uid", ""))
    # An installation refused as a duplicate of this one may go ahead now.
    for peer in _peers(spec, kwargs["installations_by_target"]):
        if peer.name != name or peer.namespace != namespace:
            await _nudge(
                INSTALLATION_PLURAL, peer.namespace, [peer.name], inputs_marker("Peer", name, "deleted")
            )


async def _drift_check(uid: str, attempt: int, slot: float, decided: float) -> ReconcileResult | None:
    """One drift check (drift_clock.py): under the object's lock, from the object as last delivered."""
    rt = runtime()
    caller = CALLER.set(uid)  # its platform calls are this object's
    try:
        async with rt.lock(uid):
            fresh = rt.drift_clock().body_of(uid)
            if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                return None  # gone, or its finalizer's run uninstalls it
            if rt.last_run.get(uid, 0.0) >= decided:
                return None  # a handler ran it meanwhile: that was its check
            peers = functools.partial(_older_peers, fresh, PEERS_VIEW.index or {})
            result = await rt.installations.reconcile(fresh, peers, attempt=attempt, reads_since=slot)
            rt.last_run[uid] = time.monotonic()
            return result
    finally:
        CALLER.reset(caller)


@kopf.on.startup(registry=REGISTRY)
async def _start_drift_clock(**_: Any) -> None:
    runtime().start_drift_clock()


@kopf.on.cleanup(registry=REGISTRY)
async def _stop_drift_clock(**_: Any) -> None:
    await runtime().stop_drift_clock()


def _slot_of(spec: dict[str, Any], now: float | None = None) -> float:
    """The start of the current drift interval of the installation with ``spec``."""
    return drift_slot(
        time.monotonic() if now is None else now,
        parse_interval((spec.get("driftPolicy") or {}).get("interval")),
        runtime().platform_url_of(spec),
        str(spec.get("workspace", "")),
    )


class _PeersView:
    """The live ``installations_by_target`` index, for drift checks that run outside a handler."""

    index: Any = None
    bundles: Any = None


PEERS_VIEW = _PeersView()


# What the watches delivered, for the watch checks of run.py (watch_lag.py).
DELIVERIES = Deliveries()


def _delivered(plural: str, body: kopf.Body, type: str | None) -> None:
    meta = body.get("metadata", {})
    if type == "DELETED" and RUNTIME is not None:
        RUNTIME.forget(str(meta.get("uid", "")))
    DELIVERIES.note(
        plural,
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        deleted=type == "DELETED",
    )


@kopf.on.event(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def _bundle_event(body: kopf.Body, type: str | None, **_: Any) -> None:
    _delivered(BUNDLE_PLURAL, body, type)


@kopf.on.event(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def _endpoint_event(body: kopf.Body, type: str | None, **_: Any) -> None:
    _delivered(ENDPOINT_PLURAL, body, type)


@kopf.on.event(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def _installation_event(
    body: kopf.Body, namespace: str | None, name: str, type: str | None, **kwargs: Any
) -> None:
    _delivered(INSTALLATION_PLURAL, body, type)
    runtime().attach_caches(kwargs)
    uid = body.get("metadata", {}).get("uid", "")
    runtime().drift_clock().observe(uid, None if type == "DELETED" else body)
    PEERS_VIEW.index = kwargs["installations_by_target"]
    PEERS_VIEW.bundles = kwargs["bundle_claims"]
    runtime().liveness.touch()
    if namespace is None:
        return
    await _hold_uninstall_secrets(namespace, name, body, type, kwargs["uninstall_secrets"])
    # The Endpoints of this installation run again when what they depend on changes (its gateway
    # appears or goes, it moves to another platform); its other status writes leave them alone.
    marker = inputs_marker(
        "BundleInstallation", name, installation_marker(None if type == "DELETED" else dict(body))
    )
    for endpoint in sorted(set(kwargs["endpoints_by_installation"].get((namespace, name), ()))):
        if ENDPOINT_NUDGES.get((namespace, endpoint)) != marker:
            await _nudge(ENDPOINT_PLURAL, namespace, [endpoint], marker)
            ENDPOINT_NUDGES[(namespace, endpoint)] = marker


async def _hold_uninstall_secrets(
    namespace: str, name: str, body: kopf.Body, type: str | None, index: kopf.Index[Any, str]
) -> None:
    secret = None if type == "DELETED" else uninstall_secret(dict(body.get("spec") or {}))

    def users(held: str) -> set[str]:
        return set(index.get((namespace, held), ())) - ({name} if type == "DELETED" else set())

    try:
        await runtime().secret_holds().follow_installation(namespace, secret, users)
    except KubeError as exc:
        # The next event of the installation (its own status writes bring one) tries again.
        log.warning(
            "could not hold or release a Secret: %s",
            exc.reason,
            extra=object_extra("BundleInstallation", namespace, name, None),
        )


async def _keep_or_release(namespace: str, name: str, index: kopf.Index[Any, str], meta: kopf.Meta) -> None:
    try:
        await (
            runtime()
            .secret_holds()
            .follow_secret(namespace, name, dict(meta), needed=bool(index.get((namespace, name))))
        )
    except KubeError as exc:
        log.warning(
            "could not hold or release a Secret: %s",
            exc.reason,
            extra=object_extra("Secret", namespace, name, meta.get("uid")),
        )


# The last installation marker set on each Endpoint, so an installation's every status write does
# not cost a patch per Endpoint.
ENDPOINT_NUDGES: dict[tuple[str, str], str] = {}


# --- Endpoint -------------------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
@kopf.on.create(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
@kopf.on.update(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def endpoint_changed(body: kopf.Body, retry: int, **_: Any) -> None:
    async def run(obj: dict[str, Any]) -> ReconcileResult:
        return await runtime().endpoint_reconciler().reconcile(obj, attempt=retry)

    await _guarded("Endpoint", body, retry, run, plural=ENDPOINT_PLURAL)


@kopf.on.delete(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def endpoint_deleted(body: kopf.Body, retry: int, namespace: str | None, name: str, **_: Any) -> None:
    async def run(obj: dict[str, Any]) -> ReconcileResult:
        await runtime().endpoint_reconciler().finalize(obj, attempt=retry)
        return "success"

    await _guarded("Endpoint", body, retry, run)
    ENDPOINT_NUDGES.pop((namespace or "", name), None)


@kopf.timer(
    GROUP,
    VERSION,
    ENDPOINT_PLURAL,
    registry=REGISTRY,
    interval=ENDPOINT_REFRESH_SECONDS,
    initial_delay=ENDPOINT_REFRESH_SECONDS,
    idle=DRIFT_IDLE_SECONDS,
)
async def endpoint_refresh(meta: kopf.Meta, namespace: str | None, name: str, **_: Any) -> None:
    """Reads the served tools and the members' health again, through the same reconcile; status is
    written only when something changed. A stalled Endpoint waits for its user instead."""
    rt = runtime()
    uid = meta.get("uid", "")
    if namespace is None:
        return
    extra = object_extra("Endpoint", namespace, name, uid)
    try:
        fresh = await rt.kube.read_custom(ENDPOINT_PLURAL, namespace, name)
        if fresh is None or fresh["metadata"].get("uid") != uid or fresh["metadata"].get("deletionTimestamp"):
            return
        if stalled_and_seen(fresh):
            return
        async with rt.lock(uid):
            await rt.endpoint_reconciler().reconcile(fresh)
            rt.last_run[uid] = time.monotonic()
        rt.liveness.touch()
    except Retry as exc:
        log.info("endpoint refresh will be retried: %s", exc, extra=extra)
    except Exception:
        log.exception("endpoint refresh failed", extra=extra)
