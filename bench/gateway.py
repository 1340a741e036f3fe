"""Benchmark the gateway's tools/call round trip against calling the member directly.

Starts the real weather and notes MCP servers (tests/mcp_members.py) in a process of their own and
`bundlectl platform serve` in another, with a fresh SQLite file in a temporary folder. Sets up a
gateway bundle with the weather member, waits for its discovery and creates an ApiKey endpoint and
an OAuth endpoint (tokens from the stub issuer of tests/oauth_issuer.py, RS256, over HTTPS with its
own CA). Then, for each concurrency C, opens C official `mcp.Client` sessions (one per simulated
client) to the member directly and C to each endpoint, warms each up, and has every session call
`echo` (direct) or `weather__echo` (gateway) with a short text --calls times, one call after the
other. The load generator runs in this process, so the three event loops never share a thread.

Each measurement runs --rounds times, interleaving the three paths, so a slow spell of a shared
machine falls on all of them. It runs in two layouts: shared CPUs (every process on any CPU) and
the gateway on its own CPU (the platform pinned to one CPU, this load generator and the member to
the others, in the direct path as in the gateway path), which is how a gateway is deployed: a
pod of its own, not a share of its clients' CPUs. On two CPUs the shared layout measures the sum
of the three processes' CPU costs (shown per call) more than the gateway's throughput.

Prints p50/p99 latency and calls/s for the three paths at each concurrency, the CPU each process
spent per timed call (this load generator, the platform with the gateway, the member; from /proc),
the p50 overhead and the throughput ratio, and checks the targets: p50 overhead under 2 ms on
loopback (at the lowest concurrency, shared CPUs) for both endpoints, and gateway throughput at
least 0.85x direct (at the highest, gateway on its own CPU; the shared figure is printed too).
A miss is reported, never an exit status: this is a benchmark, not a test. Every request goes
only to the loopback servers this script started.

With --trace the platform traces (``--otlp-endpoint``) to an OTLP receiver in this process
(tests/otlp_receiver.py, decoding every span it gets), so the figures say what tracing costs; the
number of spans received is printed at the end.

Run: `make bench-gateway` or
`.venv/bin/python bench/gateway.py [--calls N] [--rounds R] [--concurrency 1,16] [--mode auto|legacy]
[--layout shared|own-cpu|both] [--trace]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from tests.otlp_receiver import OtlpReceiver  # noqa: E402

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

ALL_CPUS = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
SHARED = "shared"
OWN_CPU = "own-cpu"
LAYOUT_NAMES = {SHARED: "shared CPUs", OWN_CPU: "gateway on its own CPU"}
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


def pin(pid: int, cpus: set[int]) -> None:
    """Keep every thread of ``pid`` on ``cpus`` (sched_setaffinity binds one thread at a time)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError, ValueError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), cpus)


def own_cpu_layout() -> tuple[set[int], set[int]] | None:
    """(the gateway's CPU, everybody else's CPUs) when the machine has at least two; else None."""
    cpus = sorted(ALL_CPUS)
    if len(cpus) < 2:
        return None
    return {cpus[-1]}, set(cpus[:-1])


@dataclass(frozen=True)
class Processes:
    """The processes whose CPU time is shown next to the figures."""

    platform: int
    members: int | None

    def place(self, layout: str) -> None:
        """Shared: every process may run on every CPU. Own CPU: the platform alone on one CPU."""
        everything = set(ALL_CPUS)
        gateway, others = own_cpu_layout() or (everything, everything)
        if layout == SHARED:
            gateway = others = everything
        pin(self.platform, gateway)
        pin(os.getpid(), others)
        if self.members is not None:
            pin(self.members, others)

    def cpu(self) -> tuple[float, float, float]:
        """CPU seconds so far of this process (the load generator), the platform and the members."""
        return time.process_time(), cpu_seconds(self.platform), cpu_seconds(self.members)


