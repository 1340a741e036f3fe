"""Runs on a clock rather than an event: a registry source read again, an Endpoint's tools and
members' health read again. Both go through the envelope, as every reconcile does, and log their
failures instead of handing them to kopf (the next turn of the clock is their retry)."""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf

from bundle_operator.k8s.bundle.reconciler import BundleOutcome
from bundle_operator.k8s.installation.drift_clock import parse_interval, stalled_and_seen
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.process.options import DEFAULT_ENDPOINT_REFRESH_SECONDS, endpoint_refresh_seconds
from bundle_operator.k8s.reconcile import Retry, backoff
from bundle_operator.k8s.resources import BUNDLE_PLURAL, ENDPOINT_PLURAL
from bundle_operator.k8s.runtime import Runtime

log = logging.getLogger(__name__)

# After a record changed between its two reads (a publish under way), read it again this soon.
REGISTRY_CHANGED_RETRY_SECONDS = 60.0
# Read at import, because kopf takes a timer's interval when the handler is registered;
# `options_from` refuses a bad value at start.
try:
    ENDPOINT_REFRESH_SECONDS = endpoint_refresh_seconds(os.environ)
except ValueError:
    ENDPOINT_REFRESH_SECONDS = DEFAULT_ENDPOINT_REFRESH_SECONDS
# The one share of the platform's fair-share gate that every Endpoint refresh's calls count
# under: refreshes start together (kopf's timers after a restart), and a thousand of them as a
# thousand owners would take most turns from the installations being reconciled meanwhile.
ENDPOINT_REFRESHES = "endpoint-refreshes"


def has_registry_source(spec: kopf.Spec, **_: Any) -> bool:
    """Whether a Bundle reads a registry record (kopf's filter of the refresh daemon)."""
    return isinstance((spec.get("source") or {}).get("registry"), dict)


def _gone(fresh: dict[str, Any], uid: str) -> bool:
    """The object read again is not the one the run is for any more, or is being deleted."""
    meta = fresh["metadata"]
    return meta.get("uid") != uid or bool(meta.get("deletionTimestamp"))


async def refresh_registry(rt: Runtime, stopped: kopf.DaemonStopped, body: kopf.Body, uid: str) -> None:
    """Read a registry source's record again every ``refreshInterval``, through the same reconcile:
    a new latest version, a deprecation or a deletion shows in status, and reaches installations
    as the watch delivers it (``Nudges.bundle_seen``)."""
    namespace, name = str(body["metadata"]["namespace"]), str(body["metadata"]["name"])
    extra = object_extra("Bundle", namespace, name, uid)
    wait: float | None = None
    attempt = 0
    while not stopped:
        # kopf keeps ``body`` current: a changed interval applies from the next wait on.
        registry = ((body.get("spec") or {}).get("source") or {}).get("registry") or {}
        interval = parse_interval(registry.get("refreshInterval"), 3600.0)
        await stopped.wait(interval if wait is None else min(wait, interval))
        if stopped:
            return
        wait = None
        try:
            fresh = await rt.kube.read_custom(BUNDLE_PLURAL, namespace, name)
            if fresh is None or _gone(fresh, uid):
                return
            outcome = await _reconcile_bundle(rt, fresh, uid, attempt)
            attempt = 0
            if outcome.reason == "RegistryRecordChanged":
                wait = REGISTRY_CHANGED_RETRY_SECONDS
        except Retry as exc:
            wait, attempt = exc.delay, attempt + 1
            log.info("registry refresh will be retried in %.0f s: %s", exc.delay, exc, extra=extra)
        except Exception:
            wait, attempt = backoff(attempt), attempt + 1
            log.exception("registry refresh failed", extra=extra)


async def _reconcile_bundle(rt: Runtime, fresh: dict[str, Any], uid: str, attempt: int) -> BundleOutcome:
    outcomes: list[BundleOutcome] = []

    async def work() -> ReconcileResult:
        outcomes.append(await rt.bundles.reconcile(fresh, attempt=attempt))
        return outcomes[-1].result

    await rt.envelope.run("Bundle", uid, work, trigger="refresh")
    return outcomes[-1]


async def refresh_endpoint(rt: Runtime, namespace: str, name: str, uid: str) -> None:
    """Read the served tools and the members' health again, through the same reconcile; status is
    written only when something changed. A stalled Endpoint waits for its user instead."""
    extra = object_extra("Endpoint", namespace, name, uid)
    try:
        fresh = await rt.kube.read_custom(ENDPOINT_PLURAL, namespace, name)
        if fresh is None or _gone(fresh, uid) or stalled_and_seen(fresh):
            return

        async def work() -> ReconcileResult:
            return await rt.endpoints.reconcile(fresh)

        await rt.envelope.run("Endpoint", uid, work, share=ENDPOINT_REFRESHES, trigger="refresh")
    except Retry as exc:
        log.info("endpoint refresh will be retried: %s", exc, extra=extra)
    except Exception:
        log.exception("endpoint refresh failed", extra=extra)
