"""The one way any door runs work on an object: a kopf handler, the drift clock, a refresh.

Every run takes a slot of its kind (``--workers``), then the object's lock, so two runs of one
object never overlap and the API server sees a bounded number of writes in flight. Its platform
calls are the object's in the fair-share gate (``platform.gate.CALLER``), and its time and outcome
go to the metrics. Each door maps a failure its own way: kopf handlers through ``handled``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from bundle_operator.k8s import spans
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.process.metrics import METRICS, RECONCILE_KINDS, ReconcileResult
from bundle_operator.k8s.process.options import DEFAULT_WORKERS
from bundle_operator.k8s.reconcile import Retry, backoff
from bundle_operator.k8s.spans import Trigger
from bundle_operator.platform.gate import CALLER
from bundle_operator.telemetry import tracing

log = logging.getLogger(__name__)

# The work of one run: its result, or None when it found nothing to do (not counted, not a run).
Work = Callable[[], Awaitable[ReconcileResult | None]]
# The failures a run counts as "retry" unless a door says otherwise; anything else is an "error".
PASSING: tuple[type[BaseException], ...] = (Retry, kopf.TemporaryError)


@dataclass
class Envelope:
    """The per-kind bound, the per-object locks and what is remembered of each object's runs."""

    workers: int = DEFAULT_WORKERS
    touch: Callable[[], None] = lambda: None
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    last_run: dict[str, float] = field(default_factory=dict)
    # When an object's last run failed for a passing reason (monotonic), to wake it on recovery.
    failed_at: dict[str, float] = field(default_factory=dict)
    kind_slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def slots(self, kind: str) -> asyncio.Semaphore:
        """Runs of one kind at once (--workers): bounds the writes in flight to the API server."""
        return self.kind_slots.setdefault(kind, asyncio.Semaphore(self.workers))

    def lock(self, uid: str) -> asyncio.Lock:
        """One lock per object: the drift clock never runs beside a reconcile of the same object."""
        return self.locks.setdefault(uid, asyncio.Lock())

    def forget(self, uid: str) -> None:
        """The object is gone: what was kept per object goes too (its lock unless a run holds it)."""
        self.last_run.pop(uid, None)
        self.failed_at.pop(uid, None)
        lock = self.locks.get(uid)
        if lock is not None and not lock.locked():
            del self.locks[uid]

    async def run(
        self,
        kind: str,
        uid: str,
        work: Work,
        *,
        passing: tuple[type[BaseException], ...] = PASSING,
        share: str | None = None,
        trigger: Trigger = "event",
    ) -> ReconcileResult | None:
        """Run ``work`` in a slot of ``kind`` under the object's lock; failures propagate, counted.

        The run's platform calls are the object's share of the fair-share gate, or ``share``'s when
        many background runs must count as one (so that they never outweigh the reconciles). The
        run is one span, ``reconcile <kind>``, the root of its trace; the reconciler adds what it
        reconciles (spans.py) and a span per step."""
        started = time.monotonic()
        result: ReconcileResult | None = "error"
        caller = CALLER.set(share or uid)
        attributes = {spans.KIND: kind, spans.UID: uid, spans.TRIGGER: trigger}
        try:
            # A new trace per run: a drift check started from a reconcile's task is no child of it.
            with tracing.span(f"reconcile {kind}", attributes, parent=spans.ROOT):
                try:
                    async with self.slots(kind), self.lock(uid):
                        result = await work()
                        if result is not None:
                            self.last_run[uid] = time.monotonic()
                            self.touch()
                    return result
                except passing:
                    result = "retry"
                    raise
                finally:
                    tracing.set_attributes({spans.RESULT: result or "skipped"})
        finally:
            CALLER.reset(caller)
            if result is not None:
                observe(kind, result, time.monotonic() - started)

    async def handled(self, kind: str, meta: Mapping[str, Any], retry: int, work: Work) -> None:
        """A kopf handler's run: ``Retry`` becomes kopf's retry after its delay, anything unknown
        is logged and retried with backoff, never in a hot loop."""
        uid = str(meta["uid"])
        try:
            await self.run(kind, uid, work, trigger="event")
        except Retry as exc:
            self.failed_at[uid] = time.monotonic()  # a recovered platform wakes it (drift_clock.py)
            raise kopf.TemporaryError(str(exc), delay=exc.delay) from None
        except kopf.TemporaryError:
            raise
        except Exception as exc:
            where = object_extra(kind, meta.get("namespace"), meta.get("name", ""), uid)
            log.exception("reconcile failed unexpectedly", extra=where)
            raise kopf.TemporaryError(f"unexpected {type(exc).__name__}", delay=backoff(retry)) from None


def observe(kind: str, result: ReconcileResult, seconds: float) -> None:
    """Count a run in the metrics, which know the operator's own kinds only."""
    for known in RECONCILE_KINDS:
        if kind == known:
            METRICS.observe_reconcile(known, result, seconds)
