"""kopf registrations only: each handler is a few lines that call a reconciler through the envelope.

Everything registers on ``REGISTRY`` (not kopf's global one), so importing this module has no
effect until ``run.py`` starts an operator with it. Every handler reaches the process's
``Runtime`` through kopf's ``memo`` (``runtime.py``).
"""

from __future__ import annotations

from typing import Any

import kopf

from bundle_operator.k8s.diff_base import SpecDiffBase
from bundle_operator.k8s.installation.inputs import BundleClaim, Peer, inputs_marker
from bundle_operator.k8s.installation.peers import claim_of, peers, target_of
from bundle_operator.k8s.installation.secret_holds import uninstall_secret
from bundle_operator.k8s.installation.setup import referenced_secrets
from bundle_operator.k8s.installation.state import LABEL_INSTALLATION
from bundle_operator.k8s.installation.watch_cache import bundle_view, state_view
from bundle_operator.k8s.nudges import bundle_inputs, referred_by
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.refreshes import (
    ENDPOINT_REFRESH_SECONDS,
    has_registry_source,
    refresh_endpoint,
    refresh_registry,
)
from bundle_operator.k8s.resources import BUNDLE_PLURAL, ENDPOINT_PLURAL, GROUP, INSTALLATION_PLURAL, VERSION
from bundle_operator.k8s.runtime import runtime_of

REGISTRY = kopf.OperatorRegistry()
STORAGE_PREFIX = f"kopf.{GROUP}"
FINALIZER = f"{GROUP}/finalizer"
# An Endpoint refreshes only after this long without a change of its own.
IDLE_SECONDS = 10.0
QUEUE_IDLE_SECONDS = 0.5


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
    # more than 64 installations never reconciled anything). Reconciles at once are bounded in the
    # envelope instead, by --workers per kind. An idle worker goes soon: it holds its object's body.
    settings.queueing.worker_limit = None
    settings.queueing.idle_timeout = QUEUE_IDLE_SECONDS


@kopf.on.login(registry=REGISTRY)
def _login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


@kopf.on.startup(registry=REGISTRY)
async def _start_drift_clock(memo: kopf.Memo, **_: Any) -> None:
    runtime_of(memo).start_drift_clock()


@kopf.on.cleanup(registry=REGISTRY)
async def _stop_drift_clock(memo: kopf.Memo, **_: Any) -> None:
    await runtime_of(memo).stop_drift_clock()


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
    return referred_by(namespace, name, spec, "bundleRef")


