"""The drift clock: when an installation's check is due, what skips it, and what a failure does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bundle_operator.k8s.installation.drift_clock import DriftClock, drift_slot, trimmed
from bundle_operator.k8s.reconcile import Retry

URL = "http://platform"

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Gate:
    """What the clock reads of a call gate: when the circuit closed last, and its event."""

    def __init__(self) -> None:
        self.recovered_at = 0.0
        self.event = asyncio.Event()

    def recovered(self) -> asyncio.Event:
        return self.event


def installation(uid: str = "u1", *, interval: str = "10s", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "name": uid,
            "namespace": "ns",
            "generation": 1,
            "managedFields": [{"x": 1}],
        },
        "spec": {"workspace": "acme", "driftPolicy": {"interval": interval, "mode": "Warn"}, **extra},
        "status": {},
    }


def make(clock: Clock, gate: Gate | None = None) -> tuple[DriftClock, list[str], dict[str, float]]:
    ran: list[str] = []
    last_run: dict[str, float] = {}

    async def run(uid: str, attempt: int, slot: float, decided: float) -> str:
        ran.append(uid)
        last_run[uid] = clock()
        return "success"

    drift = DriftClock(
        run,  # type: ignore[arg-type]
        platform_url=lambda spec: URL,
        gate_for=lambda url: gate,  # type: ignore[arg-type,return-value]
        last_run=last_run,
        failed_at={},
        clock=clock,
    )
    return drift, ran, last_run


def next_slot(now: float) -> float:
    return drift_slot(now, 10.0, URL, "acme") + 10.0


def test_a_new_installation_is_checked_first_in_the_next_interval() -> None:
    clock = Clock()
    drift, _, _ = make(clock)
    drift.observe("u1", installation())
    entry = drift.entries["u1"]
    assert drift._due("u1", entry, clock.now) is None
    clock.now = next_slot(clock.now) + 0.1
    assert drift._due("u1", entry, clock.now) is not None
    entry.busy = False
    assert drift._due("u1", entry, clock.now + 1) is None  # once per interval


def test_a_reconcile_since_the_interval_began_counts_as_its_check() -> None:
    clock = Clock()
    drift, _, last_run = make(clock)
    drift.observe("u1", installation())
    clock.now = next_slot(clock.now) + 0.5
    last_run["u1"] = clock.now - 0.2
    assert drift._due("u1", drift.entries["u1"], clock.now) is None


@pytest.mark.parametrize(
    "change",
    [
        {"spec": {"workspace": "acme", "driftPolicy": {"interval": "10s", "mode": "Disabled"}}},
        {"metadata": {"uid": "u1", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
        {"status": {"observedGeneration": 1, "conditions": [{"type": "Stalled", "status": "True"}]}},
    ],
    ids=["disabled", "being-deleted", "stalled-on-its-generation"],
)
def test_what_is_never_checked(change: dict[str, Any]) -> None:
    clock = Clock()
    drift, _, _ = make(clock)
    body = installation()
    for key, value in change.items():
        body[key] = {**body[key], **value}
    drift.observe("u1", body)
    clock.now = next_slot(clock.now) + 0.1
    assert drift._due("u1", drift.entries["u1"], clock.now) is None


def test_the_entry_keeps_no_managed_fields_and_a_deleted_installation_goes() -> None:
    drift, _, _ = make(Clock())
    drift.observe("u1", installation())
    assert "managedFields" not in drift.entries["u1"].body["metadata"]
    assert trimmed(installation())["metadata"]["uid"] == "u1"
    drift.observe("u1", None)
    assert drift.body_of("u1") is None


def test_a_check_runs_from_the_newest_delivery_and_cannot_change_what_is_kept() -> None:
    clock = Clock()
    drift, _, _ = make(clock)
    drift.observe("u1", installation())
    first = drift.body_of("u1")
    assert first is not None
    first["spec"]["workspace"] = "changed by a run"
    assert drift.body_of("u1") == {**installation(), "metadata": trimmed(installation())["metadata"]}
    # A later delivery replaces the object and what the schedule reads of it: disabled now.
    drift.observe("u1", installation(driftPolicy={"mode": "Disabled"}))
    assert drift.body_of("u1")["spec"]["driftPolicy"] == {"mode": "Disabled"}  # type: ignore[index]
    clock.now = next_slot(clock.now) + 1
    assert drift._due("u1", drift.entries["u1"], clock.now) is None


async def test_checks_run_from_the_loop_and_a_failed_one_waits_for_its_backoff() -> None:
    clock = Clock()
    attempts: list[int] = []
    last_run: dict[str, float] = {}

    async def run(uid: str, attempt: int, slot: float, decided: float) -> str:
        attempts.append(attempt)
        if attempt == 0:
            raise Retry("platform away", 30.0)
        last_run[uid] = clock()
        return "success"

    drift = DriftClock(
        run,  # type: ignore[arg-type]
        platform_url=lambda spec: URL,
        gate_for=lambda url: None,
        last_run=last_run,
        failed_at={},
        clock=clock,
        tick=0.01,
    )
    drift.observe("u1", installation())
    clock.now = next_slot(clock.now) + 0.1
    loop = asyncio.create_task(drift.run())
    try:
        await asyncio.sleep(0.1)
        assert attempts == [0]  # failed; not again before its backoff
        clock.now += 31
        await asyncio.sleep(0.1)
        assert attempts == [0, 1]
    finally:
        loop.cancel()


def test_a_platform_back_from_an_outage_wakes_what_failed_on_it_at_once() -> None:
    clock = Clock()
    gate = Gate()
    drift, _, _ = make(clock, gate)
    drift.observe("u1", installation(interval="1h"))
    entry = drift.entries["u1"]
    entry.failed_at = clock.now  # its last run failed on the platform
    assert drift._due("u1", entry, clock.now + 1) is None
    gate.recovered_at = clock.now + 2
    assert drift._due("u1", entry, clock.now + 3) is not None
