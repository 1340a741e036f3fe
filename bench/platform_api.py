"""Benchmark the reference platform through the client: creates per second and latency.

Starts `bundlectl platform serve` on a free loopback port with a fresh SQLite file (or uses
--url), then creates agents through PlatformClient, one at a time and with several in flight,
and reads them back. Prints creates/s and p50/p99 latency for each. Every request goes only to
the loopback server this script started (or the --url given), and the run is bounded by --count.

Run: `make bench-platform` or `.venv/bin/python bench/platform_api.py [--count N] [--concurrency C]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentCreate
from bundle_operator.reference_platform.process import start_platform

BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))


def percentile(samples: list[float], fraction: float) -> float:
    """The sample at ``fraction`` of the sorted list (nearest rank)."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index]


async def measure(
    count: int, concurrency: int, call: Callable[[int], Awaitable[None]]
) -> tuple[float, list[float]]:
    """Run ``call`` ``count`` times with ``concurrency`` in flight; (calls/s, latencies in s)."""
    latencies: list[float] = []
    numbers = iter(range(count))

    async def worker() -> None:
        for n in numbers:
            started = time.perf_counter()
            await call(n)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started), latencies


def report(label: str, rate: float, latencies: list[float]) -> None:
    """One line of figures."""
    print(
        f"{label:<34} {rate:8.0f}/s   p50 {percentile(latencies, 0.5) * 1000:6.2f} ms"
        f"   p99 {percentile(latencies, 0.99) * 1000:6.2f} ms   (n={len(latencies)})"
    )


async def run(url: str, count: int, concurrency: int) -> None:
    """Warm up, then measure sequential creates, concurrent creates and reads."""
    ws = f"bench-{uuid.uuid4().hex[:8]}"
    async with PlatformClient(url, timeout=30.0) as client:
        ids: list[str] = []

        async def create(n: int) -> None:
            agent = await client.create(
                ws,
                kinds.AGENTS,
                AgentCreate(name=f"agent {n}", model="gpt-5"),
                idempotency_key=uuid.uuid4().hex,
            )
            ids.append(agent.id)

        async def read(n: int) -> None:
            await client.get(ws, kinds.AGENTS, ids[n % len(ids)])

        await measure(50, 1, create)  # warm-up: connections, SQLite pages, imports
        report("create, 1 in flight", *await measure(count, 1, create))
        report(f"create, {concurrency} in flight", *await measure(count, concurrency, create))
        report(f"get, {concurrency} in flight", *await measure(count, concurrency, read))
        total = len(await client.list_all(ws, kinds.AGENTS))
        print(f"{'entities in the workspace':<34} {total:8d}")


def main() -> int:
    """Parse options, start the platform unless --url is given, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="creates per measurement (default 1000)")
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight (default 8)")
    parser.add_argument("--url", help="measure this platform instead of starting one")
    args = parser.parse_args()
    if args.url:
        asyncio.run(run(args.url, args.count, args.concurrency))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        try:
            server = start_platform(Path(folder) / "platform.db")
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        try:
            print(f"reference platform at {server.url}, SQLite file in a temporary folder (WAL)")
            asyncio.run(run(server.url, args.count, args.concurrency))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
