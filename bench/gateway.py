"""Benchmark the gateway's tools/call round trip against calling the member directly.

Starts the real weather and notes MCP servers (tests/mcp_members.py) in a process of their own and
`bundlectl platform serve` in another, with a fresh SQLite file in a temporary folder. Sets up a
gateway bundle with the weather member, waits for its discovery and creates an ApiKey endpoint and
an OAuth endpoint (tokens from the stub issuer of tests/oauth_issuer.py, RS256, over HTTPS with its
own CA). Then, for each concurrency C, opens C official `mcp.Client` sessions (one per simulated
client) to the member directly and C to each endpoint, warms each up, and has every session call
`echo` (direct) or `weather__echo` (gateway) with a short text --calls times, one call after the
other. The load generator runs in this process, so the three event loops never share a thread.

Prints p50/p99 latency and calls/s for both paths at each concurrency, the CPU each process spent
per timed call (this load generator, the platform with the gateway, the member; from /proc), the
p50 overhead and the throughput ratio, and checks the targets: p50 overhead under 2 ms on loopback
(at the lowest concurrency) for both endpoints, and gateway throughput at least 0.85x direct (at the
highest).
A miss is reported, never an exit status: this is a benchmark, not a test. Every request goes
only to the loopback servers this script started.

Run: `make bench-gateway` or
`.venv/bin/python bench/gateway.py [--calls N] [--concurrency 1,16] [--mode auto|legacy]`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mcp_members import members_subprocess  # noqa: E402
from tests.oauth_issuer import StubIssuer, stub_issuer  # noqa: E402

from bundle_operator.platform import kinds  # noqa: E402
from bundle_operator.platform.client import PlatformClient  # noqa: E402
from bundle_operator.platform.models import (  # noqa: E402
    EndpointCreate,
    GatewayBundleCreate,
    GatewayMemberPut,
    McpInstanceCreate,
    McpServerCreate,
)
from bundle_operator.reference_platform.process import start_platform  # noqa: E402

TEXT = "ping"
WARM_UP = 20
OVERHEAD_TARGET_MS = 2.0
RATIO_TARGET = 0.85


@dataclass(frozen=True)
class Target:
    """Where a client connects and which tool it calls there."""

    label: str
    url: str
    tool: str
    headers: dict[str, str]


def cpu_seconds(pid: int | None) -> float:
    """User plus system CPU seconds of a process so far, NaN where /proc cannot tell."""
    if pid is None:
        return math.nan
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return math.nan


@dataclass(frozen=True)
class Processes:
    """The processes whose CPU time is shown next to the figures."""

    platform: int
    members: int | None

    def cpu(self) -> tuple[float, float, float]:
        """CPU seconds so far of this process (the load generator), the platform and the members."""
        return time.process_time(), cpu_seconds(self.platform), cpu_seconds(self.members)


@dataclass(frozen=True)
class Figures:
    """One measurement: calls/s, every call's latency in seconds, CPU ms per call of each process."""

    rate: float
    latencies: list[float]
    cpu_ms: tuple[float, float, float]

    def p(self, fraction: float) -> float:
        """The latency at ``fraction`` in ms (nearest rank)."""
        ordered = sorted(self.latencies)
        index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
        return ordered[index] * 1000


@asynccontextmanager
async def connect(target: Target, mode: str) -> AsyncIterator[Client]:
    """One client session of its own (own HTTP connection pool) to ``target``."""
    http = httpx2.AsyncClient(headers=target.headers, timeout=httpx2.Timeout(60.0))
    transport = streamable_http_client(target.url, http_client=http)
    async with http, Client(transport, cache=None, mode=mode) as client:
        yield client


async def call_once(client: Client, tool: str) -> None:
    """One tools/call; the echoed text must come back."""
    result = await client.call_tool(tool, {"text": TEXT})
    first = result.content[0] if result.content else None
    if result.is_error or not isinstance(first, TextContent) or first.text != TEXT:
        raise RuntimeError(f"{tool} answered {result!r}")