@dataclass(frozen=True)
class Figures:
    """One measurement: calls, seconds, every call's latency in seconds, CPU seconds of each process."""

    calls: int
    seconds: float
    latencies: list[float]
    cpu: tuple[float, float, float]

    @property
    def rate(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds

    @property
    def cpu_ms(self) -> tuple[float, float, float]:
        """CPU ms per call of the load generator, the platform and the member."""
        load, platform, member = (used / self.calls * 1000 for used in self.cpu)
        return load, platform, member

    def __add__(self, other: Figures) -> Figures:
        """Two rounds of the same measurement as one."""
        load, platform, member = (a + b for a, b in zip(self.cpu, other.cpu, strict=True))
        return Figures(
            self.calls + other.calls,
            self.seconds + other.seconds,
            self.latencies + other.latencies,
            (load, platform, member),
        )

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
    load, platform, member = (after - before for before, after in zip(cpu_before, cpu_after, strict=True))
    return Figures(concurrency * calls, elapsed, latencies, (load, platform, member))


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


Results = dict[int, tuple[Figures, Figures, Figures]]


async def measure_layout(
    targets: tuple[Target, Target, Target],
    processes: Processes,
    calls: int,
    levels: list[int],
    mode: str,
    rounds: int,
) -> Results:
    """Measure the three paths at each concurrency and print a row for each."""
    print(
        f"{'clients':>7}  {'path':<8} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
        f"   {'CPU ms/call: load gen':>21} {'platform':>8} {'member':>6}"
        f"   {'p50 overhead ms':>15} {'throughput ratio':>16}"
    )
    results: Results = {}
    for level in levels:
        # Rounds interleave the three paths, so a slow spell of the machine falls on all of them.
        figures_of = [await measure(target, level, calls, mode, processes) for target in targets]
        for _ in range(rounds - 1):
            for index, target in enumerate(targets):
                figures_of[index] = figures_of[index] + await measure(target, level, calls, mode, processes)
        plain = figures_of[0]
        results[level] = (figures_of[0], figures_of[1], figures_of[2])
        for target, figures in zip(targets, figures_of, strict=True):
            loadgen, platform, member = figures.cpu_ms
            overhead = figures.p(0.5) - plain.p(0.5)
            extra = (
                f"   {overhead:15.2f} {figures.rate / plain.rate:16.2f}" if target is not targets[0] else ""
            )
            print(
                f"{level:>7}  {target.label:<8} {figures.rate:8.0f} {figures.p(0.5):7.2f}"
                f" {figures.p(0.99):7.2f}   {loadgen:21.2f} {platform:8.2f} {member:6.2f}{extra}"
            )
    print()
    return results


async def run(
    platform_url: str,
    weather_url: str,
    processes: Processes,
    options: argparse.Namespace,
    issuer: StubIssuer,
) -> str:
    """Set up the endpoints, measure the three paths in each layout, print; return the last line."""
    calls, levels, mode = options.calls, options.concurrency, options.mode
    async with PlatformClient(platform_url, timeout=30.0) as api:
        url, api_key, oauth_url = await gateway_endpoint(api, weather_url, issuer)
    token = issuer.token("bench", audience=oauth_url, scopes="mcp:tools", lifetime=3600)
    targets = (
        Target("direct", weather_url, "echo", {}),
        Target("gateway", url, "weather__echo", {"Authorization": f"Bearer {api_key}"}),
        Target("oauth", oauth_url, "weather__echo", {"Authorization": f"Bearer {token}"}),
    )
    print(
        f"mode {mode}, {calls} timed calls per client after {WARM_UP} warm-up calls each,"
        f" {options.rounds} rounds interleaving the three paths"
    )
    print(f"direct  {weather_url}\ngateway {url} (ApiKey)\noauth   {oauth_url} (OAuth, RS256 JWT)\n")
    layouts = [SHARED, OWN_CPU] if options.layout == "both" else [options.layout]
    if OWN_CPU in layouts and own_cpu_layout() is None:
        print("one CPU only: the gateway cannot have a CPU of its own; measuring with shared CPUs\n")
        layouts = [SHARED]
    measured: dict[str, Results] = {}
    for layout in layouts:
        processes.place(layout)
        if layout == SHARED:
            print(
                f"shared CPUs: the load generator, the platform and the member run on any of {len(ALL_CPUS)}"
            )
        else:
            gateway_cpus, other_cpus = own_cpu_layout() or (ALL_CPUS, ALL_CPUS)
            print(
                f"gateway on its own CPU: the platform on CPU {sorted(gateway_cpus)}, the load generator"
                f" and the member on CPU {sorted(other_cpus)} (in both paths)"
            )
        measured[layout] = await measure_layout(targets, processes, calls, levels, mode, options.rounds)
    processes.place(SHARED)
    return report(measured, min(levels), max(levels))


def report(measured: dict[str, Results], low: int, high: int) -> str:
    """Check the targets, print them, and return the summary line."""
    latency = measured.get(SHARED) or measured[OWN_CPU]
    overhead = latency[low][1].p(0.5) - latency[low][0].p(0.5)
    oauth_overhead = latency[low][2].p(0.5) - latency[low][0].p(0.5)
    for label, value in (("ApiKey", overhead), ("OAuth", oauth_overhead)):
        print(
            f"target: {label} p50 overhead < {OVERHEAD_TARGET_MS:g} ms ({clients(low)}):"
            f" {value:.2f} ms  {verdict(value < OVERHEAD_TARGET_MS)}"
        )
    print(f"        the JWT check's share (OAuth p50 - ApiKey p50): {oauth_overhead - overhead:.2f} ms")
    ratios: dict[str, tuple[float, float]] = {}
    for layout, results in measured.items():
        direct, gateway, oauth = results[high]
        ratios[layout] = (gateway.rate / direct.rate, oauth.rate / direct.rate)
    # A gateway is deployed with CPUs of its own; when every process shares two CPUs the ratio
    # measures the sum of their CPU costs (the CPU columns show it) more than the gateway's throughput.
    judged = OWN_CPU if OWN_CPU in ratios else SHARED
    for layout, (ratio, oauth_ratio) in ratios.items():
        for label, value in (("ApiKey", ratio), ("OAuth", oauth_ratio)):
            mark = verdict(value >= RATIO_TARGET) if layout == judged else "(shown, not judged)"
            print(
                f"target: {label} gateway throughput >= {RATIO_TARGET:g}x direct ({clients(high)},"
                f" {LAYOUT_NAMES[layout]}): {value:.2f}x  {mark}"
            )
    summary = ", ".join(
        f"{ratios[layout][0]:.2f} ApiKey, {ratios[layout][1]:.2f} OAuth ({LAYOUT_NAMES[layout]})"
        for layout in ratios
    )
    return (
        f"gateway: p50 overhead {overhead:.2f} ms ApiKey, {oauth_overhead:.2f} ms OAuth ({clients(low)}),"
        f" throughput ratio at {clients(high)} {summary}"
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
    parser.add_argument(
        "--layout",
        choices=(SHARED, OWN_CPU, "both"),
        default="both",
        help="shared CPUs, the gateway on a CPU of its own, or both (default both)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each measurement, interleaved (default 3)"
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="have the platform trace to an OTLP receiver in this process (what tracing costs)",
    )
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    receiver = OtlpReceiver.start() if args.trace else None
    traced = ("--otlp-endpoint", receiver.endpoint) if receiver is not None else ()
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
                *traced,
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
            last = asyncio.run(run(server.url, weather, processes, args, issuer))
        finally:
            server.stop()
    print(last)
    if receiver is not None:
        spans = receiver.spans()
        calls = sum(1 for span in spans if span.name == "tools/call weather__echo")
        print(f"tracing on: {len(spans)} spans received, {calls} of them tools/call weather__echo")
        receiver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
