"""The probes as the kubelet sees them: /healthz turns 503 when the operator stops showing signs of
work, when its event loop is blocked or when a watch leaves changes undelivered, and 200 again
after; /readyz follows the readiness check."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from bundle_operator.k8s.process.health import Liveness, serve_health, ticking
from bundle_operator.k8s.process.watch_lag import Deliveries, WatchLag


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_liveness_follows_touches() -> None:
    clock = Clock()
    liveness = Liveness(stale_after=300, clock=clock)
    clock.now += 299
    assert liveness.healthy()  # still starting up: no event yet is no fault
    clock.now += 2
    assert not liveness.healthy()
    liveness.touch()
    clock.now += 299
    assert liveness.healthy()
    assert not liveness.healthy(clock.now + 1)


def test_probes_over_http() -> None:
    clock = Clock()
    liveness = Liveness(stale_after=300, clock=clock)
    state = {"ready": False, "broken": False}

    def ready() -> bool:
        if state["broken"]:
            raise RuntimeError("cache not built")
        return state["ready"]

    async def scenario() -> list[tuple[str, int, str]]:
        seen: list[tuple[str, int, str]] = []
        runner = await serve_health("127.0.0.1", 0, liveness, ready)
        try:
            host, port = runner.addresses[0][:2]
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:

                async def get(path: str) -> None:
                    response = await client.get(path)
                    seen.append((path, response.status_code, response.text))

                await get("/healthz")  # fresh start
                clock.now += 301
                await get("/healthz")  # nothing happened for too long
                liveness.touch()
                await get("/healthz")
                clock.now += 300
                await get("/healthz")
                await get("/readyz")
                state["ready"] = True
                await get("/readyz")
                state["broken"] = True
                await get("/readyz")
        finally:
            await runner.cleanup()
        return seen

    seen = asyncio.run(scenario())

    assert seen[0] == ("/healthz", 200, "ok")
    _, status, text = seen[1]
    assert status == 503
    assert "no watch event, timer run or reconcile" in text and "\n" not in text.strip()
    assert seen[2] == ("/healthz", 200, "ok")
    assert seen[3][1] == 503 and "for 300s" in seen[3][2]
    assert seen[4][:2] == ("/readyz", 503)
    assert seen[5] == ("/readyz", 200, "ok")
    assert seen[6][:2] == ("/readyz", 503) and "RuntimeError" in seen[6][2]


def test_stale_after_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Liveness(stale_after=0)
    with pytest.raises(ValueError, match="positive"):
        Liveness(loop_stall_after=0)


def test_a_blocked_event_loop_is_named_by_the_probe_it_cannot_answer_itself() -> None:
    import threading
    import time

    liveness = Liveness(stale_after=300, loop_stall_after=0.5)
    answers: list[tuple[int, str]] = []

    def probe(port: int) -> None:
        response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        answers.append((response.status_code, response.text))

    async def scenario() -> None:
        ticks = asyncio.create_task(ticking(liveness, every=0.05))
        server = await serve_health("127.0.0.1", 0, liveness, lambda: True)
        port = server.addresses[0][1]
        try:
            await asyncio.sleep(0.2)
            await asyncio.to_thread(probe, port)  # the loop runs: healthy
            # A handler that blocks the loop: the probe, from its own thread, still answers.
            prober = threading.Timer(1.2, probe, args=(port,))
            prober.start()
            time.sleep(1.6)  # noqa: ASYNC251 - the wedge under test
            prober.join()
            await asyncio.sleep(0.2)  # the loop runs again
            await asyncio.to_thread(probe, port)
        finally:
            ticks.cancel()
            await server.cleanup()

    asyncio.run(scenario())
    assert answers[0] == (200, "ok")
    status, text = answers[1]
    assert status == 503 and "the event loop has not run for" in text, answers
    assert answers[2] == (200, "ok")


class Listing:
    """An API server's list of one kind, as (namespace, name, resourceVersion)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[str, str, str]]] = {}

    async def __call__(self, plural: str) -> list[tuple[str, str, str]]:
        return list(self.rows.get(plural, []))


def test_a_watch_that_leaves_changes_undelivered_past_the_limit_is_wedged() -> None:
    clock = Clock()
    deliveries = Deliveries(clock=clock)
    lag = WatchLag(deliveries, ("bundleinstallations", "bundles"), limit=420)
    api = Listing()
    deliveries.note("bundleinstallations", "ns", "a", "10", deleted=False)
    api.rows["bundleinstallations"] = [("ns", "a", "10")]

    def check() -> str | None:
        return asyncio.run(lag.check(api))

    assert check() is None  # everything delivered
    api.rows["bundleinstallations"] = [("ns", "a", "11"), ("ns", "b", "12")]
    assert check() is None  # first seen now: a live stream delivers within moments
    clock.now += 400
    assert check() is None  # not yet past the limit
    clock.now += 30
    problem = check()
    assert problem is not None
    assert "the watch of bundleinstallations has delivered nothing for 430s" in problem
    assert "2 changed" in problem and "ns/a" in problem
    # The stream speaks again (about anything of the kind): alive, the clock starts over.
    deliveries.note("bundleinstallations", "ns", "a", "11", deleted=False)
    assert check() is None
    clock.now += 500
    assert check() is not None  # b is still undelivered and nothing came since
    deliveries.note("bundleinstallations", "ns", "b", "12", deleted=False)
    assert check() is None
    # A deleted object is forgotten: it is no longer listed, and nothing is pending.
    deliveries.note("bundleinstallations", "ns", "b", "12", deleted=True)
    api.rows["bundleinstallations"] = [("ns", "a", "11")]
    clock.now += 1000
    assert check() is None


def test_a_quiet_watch_with_nothing_pending_is_healthy() -> None:
    clock = Clock()
    deliveries = Deliveries(clock=clock)
    lag = WatchLag(deliveries, ("bundles",), limit=420)
    deliveries.note("bundles", "ns", "b", "7", deleted=False)
    api = Listing()
    api.rows["bundles"] = [("ns", "b", "7")]
    clock.now += 10_000  # nothing delivered for hours, and nothing to deliver
    assert asyncio.run(lag.check(api)) is None


def test_liveness_reports_what_the_watch_check_found() -> None:
    clock = Clock()
    liveness = Liveness(stale_after=300, clock=clock)
    liveness.touch()
    liveness.watch_lag("the watch of bundles has delivered nothing for 500s")
    assert liveness.problem() == "the watch of bundles has delivered nothing for 500s"
    liveness.watch_lag(None)
    assert liveness.healthy()
