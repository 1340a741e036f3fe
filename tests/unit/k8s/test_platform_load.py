"""The gates' and shared lists' figures reach /metrics at each scrape."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.process.metrics import PlatformLoad
from bundle_operator.platform.gate import CALLER, Outcome
from bundle_operator.platform.sharing import READ_POLICY, ReadPolicy

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def sample(registry: CollectorRegistry, name: str) -> float:
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exposed")


async def test_in_flight_waiting_paused_and_shared_lists_are_exposed() -> None:
    pool = PlatformPool(concurrency=1)
    registry = CollectorRegistry()
    registry.register(PlatformLoad(pool))
    client = pool.get("http://platform.example", "token")
    assert client.gate is not None and client.shared is not None
    release = asyncio.Event()

    async def hold(owner: str) -> None:
        async with client.gate.slot(owner):  # type: ignore[union-attr]
            await release.wait()

    holders = [asyncio.ensure_future(hold(f"i{n}")) for n in range(3)]
    await asyncio.sleep(0)
    assert sample(registry, "bundle_operator_platform_calls_in_flight") == 1
    assert sample(registry, "bundle_operator_platform_calls_waiting") == 2
    release.set()
    await asyncio.gather(*holders)

    async with client.gate.slot("i0") as report:
        report(Outcome(overloaded=True, retry_after=30))
    assert sample(registry, "bundle_operator_platform_paused") == 1

    async def listed() -> list[int]:
        return [1]

    CALLER.set("i0")
    READ_POLICY.set(ReadPolicy(0.0))
    for _ in range(3):
        await client.shared.read("acme", "agents", None, listed)
    text = generate_latest(registry).decode()
    assert 'bundle_operator_platform_shared_lists_total{result="hit"} 2.0' in text
    assert 'bundle_operator_platform_shared_lists_total{result="miss"} 1.0' in text
    await pool.aclose()
