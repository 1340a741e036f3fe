"""Benchmark: install a 60-entity bundle with 20 ms of injected latency on every platform call.

Starts the reference platform (fault injection on) on a loopback port, installs the same bundle
twice into fresh workspaces, once as the engine does it (creates within a level concurrently) and
once strictly sequentially (every platform call waits for the previous one), and prints the
platform calls per install and the wall times. Targets: calls <= platform entities created +
disabled triggers + 3; concurrent wall time <= 0.35x sequential.

    .venv/bin/python bench/install.py [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.apply import apply
from bundle_operator.engine.plan import plan
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import FaultSpec
from bundle_operator.reference_platform.process import start_platform

PER_KIND = 10


def bundle_document() -> dict[str, Any]:
    """60 entities: ten each of MCPs, skills, agents, channels, automations and policies."""
    n = range(PER_KIND)
    return {
        "schema_version": "0.1.0",
        "name": "bench-install",
        "setup": [{"key": "bot", "label": "Bot token", "type": "secret"}],
        "mcps": [
            {
                "key": f"m{i}",
                "name": f"Server {i}",
                "type": "command",
                "command": "npx",
                "args": ["-y", f"@acme/server-{i}"],
                "env": {"REGION": "eu"},
            }
            for i in n
        ],
        "skills": [
            {
                "key": f"s{i}",
                "source_type": "inline",
                "content": f"---\nname: skill-{i}\ndescription: Skill {i}\n---\nBody\n",
            }
            for i in n
        ],
        "agents": [
            {"key": f"a{i}", "name": f"Agent {i}", "model": "gpt-5", "mcps": [f"m{i}"], "skills": [f"s{i}"]}
            for i in n
        ],
        "channels": [
            {"key": f"c{i}", "type": "telegram", "agent": f"a{i}", "bot_token": "${setup.bot}"} for i in n
        ],
        "automations": [
            {"key": f"t{i}", "type": "cron", "agent": f"a{i}", "schedule": "0 8 * * *", "message": "Go"}
            for i in n
        ],
        "policies": [
            {"key": f"p{i}", "type": "spend_cap", "agent": f"a{i}", "config": {"limit_usd": 5}} for i in n
        ],
    }


class CountingTransport(httpx.AsyncHTTPTransport):
    """Counts the requests that reach the wire."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        return await super().handle_async_request(request)


class Sequential:
    """Wraps a client so that every platform call waits for the previous one to finish."""

    def __init__(self, client: PlatformClient) -> None:
        self._client = client
        self._lock = asyncio.Lock()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)
        if not asyncio.iscoroutinefunction(target):
            return target

        async def call(*args: Any, **kwargs: Any) -> Any:
            async with self._lock:
                return await target(*args, **kwargs)

        return call


async def run_once(url: str, latency_ms: int, sequential: bool) -> tuple[float, int, int, int]:
    ws = f"bench-{uuid.uuid4().hex[:10]}"
    parsed = parse_bundle_text(yaml.safe_dump(bundle_document()))
    transport = CountingTransport()
    async with PlatformClient(url, transport=transport) as client:
        for path in (f"/v1/workspaces/{ws}/*", f"/v1/workspaces/{ws}/*/*"):
            spec = FaultSpec(method="*", path=path, times=1_000_000, delay_ms=latency_ms)
            await client.request("POST", "/_admin/faults", body=spec.model_dump_json().encode(), safe=False)
        setup_calls = transport.count
        platform: Any = Sequential(client) if sequential else client
        record = Record(installation="bench", workspace=ws)

        async def persist(_: Record) -> None:
            return None

        started = time.perf_counter()
        planned = await plan(platform, ws, parsed, {"bot": "123456:bench"}, record)
        await apply(platform, planned, record, persist)
        elapsed = time.perf_counter() - started
        calls = transport.count - setup_calls
        created = sum(len(r.parts) for r in record.entities)
        triggers = len(await client.list_all(ws, kinds.TRIGGERS))
        await client.request("DELETE", "/_admin/faults", safe=True)
    return elapsed, calls, created, triggers


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-ms", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_platform(Path(tmp) / "bench.db", "--enable-fault-injection")
        url = server.url
        try:
            run: Callable[[bool], Awaitable[tuple[float, int, int, int]]] = lambda seq: run_once(  # noqa: E731
                url, args.latency_ms, seq
            )
            asyncio.run(run(False))  # warm-up: imports, connections, SQLite pages
            concurrent = asyncio.run(run(False))
            sequential = asyncio.run(run(True))
        finally:
            server.stop()
    elapsed, calls, created, triggers = concurrent
    target = created + triggers + 3
    print(
        f"bundle: 60 entities; {created} platform entities created; {triggers} triggers disabled at creation"
    )
    print(f"platform calls per install: {calls} (target <= {created} + {triggers} + 3 = {target})")
    print(
        f"wall time with {args.latency_ms} ms per call: concurrent {elapsed:.3f} s, "
        f"strictly sequential {sequential[0]:.3f} s ({sequential[1]} calls)"
    )
    print(f"ratio concurrent/sequential: {elapsed / sequential[0]:.2f}x (target <= 0.35x)")


if __name__ == "__main__":
    main()
