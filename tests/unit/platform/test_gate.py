"""The platform call gate: a fair cap on calls in flight, and a pause for the whole platform."""

from __future__ import annotations

import asyncio

import pytest

from bundle_operator.platform.gate import OK, CallGate, CircuitOpen, Outcome
from tests.unit.platform.conftest import Clock

pytestmark = pytest.mark.anyio


async def test_never_more_calls_in_flight_than_the_limit() -> None:
    gate = CallGate(3)
    running = peak = 0

    async def call(owner: str) -> None:
        nonlocal running, peak
        async with gate.slot(owner) as report:
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001)
            running -= 1
            report(OK)

    await asyncio.gather(*(call(f"inst-{i % 4}") for i in range(40)))
    assert peak == 3
    assert gate.in_flight == 0 and gate.waiting == 0


async def test_a_big_installation_does_not_starve_a_small_one() -> None:
    gate = CallGate(2)
    order: list[str] = []
    release = asyncio.Event()

    async def call(owner: str) -> None:
        async with gate.slot(owner):
            order.append(owner)
            await release.wait()

    # The big installation queues 50 calls first; the small one asks for 2 afterwards.
    big = [asyncio.ensure_future(call("big")) for _ in range(50)]
    await asyncio.sleep(0)
    small = [asyncio.ensure_future(call("small")) for _ in range(2)]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*big, *small)
    # Turns alternate between owners: the small one's calls are among the first few, not the last.
    assert max(i for i, owner in enumerate(order) if owner == "small") < 6, order


async def test_retry_after_pauses_every_caller_then_one_probe_goes() -> None:
    clock = Clock()
    gate = CallGate(8, clock=clock)
    async with gate.slot("a") as report:
        report(Outcome(overloaded=True, retry_after=7))
    # Everybody is told at once, without a call, how long to wait.
    for owner in ("a", "b"):
        with pytest.raises(CircuitOpen) as refused:
            async with gate.slot(owner):
                pytest.fail("no call may go while the platform asked for a pause")
        assert refused.value.retry_after == pytest.approx(7)
    clock.now += 7
    async with gate.slot("b") as report:
        # This call is the probe: another caller waits for its answer.
        with pytest.raises(CircuitOpen):
            async with gate.slot("c"):
                pytest.fail("only the probe goes")
        report(OK)
    async with gate.slot("c") as report:
        report(OK)
    assert gate.opened == 1


async def test_an_unreachable_platform_is_probed_less_and_less_often() -> None:
    clock = Clock()
    gate = CallGate(8, first_pause=1.0, max_pause=30.0, clock=clock)
    pauses = []
    for _ in range(8):
        async with gate.slot("a") as report:
            report(Outcome(overloaded=True))
        pauses.append(gate.open_for())
        clock.now += gate.open_for()
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    async with gate.slot("a") as report:
        report(OK)  # the platform is back
    async with gate.slot("b") as report:
        report(OK)
    assert gate.open_for() == 0.0


async def test_a_probe_that_is_cancelled_lets_the_next_caller_probe() -> None:
    clock = Clock()
    gate = CallGate(8, clock=clock)
    async with gate.slot("a") as report:
        report(Outcome(overloaded=True, retry_after=1))
    clock.now += 1
    with pytest.raises(RuntimeError):
        async with gate.slot("a"):
            raise RuntimeError("the caller gave up before the answer")
    async with gate.slot("b") as report:
        report(OK)


async def test_a_cancelled_waiter_gives_its_place_back() -> None:
    gate = CallGate(1)
    held = asyncio.Event()
    done = asyncio.Event()

    async def holder() -> None:
        async with gate.slot("a"):
            held.set()
            await done.wait()

    first = asyncio.ensure_future(holder())
    await held.wait()
    waiter = asyncio.ensure_future(gate.slot("b").__aenter__())
    await asyncio.sleep(0)
    assert gate.waiting == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert gate.waiting == 0
    done.set()
    await first
    assert gate.in_flight == 0
    async with gate.slot("c"):
        assert gate.in_flight == 1


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        CallGate(0)


async def test_an_open_circuit_probes_on_its_own_and_wakes_everybody_when_the_platform_is_back() -> None:
    answers = iter([False, False, True])
    probes = 0

    async def health() -> bool:
        nonlocal probes
        probes += 1
        return next(answers)

    # A long pause: without its own probe the circuit would stay shut for 30 s.
    gate = CallGate(4, first_pause=30.0, health=health, probe_every=0.01)
    async with gate.slot("inst-a") as report:
        report(Outcome(overloaded=True))
    assert gate.open_for() > 25
    with pytest.raises(CircuitOpen):
        async with gate.slot("inst-b"):
            pass  # nobody else calls while it is open: the probe is the only call

    woken = gate.recovered()
    await asyncio.wait_for(woken.wait(), timeout=5)
    assert probes == 3 and gate.open_for() == 0.0 and gate.recovered_at > 0
    async with gate.slot("inst-b") as report:  # calls go again at once, no probe turn needed
        report(OK)
    assert gate.recovered() is not woken  # the next outage gets an event of its own


async def test_a_probe_that_raises_keeps_the_circuit_open() -> None:
    async def health() -> bool:
        raise OSError("connection refused")

    gate = CallGate(4, first_pause=30.0, health=health, probe_every=0.01)
    async with gate.slot("inst-a") as report:
        report(Outcome(overloaded=True))
    await asyncio.sleep(0.1)
    assert gate.open_for() > 25 and gate.recovered_at == 0.0
    await gate.aclose()
