"""The probes as the kubelet sees them: /healthz turns 503 when the operator stops showing signs of
work and 200 again after one; /readyz follows the readiness check."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from bundle_operator.k8s.health import Liveness, serve_health


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
