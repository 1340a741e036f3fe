"""Drift checks of every installation, from one task.

Each installation is checked once per ``spec.driftPolicy.interval``; the intervals of one workspace
are aligned (``drift_slot``), so its checks fall together and share one list per kind. A check
that failed for a passing reason runs again after its backoff, and at once when its platform's
circuit closes after an outage.

One task rather than a kopf daemon per installation: a daemon keeps kopf's whole copy of its
object, managedFields included, and a task with its frames and kopf's handler context, for every
installation, which was most of a fleet's memory. Here an installation is one entry: the object as
the watch last delivered it, without managedFields, kept as compact JSON (a fifth of the same object
as Python dicts, and parsed again only by a check that runs), and the few fields the schedule reads.
No kopf types: the handlers feed it (``observe``) and give it the run itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from bundle_operator.k8s.conditions import is_true
from bundle_operator.k8s.kube import KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.reconcile import Retry, backoff, platform_key
from bundle_operator.platform.gate import CallGate

log = logging.getLogger(__name__)

KIND: Final = "BundleInstallation"
TICK_SECONDS = 5.0
# Checks at once: they mostly share their workspace's lists, and the platform's call gate bounds
# what they send anyway.
CHECKS_AT_ONCE = 16

# Anchored, and read as tokens after: a search for number-and-unit from every digit of a long run
# without a unit is quadratic. The CRD's pattern sets no length: a number of thousands of digits is
# more than int() takes, and more than any interval anyone means.
_DURATION = re.compile(r"\A(?:[0-9]+[smh])+\Z")
_TOKEN = re.compile(r"[0-9]+|[smh]")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
# A year: a longer interval is read as this, never as an overflow.
MAX_INTERVAL_SECONDS = 366 * 24 * 3600.0


def parse_interval(text: str | None, default: float = 300.0) -> float:
    """``30s``, ``5m``, ``1h30m`` in seconds (at least 5, at most a year); ``default`` for anything else."""
    if not text or not _DURATION.match(text):
        return default
    tokens = _TOKEN.findall(text)
    seconds = 0.0
    for number, unit in zip(tokens[::2], tokens[1::2], strict=True):
        if len(number.lstrip("0")) > 12:
            return MAX_INTERVAL_SECONDS
        seconds += int(number) * _UNIT_SECONDS[unit]
    return min(max(5.0, seconds), MAX_INTERVAL_SECONDS) if seconds else default


def drift_slot(now: float, interval: float, platform_url: str, workspace: str) -> float:
    """When the current drift interval of a workspace began (on ``now``'s clock).

    Intervals are aligned per (platform, workspace): every installation there checks once per
    interval, right after the same boundary, and the first check's lists serve the rest. The
    offset spreads the workspaces' boundaries over the interval.
    """
    return _slot(now, interval, slot_offset(interval, platform_url, workspace))


def slot_offset(interval: float, platform_url: str, workspace: str) -> float:
    """Where in each interval the boundaries of a (platform, workspace) fall (see ``drift_slot``)."""
    seed = hashlib.sha256(f"{platform_key(platform_url)}|{workspace}".encode()).digest()
    return int.from_bytes(seed[:8], "big") / 2**64 * interval


def _slot(now: float, interval: float, offset: float) -> float:
    return offset + (now - offset) // interval * interval


def stalled_and_seen(obj: Mapping[str, Any]) -> bool:
    """Stalled on its current generation: nothing changes until the user acts, which runs it."""
    status = obj.get("status") or {}
    return status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation") and is_true(
        status, "Stalled"
    )


def trimmed(body: Mapping[str, Any]) -> dict[str, Any]:
    """The object without ``metadata.managedFields`` (about a third of a server-side-applied one)."""
    meta = body.get("metadata") or {}
    return {**body, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


@dataclass(slots=True)
class Schedule:
    """What the schedule reads of an installation, taken once per delivered version."""

    namespace: str
    name: str
    url: str
    interval: float
    offset: float  # slot_offset of its interval, platform and workspace
    disabled: bool  # driftPolicy.mode Disabled
    deleting: bool
    stalled: bool  # stalled_and_seen


@dataclass(slots=True)
class Entry:
    """One installation: the object as last delivered, and where its checks stand (monotonic)."""

    raw: bytes  # the object without managedFields, compact JSON
    schedule: Schedule
    last: float  # when its last check started, or when it was first seen
    retry_at: float | None = None
    failed_at: float = 0.0
    attempt: int = 0
    busy: bool = False

    @property
    def body(self) -> dict[str, Any]:
        """The object as last delivered (a fresh copy)."""
        return json.loads(self.raw)  # type: ignore[no-any-return]


# (uid, attempt, the start of its interval, when it was found due) -> the result, or None when it
# did not run after all (deleted, or run by a handler meanwhile). It takes the object's lock and
# reads the object once it holds it (``DriftClock.body_of``).
Run = Callable[[str, int, float, float], Awaitable[ReconcileResult | None]]


class DriftClock:
    """Schedules every installation's drift check and runs them, ``CHECKS_AT_ONCE`` at a time.

    ``last_run`` and ``failed_at`` are shared with the handlers (uid -> monotonic time): a reconcile
    that ran since an interval began counts as its check, and one that failed for its platform is
    checked again once the platform is back.
    """

    def __init__(
        self,
        run: Run,
        *,
        platform_url: Callable[[Mapping[str, Any]], str],
        gate_for: Callable[[str], CallGate | None],
        last_run: dict[str, float],
        failed_at: dict[str, float],
        touch: Callable[[], None] = lambda: None,
        tick: float = TICK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._run = run
        self._platform_url = platform_url
        self._gate_for = gate_for
        self._last_run = last_run
        self._failed_at = failed_at
        self._touch = touch
        self._tick = tick
        self._clock = clock
        self.entries: dict[str, Entry] = {}
        self._slots = asyncio.Semaphore(CHECKS_AT_ONCE)
        self._checks: set[asyncio.Task[None]] = set()

    def observe(self, uid: str, body: Mapping[str, Any] | None) -> None:
        """The watch delivered the installation (``None``: it was deleted)."""
        if body is None:
            self.entries.pop(uid, None)
            return
        raw = json.dumps(trimmed(body), separators=(",", ":")).encode()
        schedule = self._schedule(body)
        entry = self.entries.get(uid)
        if entry is None:
            self.entries[uid] = Entry(raw, schedule, last=self._clock())
        else:
            entry.raw, entry.schedule = raw, schedule

    def _schedule(self, body: Mapping[str, Any]) -> Schedule:
        meta, spec = body.get("metadata") or {}, body.get("spec") or {}
        policy = spec.get("driftPolicy") or {}
        url = self._platform_url(spec)
        interval = parse_interval(policy.get("interval"))
        return Schedule(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            url=url,
            interval=interval,
            offset=slot_offset(interval, url, str(spec.get("workspace", ""))),
            disabled=policy.get("mode") == "Disabled",
            deleting=bool(meta.get("deletionTimestamp")),
            stalled=stalled_and_seen(body),
        )

    def body_of(self, uid: str) -> dict[str, Any] | None:
        """The installation as the watch last delivered it (a fresh copy), or None when gone."""
        entry = self.entries.get(uid)
        return entry.body if entry is not None else None

    def forget_all(self) -> None:
        """kopf stopped (leadership lost, shutdown): what it delivered may go stale."""
        self.entries.clear()

    async def run(self) -> None:
        """Check what is due every tick, or as soon as a platform an installation waits for is back."""
        try:
            while True:
                await self._nap()
                self._touch()
                now = self._clock()
                for uid, entry in list(self.entries.items()):
                    slot = self._due(uid, entry, now)
                    if slot is not None:
                        entry.busy = True
                        task = asyncio.create_task(self._check(uid, entry, slot, now))
                        self._checks.add(task)
                        task.add_done_callback(self._checks.discard)
        finally:
            for task in list(self._checks):
                task.cancel()

    def _pending(self, uid: str, entry: Entry) -> float | None:
        """When its last run failed, if it has not run well since."""
        failed = max(entry.failed_at, self._failed_at.get(uid, 0.0))
        return failed if failed > self._last_run.get(uid, 0.0) else None

    async def _nap(self) -> None:
        waits = {
            gate.recovered()
            for uid, entry in self.entries.items()
            if self._pending(uid, entry) is not None
            and (gate := self._gate_for(entry.schedule.url)) is not None
        }
        if not waits:
            await asyncio.sleep(self._tick)
            return
        tasks = [asyncio.ensure_future(event.wait()) for event in waits]
        try:
            await asyncio.wait(tasks, timeout=self._tick, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()

    def _due(self, uid: str, entry: Entry, now: float) -> float | None:
        """The start of the interval to check it for, or None when it is not due."""
        schedule = entry.schedule
        if entry.busy or schedule.disabled:
            return None
        if schedule.deleting:
            return None  # its finalizer's run uninstalls it
        slot = _slot(now, schedule.interval, schedule.offset)
        last_run = self._last_run.get(uid, 0.0)
        # Anything that ran since the slot began (a reconcile, an earlier check) counts as its check.
        due = max(entry.last, last_run) < slot
        retry_due = entry.retry_at is not None and now >= entry.retry_at and last_run < entry.failed_at
        # The platform came back after this installation's last failure: run now, whatever waits.
        failed = self._pending(uid, entry)
        gate = self._gate_for(schedule.url) if failed is not None else None
        woken = failed is not None and gate is not None and gate.recovered_at > failed
        if not (due or retry_due or woken):
            return None
        entry.last, entry.retry_at = now, None
        if schedule.stalled:
            return None  # nothing changes until the user acts, and that runs it
        return slot

    async def _check(self, uid: str, entry: Entry, slot: float, now: float) -> None:
        # The run counts itself in the metrics (envelope.py); here only its retry is decided.
        where = object_extra(KIND, entry.schedule.namespace, entry.schedule.name, uid)
        try:
            async with self._slots:
                try:
                    await self._run(uid, entry.attempt, slot, now)
                    entry.attempt = 0
                except Retry as exc:
                    self._failed(entry, now, exc.delay)
                    log.info("drift check will be retried in %.0f s: %s", exc.delay, exc, extra=where)
                except KubeError as exc:
                    delay = self._failed(entry, now, backoff(entry.attempt))
                    log.info(
                        "drift check will be retried in %.0f s: the Kubernetes API answered %s %s",
                        delay,
                        exc.status,
                        exc.reason,
                        extra=where,
                    )
                except Exception:
                    self._failed(entry, now, backoff(entry.attempt))
                    log.exception("drift check failed", extra=where)
        finally:
            entry.busy = False

    @staticmethod
    def _failed(entry: Entry, now: float, delay: float) -> float:
        entry.failed_at, entry.retry_at, entry.attempt = now, now + delay, entry.attempt + 1
        return delay