@kopf.index(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installations_by_target(
    namespace: str | None, name: str, spec: kopf.Spec, meta: kopf.Meta, memo: kopf.Memo, **_: Any
) -> dict[Any, Peer]:
    return target_of(namespace or "", name, spec, meta, runtime_of(memo).platform_url_of(spec))


@kopf.index(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def endpoints_by_installation(
    namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[Any, str]:
    return referred_by(namespace, name, spec, "installationRef")


@kopf.index(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundle_claims(
    namespace: str | None, name: str, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[Any, BundleClaim]:
    return {(namespace, name): claim_of(spec, status)}


@kopf.index(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundles_by_object(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[Any, str]:
    return bundle_inputs(spec, namespace, name)


@kopf.index(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundle_objects(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    return {(namespace, name): bundle_view(body)}


@kopf.index("", "v1", "secrets", registry=REGISTRY, labels={LABEL_INSTALLATION: kopf.PRESENT})
async def state_secrets(
    namespace: str | None, name: str, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> dict[Any, Any]:
    if namespace is not None:
        runtime_of(memo).installations.caches.states.delivered(namespace, name, body)
    return {(namespace, name): state_view(body)}


# --- inputs: a changed Secret or ConfigMap re-runs the objects that use it (nudges.py) -----------


# The installations' own state Secrets change at every step of an install: not inputs of anything.
@kopf.on.event("", "v1", "secrets", registry=REGISTRY, labels={LABEL_INSTALLATION: kopf.ABSENT})
async def secret_changed(
    namespace: str | None, name: str, meta: kopf.Meta, body: kopf.Body, memo: kopf.Memo, **kwargs: Any
) -> None:
    if namespace is None:
        return
    rt, deleted = runtime_of(memo), kwargs.get("type") == "DELETED"
    # First: the nudges below start runs that read this Secret from the cache.
    rt.installations.caches.secrets.observe(namespace, name, None if deleted else body)
    # Seen at every start too: a hold no installation needs any more (its spec changed while the
    # operator was away) is released; a Secret made after the installation that needs it is held.
    await rt.holds.secret_seen(namespace, name, meta, kwargs["uninstall_secrets"])
    await rt.nudges.secret_changed(namespace, name, meta, deleted, kwargs)


@kopf.on.event("", "v1", "configmaps", registry=REGISTRY)
async def config_map_changed(
    namespace: str | None, name: str, meta: kopf.Meta, memo: kopf.Memo, **kwargs: Any
) -> None:
    if namespace is not None:
        marker = inputs_marker("ConfigMap", name, str(meta.get("resourceVersion", "")))
        users = kwargs["bundles_by_object"].get(("ConfigMap", namespace, name))
        await runtime_of(memo).nudges.nudge(BUNDLE_PLURAL, namespace, users, marker)


# --- Bundle ----------------------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
@kopf.on.create(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
@kopf.on.update(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def bundle_changed(body: kopf.Body, retry: int, memo: kopf.Memo, **_: Any) -> None:
    rt = runtime_of(memo)

    # The installations follow the status this writes, as the watch delivers it (_bundle_event).
    async def run(obj: dict[str, Any]) -> ReconcileResult:
        return (await rt.bundles.reconcile(obj, attempt=retry)).result

    await rt.reconciled("Bundle", body, retry, run, plural=BUNDLE_PLURAL)


@kopf.on.delete(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY, optional=True)
async def bundle_deleted(namespace: str | None, name: str, memo: kopf.Memo, **kwargs: Any) -> None:
    users = kwargs["installations_by_bundle"].get((namespace, name))
    marker = inputs_marker("Bundle", name, "deleted")
    await runtime_of(memo).nudges.nudge(INSTALLATION_PLURAL, namespace or "", users, marker)


@kopf.daemon(
    GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY, cancellation_timeout=10, when=has_registry_source
)
async def registry_refresh(
    stopped: kopf.DaemonStopped, body: kopf.Body, meta: kopf.Meta, memo: kopf.Memo, **kwargs: Any
) -> None:
    """Reads a registry source's record again every ``refreshInterval`` (refreshes.py)."""
    if meta.get("namespace") is not None:
        await refresh_registry(runtime_of(memo), stopped, body, meta["uid"])


# --- BundleInstallation ---------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
@kopf.on.create(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
@kopf.on.update(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installation_changed(
    body: kopf.Body, spec: kopf.Spec, retry: int, reason: str, memo: kopf.Memo, **kwargs: Any
) -> None:
    rt = runtime_of(memo)
    rt.peers.follow(kwargs)
    # After a restart every installation resumes at once: they share their workspace's lists of
    # this drift interval like drift checks do. A create or an edit reads lists of the last seconds.
    since = rt.reads_since(spec) if reason == "resume" else None

    async def run(obj: dict[str, Any]) -> ReconcileResult:
        return await rt.installations.reconcile(obj, rt.older_peers(obj), attempt=retry, reads_since=since)

    rt.attach_caches(kwargs)
    await rt.reconciled("BundleInstallation", body, retry, run)


@kopf.on.delete(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def installation_deleted(
    body: kopf.Body,
    spec: kopf.Spec,
    retry: int,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    **kwargs: Any,
) -> None:
    rt = runtime_of(memo)

    async def run(obj: dict[str, Any]) -> ReconcileResult:
        await rt.installations.finalize(obj, attempt=retry)
        return "success"

    await rt.reconciled("BundleInstallation", body, retry, run)
    rt.gauges.forget(namespace or "", name)
    rt.envelope.forget(body.get("metadata", {}).get("uid", ""))
    same_workspace = peers(spec, kwargs["installations_by_target"], rt.platform_url_of)
    await rt.nudges.peer_deleted(namespace or "", name, same_workspace)


# --- what the watches deliver ----------------------------------------------------------------------


@kopf.on.event(GROUP, VERSION, BUNDLE_PLURAL, registry=REGISTRY)
async def _bundle_event(
    body: kopf.Body, type: str | None, namespace: str | None, name: str, memo: kopf.Memo, **kwargs: Any
) -> None:
    rt = runtime_of(memo)
    rt.delivered(BUNDLE_PLURAL, body, type)
    if namespace is not None:
        users = kwargs["installations_by_bundle"].get((namespace, name))
        await rt.nudges.bundle_seen(namespace, name, body, type, users)


@kopf.on.event(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def _endpoint_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    runtime_of(memo).delivered(ENDPOINT_PLURAL, body, type)


@kopf.on.event(GROUP, VERSION, INSTALLATION_PLURAL, registry=REGISTRY)
async def _installation_event(
    body: kopf.Body, namespace: str | None, name: str, type: str | None, memo: kopf.Memo, **kwargs: Any
) -> None:
    rt, deleted = runtime_of(memo), type == "DELETED"
    rt.delivered(INSTALLATION_PLURAL, body, type)
    rt.attach_caches(kwargs)
    rt.drift.observe(body.get("metadata", {}).get("uid", ""), None if deleted else body)
    rt.peers.follow(kwargs)
    rt.liveness.touch()
    if namespace is None:
        return
    spec = None if deleted else dict(body.get("spec") or {})
    await rt.holds.installation_seen(namespace, name, spec, kwargs["uninstall_secrets"])
    endpoints = kwargs["endpoints_by_installation"].get((namespace, name))
    await rt.nudges.installation_changed(namespace, name, None if deleted else body, endpoints)


# --- Endpoint -------------------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
@kopf.on.create(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
@kopf.on.update(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def endpoint_changed(body: kopf.Body, retry: int, memo: kopf.Memo, **_: Any) -> None:
    rt = runtime_of(memo)

    async def run(obj: dict[str, Any]) -> ReconcileResult:
        return await rt.endpoints.reconcile(obj, attempt=retry)

    await rt.reconciled("Endpoint", body, retry, run, plural=ENDPOINT_PLURAL)


@kopf.on.delete(GROUP, VERSION, ENDPOINT_PLURAL, registry=REGISTRY)
async def endpoint_deleted(
    body: kopf.Body, retry: int, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    rt = runtime_of(memo)

    async def run(obj: dict[str, Any]) -> ReconcileResult:
        await rt.endpoints.finalize(obj, attempt=retry)
        return "success"

    await rt.reconciled("Endpoint", body, retry, run)
    rt.endpoint_gauges.forget(namespace or "", name)
    rt.nudges.forget_endpoint(namespace or "", name)


@kopf.timer(
    GROUP,
    VERSION,
    ENDPOINT_PLURAL,
    registry=REGISTRY,
    interval=ENDPOINT_REFRESH_SECONDS,
    initial_delay=ENDPOINT_REFRESH_SECONDS,
    idle=IDLE_SECONDS,
)
async def endpoint_refresh(
    meta: kopf.Meta, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    """Reads the served tools and the members' health again (refreshes.py)."""
    if namespace is not None:
        await refresh_endpoint(runtime_of(memo), namespace, name, meta.get("uid", ""))
