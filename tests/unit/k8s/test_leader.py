"""Leader election on a Lease without a cluster: an in-memory Lease API that enforces
resourceVersion like the API server, a fake clock, and candidates that take, renew, lose and
release the Lease. The property test drives random schedules of candidates, crashes, restarts,
partitions and time, and checks that no two candidates are ever entitled to reconcile at once."""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from bundle_operator.k8s.kube import Connection, Kube, KubeError
from bundle_operator.k8s.process import options as run_options
from bundle_operator.k8s.process import run
from bundle_operator.k8s.process.leader import (
    LEASE_API_VERSION,
    KubeLeases,
    LeaderElector,
    LeaseConfig,
    LostLease,
    Role,
    default_identity,
    default_namespace,
    lease_timing_problem,
    micro_time,
)
from bundle_operator.k8s.process.metrics import Metrics

NS = "operators"
NAME = "bundle-operator"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


# --- fakes ------------------------------------------------------------------------------------


class FakeLeases:
    """Leases in memory with the API server's write rules: create fails with 409 when the object
    exists, replace fails with 409 unless ``metadata.resourceVersion`` is the stored one."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._versions = itertools.count(1)
        self.unreachable: set[str] = set()  # identities whose calls fail in transport
        self.hang = False
        self.writes = 0
        # When set, every get waits for it: lets two reads happen before either write.
        self.gate: asyncio.Event | None = None
        self.caller = ""

    def _enter(self) -> None:
        if self.caller in self.unreachable:
            raise KubeError(0, "Unreachable", "ConnectError")

    async def _maybe_hang(self) -> None:
        if self.hang:
            await asyncio.Event().wait()

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._enter()
        await self._maybe_hang()
        if self.gate is not None:
            await self.gate.wait()
        stored = self.objects.get((namespace, name))
        return copy.deepcopy(stored) if stored is not None else None

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._enter()
        await asyncio.sleep(0)
        name = body["metadata"]["name"]
        assert body["apiVersion"] == LEASE_API_VERSION and body["kind"] == "Lease"
        assert "resourceVersion" not in body["metadata"]
        if (namespace, name) in self.objects:
            raise KubeError(409, "AlreadyExists", f'leases.coordination.k8s.io "{name}" already exists')
        stored = copy.deepcopy(body)
        stored["metadata"].update(
            namespace=namespace, resourceVersion=str(next(self._versions)), uid=f"uid-{name}"
        )
        self.objects[(namespace, name)] = stored
        self.writes += 1
        return copy.deepcopy(stored)

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._enter()
        await asyncio.sleep(0)
        stored = self.objects.get((namespace, name))
        if stored is None:
            raise KubeError(404, "NotFound", "no such lease")
        sent = body["metadata"].get("resourceVersion")
        assert sent, "every update of the Lease must be preconditioned on its resourceVersion"
        if sent != stored["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "the object has been modified")
        new = copy.deepcopy(body)
        new["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[(namespace, name)] = new
        self.writes += 1
        return copy.deepcopy(new)

    def spec(self, name: str = NAME) -> dict[str, Any]:
        spec: dict[str, Any] = self.objects[(NS, name)]["spec"]
        return spec


class CallerApi:
    """One candidate's view of the shared fake: tags calls with who makes them."""

    def __init__(self, leases: FakeLeases, identity: str) -> None:
        self.leases = leases
        self.identity = identity

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.leases.caller = self.identity
        return await self.leases.get(namespace, name)

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.leases.caller = self.identity
        return await self.leases.create(namespace, body)

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.leases.caller = self.identity
        return await self.leases.replace(namespace, name, body)


