"""The composition root: what every handler shares, built once per process.

``run.py`` builds a ``Runtime`` and hands it to kopf in the memo (``kopf.Memo(runtime=...)``);
kopf copies the memo per object shallowly, so every handler reaches the same object through
``runtime_of(memo)``. Nothing here is set from another module.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from bundle_operator.k8s.bundle.reconciler import BundleReconciler
from bundle_operator.k8s.endpoint.reconciler import EndpointReconciler
from bundle_operator.k8s.envelope import Envelope
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.installation.drift_clock import DriftClock, drift_slot, parse_interval
from bundle_operator.k8s.installation.peers import PeersView
from bundle_operator.k8s.installation.reconciler import InstallationReconciler
from bundle_operator.k8s.installation.secret_holds import SecretHolds
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.nudges import Nudges
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.process.health import Liveness
from bundle_operator.k8s.process.metrics import METRICS, EndpointGauges, InstallationGauges, ReconcileResult
from bundle_operator.k8s.process.watch_lag import Deliveries
from bundle_operator.k8s.reconcile import OperatorSettings, Retry

INSTALLATION = "BundleInstallation"


@dataclass
class Runtime:
    """What the handlers share: the reconcilers, the envelope every run goes through, and what
    the process remembers between events."""

    kube: Kube
    installations: InstallationReconciler
    bundles: BundleReconciler
    endpoints: EndpointReconciler
    liveness: Liveness
    default_platform_url: str | None
    gauges: InstallationGauges
    envelope: Envelope
    holds: SecretHolds
    nudges: Nudges
    endpoint_gauges: EndpointGauges = field(default_factory=lambda: EndpointGauges(METRICS))
    peers: PeersView = field(default_factory=PeersView)
    # What the watches delivered, for the watch checks of run.py (watch_lag.py).
    deliveries: Deliveries = field(default_factory=Deliveries)
    drift: DriftClock = field(init=False)
    drift_task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.drift = DriftClock(
            self.drift_check,
            platform_url=self.platform_url_of,
            gate_for=self.installations.platforms.gate_for,
            last_run=self.envelope.last_run,
            failed_at=self.envelope.failed_at,
            touch=self.liveness.touch,
        )

    def platform_url_of(self, spec: Mapping[str, Any]) -> str:
        """The platform an installation spec names, or the operator's default."""
        return str((spec.get("platform") or {}).get("url") or self.default_platform_url or "")

    def attach_caches(self, indexes: Mapping[str, Any]) -> None:
        """Hand kopf's live indexes to the watch caches (any handler of an installation has them)."""
        caches = self.installations.caches
        if caches.states.index is None:
            caches.attach(indexes["bundle_objects"], indexes["state_secrets"])

    def older_peers(self, obj: dict[str, Any]) -> functools.partial[list[Any]]:
        """The peers ``obj``'s reconcile may ask for, read when it asks."""
        return functools.partial(self.peers.older_peers, obj, self.platform_url_of)

    def reads_since(self, spec: Mapping[str, Any], now: float | None = None) -> float:
        """The start of the current drift interval of the installation with ``spec``."""
        return drift_slot(
            time.monotonic() if now is None else now,
            parse_interval((spec.get("driftPolicy") or {}).get("interval")),
            self.platform_url_of(spec),
            str(spec.get("workspace", "")),
        )

    async def reconciled(
        self,
        kind: str,
        body: Mapping[str, Any],
        retry: int,
        run: Callable[[dict[str, Any]], Awaitable[ReconcileResult]],
        *,
        plural: str | None = None,
    ) -> None:
        """A kopf handler's run, in the envelope, failures mapped to kopf's retries.

        With ``plural``, the object is read again first; an installation runs from its event's
        body, which is as new as the drift clock's (both come from the same watch, in order).
        """
        obj: dict[str, Any] = dict(body)
        meta = obj["metadata"]

        async def work() -> ReconcileResult | None:
            if plural is None:
                return await run(obj)
            # The event may be older than what a drift run that held the lock just saw: work from
            # the object as it is now, never from an older generation.
            fresh = await self.kube.read_custom(plural, meta["namespace"], meta["name"])
            if fresh is None or fresh["metadata"].get("uid") != meta["uid"]:
                return None
            return await run(fresh)

        await self.envelope.handled(kind, meta, retry, work)

    async def drift_check(
        self, uid: str, attempt: int, slot: float, decided: float
    ) -> ReconcileResult | None:
        """One drift check (drift_clock.py), in the envelope, from the object as last delivered."""

        async def work() -> ReconcileResult | None:
            fresh = self.drift.body_of(uid)
            if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                return None  # gone, or its finalizer's run uninstalls it
            if self.envelope.last_run.get(uid, 0.0) >= decided:
                return None  # a handler ran it meanwhile: that was its check
            peers = self.older_peers(fresh)
            return await self.installations.reconcile(fresh, peers, attempt=attempt, reads_since=slot)

        # The clock retries a Kubernetes API failure after its backoff, as it does a Retry.
        return await self.envelope.run(INSTALLATION, uid, work, passing=(Retry, KubeError), trigger="drift")

    def start_drift_clock(self) -> None:
        """Run the drift checks while kopf runs (a standby checks nothing)."""
        if self.drift_task is None or self.drift_task.done():
            self.drift_task = asyncio.create_task(self.drift.run(), name="drift-clock")

    async def stop_drift_clock(self) -> None:
        """kopf stops: so do the checks, and what its watches delivered is forgotten."""
        task, self.drift_task = self.drift_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.drift.forget_all()

    def delivered(self, plural: str, body: Mapping[str, Any], type: str | None) -> None:
        """A watch event: noted for the watch checks; a deleted object's runs are forgotten."""
        meta = body.get("metadata", {})
        if type == "DELETED":
            self.envelope.forget(str(meta.get("uid", "")))
        self.deliveries.note(
            plural,
            str(meta.get("namespace", "")),
            str(meta.get("name", "")),
            str(meta.get("resourceVersion", "")),
            deleted=type == "DELETED",
        )


def build_runtime(
    kube: Kube, settings: OperatorSettings, platforms: PlatformPool, liveness: Liveness, workers: int
) -> Runtime:
    """The reconcilers over one Kubernetes client and one pool of platform clients, sharing events."""
    events = Events(kube)
    gauges, endpoint_gauges = InstallationGauges(METRICS), EndpointGauges(METRICS)
    return Runtime(
        kube=kube,
        installations=InstallationReconciler(kube, settings, platforms, events, on_status=gauges.set),
        bundles=BundleReconciler(kube, settings.sources, events),
        endpoints=EndpointReconciler(kube, settings, platforms, events, on_members=endpoint_gauges.set),
        endpoint_gauges=endpoint_gauges,
        liveness=liveness,
        default_platform_url=settings.default_platform_url,
        gauges=gauges,
        envelope=Envelope(workers=workers, touch=liveness.touch),
        holds=SecretHolds(kube),
        nudges=Nudges(kube),
    )


def runtime_of(memo: Any) -> Runtime:
    """The runtime kopf hands every handler in its memo."""
    runtime = memo["runtime"] if isinstance(memo, Mapping) else None
    assert isinstance(runtime, Runtime), "the operator runtime is not in kopf's memo"
    return runtime


def memo_of(runtime: Runtime) -> kopf.Memo:
    """The memo kopf copies for every object: the copies share the one runtime."""
    return kopf.Memo(runtime=runtime)