async def measure(target: Target, concurrency: int, calls: int, mode: str, processes: Processes) -> Figures:
    """Open ``concurrency`` sessions, warm each up, then time ``calls`` calls on each at once."""
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(connect(target, mode)) for _ in range(concurrency)]

        async def calling(client: Client, count: int, into: list[float]) -> None:
            for _ in range(count):
                started = time.perf_counter()
                await call_once(client, target.tool)
                into.append(time.perf_counter() - started)

        await asyncio.gather(*(calling(client, WARM_UP, []) for client in sessions))
        latencies: list[float] = []
        cpu_before = processes.cpu()
        started = time.perf_counter()
        await asyncio.gather(*(calling(client, calls, latencies) for client in sessions))
        elapsed = time.perf_counter() - started
        cpu_after = processes.cpu()
    total = concurrency * calls
    loadgen, platform, member = (
        (after - before) / total * 1000 for before, after in zip(cpu_before, cpu_after, strict=True)
    )
    return Figures(total / elapsed, latencies, (loadgen, platform, member))


async def eventually(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    """Wait until ``check`` holds."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {within}s: {what}")
        await asyncio.sleep(0.1)


async def gateway_endpoint(api: PlatformClient, weather_url: str, issuer: StubIssuer) -> tuple[str, str, str]:
    """A bundle with the weather member, discovered, behind an ApiKey and an OAuth endpoint:
    (ApiKey URL, API key, OAuth URL)."""
    ws = f"bench-{uuid.uuid4().hex[:8]}"

    def key() -> str:
        return uuid.uuid4().hex

    bundle = await api.create(
        ws,
        kinds.GATEWAY_BUNDLES,
        GatewayBundleCreate(name="bench", description="bench"),
        idempotency_key=key(),
    )
    server = await api.create(
        ws,
        kinds.MCP_SERVERS,
        McpServerCreate(name="weather", type="url", endpoint_url=weather_url),
        idempotency_key=key(),
    )
    instance = await api.create(
        ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name="weather"), idempotency_key=key()
    )
    await api.put_member(ws, bundle.id, "weather", GatewayMemberPut(mcp_instance_id=instance.id))

    async def discovered() -> bool:
        members = await api.list_members(ws, bundle.id)
        tools = {t.id for t in await api.list_tools(ws, bundle.id)}
        return all(m.healthy for m in members) and "weather__echo" in tools

    await eventually(discovered, within=30, what="the weather member discovered")
    created = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate.model_validate({"name": f"ep-{ws}", "gateway_bundle_id": bundle.id}),
        idempotency_key=key(),
    )
    if created.api_key is None:
        raise RuntimeError("the endpoint came without an API key")
    oauth = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate.model_validate(
            {
                "name": f"oa-{ws}",
                "gateway_bundle_id": bundle.id,
                "auth_mode": "OAuth",
                "oauth": {"issuer": issuer.url, "required_scopes": ["mcp:tools"]},
            }
        ),
        idempotency_key=key(),
    )
    return created.url, created.api_key.get_secret_value(), oauth.url


def verdict(passed: bool) -> str:
    """PASS or MISS."""
    return "PASS" if passed else "MISS"


def clients(count: int) -> str:
    """``1 client``, ``16 clients``."""
    return f"{count} client{'s' * (count != 1)}"


async def run(
    platform_url: str,
    weather_url: str,
    processes: Processes,
    calls: int,
    levels: list[int],
    mode: str,
    issuer: StubIssuer,
) -> str:
    """Set up the endpoints, measure the three paths at each concurrency, print; return the last line."""
    async with PlatformClient(platform_url, timeout=30.0) as api:
        url, api_key, oauth_url = await gateway_endpoint(api, weather_url, issuer)
    token = issuer.token("bench", audience=oauth_url, scopes="mcp:tools", lifetime=3600)
    direct = Target("direct", weather_url, "echo", {})
    gateway = Target("gateway", url, "weather__echo", {"Authorization": f"Bearer {api_key}"})
    oauth = Target("oauth", oauth_url, "weather__echo", {"Authorization": f"Bearer {token}"})
    print(f"mode {mode}, {calls} timed calls per client after {WARM_UP} warm-up calls each")
    print(f"direct  {weather_url}\ngateway {url} (ApiKey)\noauth   {oauth_url} (OAuth, RS256 JWT)\n")
    print(
        f"{'clients':>7}  {'path':<8} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
        f"   {'CPU ms/call: load gen':>21} {'platform':>8} {'member':>6}"
        f"   {'p50 overhead ms':>15} {'throughput ratio':>16}"
    )
    results: dict[int, tuple[Figures, Figures, Figures]] = {}
    for level in levels:
        plain = await measure(direct, level, calls, mode, processes)
        through = await measure(gateway, level, calls, mode, processes)
        signed = await measure(oauth, level, calls, mode, processes)
        results[level] = (plain, through, signed)
        for target, figures in ((direct, plain), (gateway, through), (oauth, signed)):
            loadgen, platform, member = figures.cpu_ms
            overhead = figures.p(0.5) - plain.p(0.5)
            extra = f"   {overhead:15.2f} {figures.rate / plain.rate:16.2f}" if target is not direct else ""
            print(
                f"{level:>7}  {target.label:<8} {figures.rate:8.0f} {figures.p(0.5):7.2f}"
                f" {figures.p(0.99):7.2f}   {loadgen:21.2f} {platform:8.2f} {member:6.2f}{extra}"
            )
    low, high = min(levels), max(levels)
    overhead = results[low][1].p(0.5) - results[low][0].p(0.5)
    oauth_overhead = results[low][2].p(0.5) - results[low][0].p(0.5)
    jwt_cost = results[low][2].p(0.5) - results[low][1].p(0.5)
    ratio = results[high][1].rate / results[high][0].rate
    oauth_ratio = results[high][2].rate / results[high][0].rate
    print()
    for label, value in (("ApiKey", overhead), ("OAuth", oauth_overhead)):
        print(
            f"target: {label} p50 overhead < {OVERHEAD_TARGET_MS:g} ms ({clients(low)}):"
            f" {value:.2f} ms  {verdict(value < OVERHEAD_TARGET_MS)}"
        )
    print(f"        the JWT check's share (OAuth p50 - ApiKey p50): {jwt_cost:.2f} ms")
    for label, value in (("ApiKey", ratio), ("OAuth", oauth_ratio)):
        print(
            f"target: {label} gateway throughput >= {RATIO_TARGET:g}x direct ({clients(high)}):"
            f" {value:.2f}x  {verdict(value >= RATIO_TARGET)}"
        )
    return (
        f"gateway: p50 overhead {overhead:.2f} ms ApiKey, {oauth_overhead:.2f} ms OAuth ({clients(low)}),"
        f" throughput ratio {ratio:.2f} ApiKey, {oauth_ratio:.2f} OAuth ({clients(high)})"
    )


def concurrency_levels(text: str) -> list[int]:
    """``1,16`` as [1, 16]."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated client counts, e.g. 1,16") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("client counts must be at least 1")
    return levels


def main() -> int:
    """Parse options, start the members and the platform, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per client (default 200)")
    parser.add_argument(
        "--concurrency",
        type=concurrency_levels,
        default=[1, 16],
        help="client counts to measure, comma-separated (default 1,16)",
    )
    parser.add_argument(
        "--mode",
        choices=("auto", "legacy"),
        default="auto",
        help="the MCP protocol era the benchmark's clients speak (default auto)",
    )
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    with (
        tempfile.TemporaryDirectory() as folder,
        members_subprocess() as members,
        stub_issuer(Path(folder)) as issuer,
    ):
        try:
            server = start_platform(
                Path(folder) / "platform.db",
                "--discovery-interval",
                "3600",
                "--allow-private-issuers",
                env={"SSL_CERT_FILE": str(issuer.tls.ca_file)},
            )
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        try:
            print(f"reference platform at {server.url}, members in a process of their own")
            member_pid = members.process.pid if members.process is not None else None
            processes = Processes(platform=server.process.pid, members=member_pid)
            weather = members.url("weather")
            last = asyncio.run(
                run(server.url, weather, processes, args.calls, args.concurrency, args.mode, issuer)
            )
        finally:
            server.stop()
    print(last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