class FakeTime:
    """A monotonic clock that ``sleep`` advances; ``limit`` ends a loop that would run forever and
    ``at(when, action)`` runs an action once a sleep reaches ``when``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.limit: float | None = None
        self._actions: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def at(self, when: float, action: Callable[[], None]) -> None:
        self._actions.append((when, action))

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        due = [item for item in self._actions if item[0] <= self.now]
        for item in due:
            self._actions.remove(item)
            item[1]()
        if self.limit is not None and self.now > self.limit:
            raise TimeUp
        await asyncio.sleep(0)


class TimeUp(Exception):
    pass


@dataclass
class Candidate:
    elector: LeaderElector
    roles: list[Role]


def candidate(
    leases: FakeLeases,
    identity: str,
    clock: FakeTime,
    *,
    lease: int = 15,
    renew: float = 10.0,
    retry: float = 2.0,
    wall_offset: timedelta = timedelta(0),
) -> Candidate:
    roles: list[Role] = []
    config = LeaseConfig(NS, NAME, identity, lease_seconds=lease, renew_seconds=renew, retry_seconds=retry)
    base = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    elector = LeaderElector(
        CallerApi(leases, identity),
        config,
        clock=clock.clock,
        sleep=clock.sleep,
        now=lambda: base + wall_offset + timedelta(seconds=clock.now),
        on_role=roles.append,
    )
    return Candidate(elector, roles)


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


def attempt(c: Candidate) -> bool:
    return asyncio.run(c.elector.try_acquire_or_renew())


# --- taking, holding, expiring ----------------------------------------------------------------


def test_the_first_candidate_creates_the_lease_and_leads(leases: FakeLeases, clock: FakeTime) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    assert a.elector.leading and a.roles == [Role.LEADER]
    spec = leases.spec()
    assert spec["holderIdentity"] == "pod-a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"]
    obj = leases.objects[(NS, NAME)]
    assert obj["apiVersion"] == "coordination.k8s.io/v1" and obj["kind"] == "Lease"


def test_renewal_moves_renew_time_and_keeps_acquire_time(leases: FakeLeases, clock: FakeTime) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    first = dict(leases.spec())
    clock.now += 2
    assert attempt(a)
    spec = leases.spec()
    assert spec["acquireTime"] == first["acquireTime"]
    assert spec["renewTime"] > first["renewTime"]
    assert spec["leaseTransitions"] == 0
    assert a.roles == [Role.LEADER]  # one change, not one per renewal


def test_a_standby_waits_while_the_leader_renews(leases: FakeLeases, clock: FakeTime) -> None:
    a, b = candidate(leases, "pod-a", clock), candidate(leases, "pod-b", clock)
    assert attempt(a)
    for _ in range(60):  # two minutes of renewals every 2 s
        clock.now += 2
        assert attempt(a)
        assert not attempt(b)
    assert not b.elector.leading and b.roles == []
    assert b.elector.holder == "pod-a"
    assert b.elector.in_contact()


def test_a_standby_takes_over_a_lease_duration_after_the_last_change_it_saw(
    leases: FakeLeases, clock: FakeTime
) -> None:
    a, b = candidate(leases, "pod-a", clock), candidate(leases, "pod-b", clock)
    assert attempt(a)
    clock.now += 2
    assert attempt(a)  # the last renewal: then pod-a is killed
    clock.now += 1
    assert not attempt(b)  # b first sees this record now
    seen = clock.now
    clock.now = seen + 14.9
    assert not attempt(b)
    clock.now = seen + 15
    assert attempt(b)
    spec = leases.spec()
    assert spec["holderIdentity"] == "pod-b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == spec["renewTime"]
    assert b.roles == [Role.LEADER]


def test_expiry_uses_the_standbys_clock_not_the_holders_renew_time(
    leases: FakeLeases, clock: FakeTime
) -> None:
    # pod-a's wall clock is an hour behind: its renewTime looks ancient to anyone comparing clocks.
    a = candidate(leases, "pod-a", clock, wall_offset=timedelta(hours=-1))
    b = candidate(leases, "pod-b", clock)
    assert attempt(a)
    assert not attempt(b)
    clock.now += 14
    assert not attempt(b)  # still within the lease duration of b's own observation
    clock.now += 1
    assert attempt(b)


def test_a_restarted_candidate_with_the_same_pod_name_takes_its_lease_back_at_once(
    leases: FakeLeases, clock: FakeTime
) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    acquired = leases.spec()["acquireTime"]
    clock.now += 3
    restarted = candidate(leases, "pod-a", clock)  # the container restarted; the pod name stays
    assert attempt(restarted)
    spec = leases.spec()
    assert spec["holderIdentity"] == "pod-a"
    assert spec["acquireTime"] == acquired and spec["leaseTransitions"] == 0


def test_a_lease_held_by_another_after_a_restart_is_waited_out(leases: FakeLeases, clock: FakeTime) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    clock.now += 3600  # pod-a died an hour ago; b only starts now and has never seen the lease change
    b = candidate(leases, "pod-b", clock)
    assert not attempt(b)
    clock.now += 15
    assert attempt(b)


# --- races ------------------------------------------------------------------------------------


async def _race(leases: FakeLeases, contenders: list[Candidate]) -> list[bool]:
    gate = asyncio.Event()
    leases.gate = gate
    tasks = [asyncio.create_task(c.elector.try_acquire_or_renew()) for c in contenders]
    await asyncio.sleep(0)  # every contender has read... once the gate opens
    gate.set()
    results = await asyncio.gather(*tasks)
    leases.gate = None
    return list(results)


def test_two_candidates_creating_the_lease_at_once_only_one_wins(leases: FakeLeases, clock: FakeTime) -> None:
    b, c = candidate(leases, "pod-b", clock), candidate(leases, "pod-c", clock)
    results = asyncio.run(_race(leases, [b, c]))
    assert sorted(results) == [False, True]
    winner = "pod-b" if results[0] else "pod-c"
    assert leases.spec()["holderIdentity"] == winner
    assert leases.writes == 1


def test_two_candidates_taking_an_expired_lease_at_once_only_one_wins(
    leases: FakeLeases, clock: FakeTime
) -> None:
    a, b, c = (candidate(leases, name, clock) for name in ("pod-a", "pod-b", "pod-c"))
    assert attempt(a)
    assert not attempt(b) and not attempt(c)
    clock.now += 16  # pod-a is gone; both see the lease expired
    results = asyncio.run(_race(leases, [b, c]))
    assert sorted(results) == [False, True]
    assert leases.spec()["leaseTransitions"] == 1
    loser = c if results[0] else b
    assert not loser.elector.leading
    # The loser's next read shows the fresh holder: it waits a whole lease duration again.
    assert not attempt(loser)
    clock.now += 14
    assert not attempt(loser)


# --- renewing, losing, releasing --------------------------------------------------------------


def test_keep_leading_loses_the_lease_at_the_renew_deadline_when_the_api_is_unreachable(
    leases: FakeLeases, clock: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    started = clock.now
    leases.unreachable.add("pod-a")
    with (
        caplog.at_level(logging.INFO, "bundle_operator.k8s.process.leader"),
        pytest.raises(LostLease, match="deadline"),
    ):
        asyncio.run(a.elector.keep_leading())
    # Attempts every 2 s fail; at 10 s without a renewal the leader gives up, not before.
    assert clock.now - started == pytest.approx(10.0)
    assert a.roles == [Role.LEADER, Role.STANDBY]
    assert not a.elector.leading
    assert any("lost the lease" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    assert sum("renewing the lease failed" in r.getMessage() for r in caplog.records) == 4


def test_keep_leading_loses_the_lease_at_once_when_another_holds_it(
    leases: FakeLeases, clock: FakeTime
) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    started = clock.now
    stolen = copy.deepcopy(leases.objects[(NS, NAME)])
    stolen["spec"]["holderIdentity"] = "intruder"
    asyncio.run(leases.replace(NS, NAME, stolen))
    with pytest.raises(LostLease, match="held by intruder"):
        asyncio.run(a.elector.keep_leading())
    assert clock.now - started == pytest.approx(2.0)
    assert leases.spec()["holderIdentity"] == "intruder"  # the loser writes nothing


def test_keep_leading_rides_out_failures_shorter_than_the_renew_deadline(
    leases: FakeLeases, clock: FakeTime
) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    leases.unreachable.add("pod-a")
    clock.at(clock.now + 8, leases.unreachable.clear)  # 8 s of failures, under the 10 s deadline
    clock.limit = clock.now + 60
    with pytest.raises(TimeUp):
        asyncio.run(a.elector.keep_leading())
    assert a.elector.leading and a.roles == [Role.LEADER]


def test_an_attempt_that_hangs_is_cut_off_at_the_renew_deadline() -> None:
    leases = FakeLeases()
    config = LeaseConfig(NS, NAME, "pod-a", lease_seconds=1, renew_seconds=0.4, retry_seconds=0.1)
    elector = LeaderElector(leases, config)  # the real clock: the hang is real too

    async def scenario() -> float:
        assert await elector.try_acquire_or_renew()
        leases.hang = True
        started = time.monotonic()
        with pytest.raises(LostLease):
            await elector.keep_leading()
        return time.monotonic() - started

    took = asyncio.run(scenario())
    assert 0.25 <= took < 0.9


def test_release_hands_the_lease_to_a_standby_at_its_next_try(
    leases: FakeLeases, clock: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = candidate(leases, "pod-a", clock), candidate(leases, "pod-b", clock)
    assert attempt(a)
    assert not attempt(b)
    with caplog.at_level(logging.INFO, "bundle_operator.k8s.process.leader"):
        assert asyncio.run(a.elector.release())
    spec = leases.spec()
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert a.roles == [Role.LEADER, Role.STANDBY]
    assert attempt(b)  # no waiting for the lease duration
    assert leases.spec()["leaseTransitions"] == 1
    assert any("released the lease" in r.getMessage() for r in caplog.records)
    assert not asyncio.run(a.elector.release())  # not the leader any more: nothing to release


def test_release_never_overwrites_another_holder(leases: FakeLeases, clock: FakeTime) -> None:
    a = candidate(leases, "pod-a", clock)
    assert attempt(a)
    stolen = copy.deepcopy(leases.objects[(NS, NAME)])
    stolen["spec"]["holderIdentity"] = "pod-b"
    asyncio.run(leases.replace(NS, NAME, stolen))
    assert not asyncio.run(a.elector.release())
    assert leases.spec()["holderIdentity"] == "pod-b"


def test_acquire_waits_as_a_standby_until_the_lease_expires(leases: FakeLeases, clock: FakeTime) -> None:
    a, b = candidate(leases, "pod-a", clock), candidate(leases, "pod-b", clock)
    assert attempt(a)  # and then pod-a dies
    started = clock.now
    assert asyncio.run(b.elector.acquire(asyncio.Event()))
    # Tries at 0, 2, ..., 14 see a valid lease; the try at 16 s is the first past 15 s.
    assert clock.now - started == pytest.approx(16.0)
    assert b.elector.leading


def test_acquire_returns_false_when_stopped_as_a_standby(leases: FakeLeases, clock: FakeTime) -> None:
    a, b = candidate(leases, "pod-a", clock), candidate(leases, "pod-b", clock)
    assert attempt(a)

    async def scenario() -> bool:
        stop = asyncio.Event()

        async def renew_then_stop() -> None:
            for _ in range(5):
                await a.elector.try_acquire_or_renew()
                await asyncio.sleep(0)
            stop.set()

        stopper = asyncio.create_task(renew_then_stop())
        clock.limit = clock.now + 10  # a standby keeps waiting: a leader renews all the time
        acquired = await b.elector.acquire(stop)
        await stopper
        return acquired

    assert asyncio.run(scenario()) is False
    assert b.roles == []


def test_acquire_keeps_trying_through_api_errors(leases: FakeLeases, clock: FakeTime) -> None:
    b = candidate(leases, "pod-b", clock)
    leases.unreachable.add("pod-b")
    started = clock.now
    clock.at(started + 6, leases.unreachable.clear)
    assert asyncio.run(b.elector.acquire())
    assert clock.now - started == pytest.approx(6.0)
    assert not b.elector.in_contact(within=-1)
    assert b.elector.in_contact()


# --- the invariant, under random schedules ----------------------------------------------------


@dataclass
class Step:
    who: int
    advance: float
    action: str  # "try", "crash", "restart", "partition", "heal", "release"


steps = st.lists(
    st.builds(
        Step,
        who=st.sampled_from([0, 1, 0, 1, 2]),
        advance=st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 4.0, 9.0, 16.0]),
        action=st.sampled_from(["try"] * 16 + ["crash", "restart", "partition", "heal", "release"]),
    ),
    max_size=80,
)


@settings(max_examples=500, deadline=None)
@given(schedule=steps)
def test_no_two_candidates_are_ever_entitled_to_reconcile_at_once(schedule: list[Step]) -> None:
    """A leader may reconcile until its renew deadline after the start of its last successful
    attempt; whoever takes the Lease must find every other leader past that point."""
    leases, clock = FakeLeases(), FakeTime()
    names = ["pod-a", "pod-b", "pod-c"]
    members = [candidate(leases, name, clock) for name in names]
    crashed = [False, False, False]
    entitled_until: dict[str, float] = {}  # per process (identity), from successful attempts
    processes = [0, 0, 0]

    async def play() -> None:
        for step in schedule:
            clock.now += step.advance
            me = members[step.who]
            key = f"{names[step.who]}#{processes[step.who]}"
            if step.action == "crash":
                crashed[step.who] = True
                entitled_until.pop(key, None)  # a dead process reconciles nothing
                continue
            if step.action == "restart":  # the same pod name, a new process
                crashed[step.who] = False
                entitled_until.pop(key, None)
                processes[step.who] += 1
                members[step.who] = candidate(leases, names[step.who], clock)
                continue
            if step.action == "partition":
                leases.unreachable.add(names[step.who])
                continue
            if step.action == "heal":
                leases.unreachable.discard(names[step.who])
                continue
            if crashed[step.who]:
                continue
            if step.action == "release":
                if me.elector.leading:
                    entitled_until.pop(key, None)  # run.py releases only after kopf stopped
                    await me.elector.release()
                continue
            # A leader past its renew deadline has stopped (keep_leading raised); the process exits.
            if me.elector.leading and clock.now >= entitled_until.get(key, clock.now):
                crashed[step.who] = True
                entitled_until.pop(key, None)
                continue
            started = clock.now
            try:
                won = await me.elector.try_acquire_or_renew()
            except KubeError:
                continue
            if not won:
                if me.elector.leading and me.elector.holder not in ("", names[step.who]):
                    crashed[step.who] = True  # keep_leading raises LostLease: the process exits
                    entitled_until.pop(key, None)
                continue
            for other, until in entitled_until.items():
                if other != key:
                    assert until <= started, f"{key} leads at {started} while {other} may until {until}"
            entitled_until[key] = started + me.elector.config.renew_seconds

    asyncio.run(play())


# --- identity, namespace, settings ------------------------------------------------------------


def test_identity_is_the_pod_name_else_host_and_pid() -> None:
    assert default_identity({"POD_NAME": "bundle-operator-7d9c-abcde"}) == "bundle-operator-7d9c-abcde"
    fallback = default_identity({})
    host, pid = fallback.rsplit("_", 1)
    assert host and pid.isdigit()


def test_namespace_comes_from_the_env_then_the_service_account_then_default(tmp_path: Path) -> None:
    account = tmp_path / "namespace"
    account.write_text("bundle-system\n")
    assert default_namespace({"POD_NAMESPACE": "ops"}, account) == "ops"
    assert default_namespace({}, account) == "bundle-system"
    assert default_namespace({}, tmp_path / "missing") == "default"


def test_durations_must_nest() -> None:
    assert lease_timing_problem(15, 10, 2) is None
    assert "renew deadline" in (lease_timing_problem(10, 10, 2) or "")
    assert "retry period" in (lease_timing_problem(15, 2, 2) or "")
    assert lease_timing_problem(15, 10, 0) is not None
    with pytest.raises(ValueError):
        LeaseConfig(NS, NAME, "pod-a", lease_seconds=5, renew_seconds=10)
    with pytest.raises(ValueError):
        LeaseConfig(NS, NAME, "")


def test_micro_time_has_six_fractional_digits_in_utc() -> None:
    moment = datetime(2026, 5, 1, 14, 30, 5, 1234, tzinfo=UTC)
    assert micro_time(moment) == "2026-05-01T14:30:05.001234Z"
    assert MICRO_TIME.match(micro_time(datetime.now(UTC)))


def _parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run_options.add_arguments(parser)
    return parser.parse_args(["--namespace", "apps", *flags])


def test_flags_default_to_a_single_replica_without_election() -> None:
    assert run_options.options_from(_parse()).leader_election is None


def test_flags_with_leader_election_default_like_controller_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "bundle-system")
    election = run_options.options_from(_parse("--leader-election")).leader_election
    assert election == run_options.LeaderElectionOptions(
        namespace="bundle-system",
        lease_id="bundle-operator",
        lease_seconds=15,
        renew_seconds=10.0,
        retry_seconds=2.0,
    )
    election = run_options.options_from(
        _parse(
            "--leader-election",
            "--leader-election-namespace",
            "ops",
            "--leader-election-id",
            "bundles-eu",
            "--leader-election-lease-seconds",
            "8",
            "--leader-election-renew-seconds",
            "5",
            "--leader-election-retry-seconds",
            "1",
        )
    ).leader_election
    assert election == run_options.LeaderElectionOptions("ops", "bundles-eu", 8, 5.0, 1.0)


def test_flags_refuse_a_renew_deadline_not_shorter_than_the_lease() -> None:
    with pytest.raises(SystemExit, match="lease duration"):
        run_options.options_from(_parse("--leader-election", "--leader-election-renew-seconds", "15"))


def test_readiness_of_a_standby_follows_its_contact_with_the_lease(
    leases: FakeLeases, clock: FakeTime
) -> None:
    a, b = candidate(leases, "pod-a", clock), candidate(leases, "pod-b", clock)
    kopf_ready = asyncio.Event()
    ready_a, ready_b = run._readiness(kopf_ready, a.elector), run._readiness(kopf_ready, b.elector)
    assert not ready_b()  # never reached the lease yet
    assert attempt(a)
    assert not ready_a()  # leading, but kopf is not up yet
    kopf_ready.set()
    assert ready_a()
    assert not attempt(b)
    assert ready_b()  # a standby that can take over
    clock.now += 16
    leases.unreachable.add("pod-b")
    assert not ready_b()


def test_the_leader_gauge_exists() -> None:
    metrics = Metrics(CollectorRegistry())
    assert metrics.registry.get_sample_value("bundle_operator_leader") == 0.0
    metrics.leader.set(1)
    assert metrics.registry.get_sample_value("bundle_operator_leader") == 1.0


# --- over HTTP, the way the operator calls the API server --------------------------------------


def lease_app(leases: FakeLeases, seen: list[tuple[str, str, str]]) -> web.Application:
    """The Lease routes of the API server, backed by ``leases``; ``seen`` records each request."""
    prefix = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"

    def failure(exc: KubeError) -> web.Response:
        body = {"kind": "Status", "reason": exc.reason, "message": exc.message}
        return web.json_response(body, status=exc.status)

    async def get(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, request.content_type))
        obj = await leases.get(request.match_info["ns"], request.match_info["name"])
        if obj is None:
            return failure(KubeError(404, "NotFound", "no such lease"))
        return web.json_response(obj)

    async def post(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, request.content_type))
        try:
            created = await leases.create(request.match_info["ns"], await request.json())
        except KubeError as exc:
            return failure(exc)
        return web.json_response(created, status=201)

    async def put(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, request.content_type))
        ns, name = request.match_info["ns"], request.match_info["name"]
        try:
            stored = await leases.replace(ns, name, await request.json())
        except KubeError as exc:
            return failure(exc)
        return web.json_response(stored)

    app = web.Application()
    app.router.add_get(prefix + "/{name}", get)
    app.router.add_post(prefix, post)
    app.router.add_put(prefix + "/{name}", put)
    return app


def test_kube_leases_speaks_the_lease_api(leases: FakeLeases) -> None:
    seen: list[tuple[str, str, str]] = []

    async def scenario() -> None:
        runner = web.AppRunner(lease_app(leases, seen))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        kube_a = Kube(Connection(host=f"http://{host}:{port}", verify=False))
        kube_b = Kube(Connection(host=f"http://{host}:{port}", verify=False))
        try:
            a = LeaderElector(KubeLeases(kube_a), LeaseConfig(NS, NAME, "pod-a"))
            b = LeaderElector(KubeLeases(kube_b), LeaseConfig(NS, NAME, "pod-b"))
            assert await a.try_acquire_or_renew()  # GET 404, POST
            assert await a.try_acquire_or_renew()  # GET, PUT
            assert not await b.try_acquire_or_renew()  # GET only
            assert await a.release()  # GET, PUT
            assert await b.try_acquire_or_renew()  # GET, PUT
            stale = copy.deepcopy(leases.objects[(NS, NAME)])
            stale["metadata"]["resourceVersion"] = "1"
            with pytest.raises(KubeError) as refused:
                await KubeLeases(kube_a).replace(NS, NAME, stale)
            assert refused.value.conflict
        finally:
            await kube_a.aclose()
            await kube_b.aclose()
            await runner.cleanup()

    asyncio.run(scenario())
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    assert [(method, p) for method, p, _ in seen] == [
        ("GET", f"{path}/{NAME}"),
        ("POST", path),
        ("GET", f"{path}/{NAME}"),
        ("PUT", f"{path}/{NAME}"),
        ("GET", f"{path}/{NAME}"),
        ("GET", f"{path}/{NAME}"),
        ("PUT", f"{path}/{NAME}"),
        ("GET", f"{path}/{NAME}"),
        ("PUT", f"{path}/{NAME}"),
        ("PUT", f"{path}/{NAME}"),
    ]
    assert {ctype for method, _, ctype in seen if method != "GET"} == {"application/json"}
    assert leases.spec()["holderIdentity"] == "pod-b"
