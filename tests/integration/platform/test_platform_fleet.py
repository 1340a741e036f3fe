"""Many installations, one platform: shared lists, a fair cap, and one pause for everybody, against
the reference platform over HTTP with the operator's own client settings."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest
from platform_builders import agent
from platform_harness import FAST_RETRY, TOKEN, PlatformProcess

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Unavailable
from bundle_operator.platform.gate import CALLER, CallGate, CircuitOpen
from bundle_operator.platform.models import FaultSpec
from bundle_operator.platform.retry import RetryPolicy
from bundle_operator.platform.sharing import READ_POLICY, ReadPolicy, SharedReads

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
T = TypeVar("T")


class Sent:
    """Every request the client sent, with when."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, str]] = []

    async def __call__(self, request: httpx.Request) -> None:
        self.requests.append((time.monotonic(), request.method, request.url.path))

    def lists(self, collection: str) -> int:
        return sum(1 for _, m, p in self.requests if m == "GET" and p.endswith(f"/{collection}"))


@pytest.fixture
async def fleet(platform: PlatformProcess) -> AsyncIterator[tuple[PlatformClient, Sent]]:
    sent = Sent()
    client = PlatformClient(
        platform.url,
        token=TOKEN,
        retry=FAST_RETRY,
        event_hooks={"request": [sent]},
        gate=CallGate(4),
        shared=SharedReads(),
    )
    async with client:
        yield client, sent


async def as_installation(owner: str, call: Callable[[], Awaitable[T]], since: float | None = None) -> T:
    """Run ``call`` as the operator runs an installation's reconcile."""
    CALLER.set(owner)
    READ_POLICY.set(ReadPolicy(time.monotonic() - 5 if since is None else since))
    return await call()


async def test_installations_of_a_workspace_share_each_list_and_see_their_own_writes(
    fleet: tuple[PlatformClient, Sent], ws: str
) -> None:
    client, sent = fleet
    await agent(client, ws, "Existing")
    now = time.monotonic()

    def list_agents() -> Awaitable[list[Any]]:
        return client.list_all(ws, kinds.AGENTS)

    listed = await asyncio.gather(
        *(asyncio.ensure_future(as_installation(f"inst-{i}", list_agents, since=now)) for i in range(20))
    )
    assert sent.lists("agents") == 1, "twenty installations listed agents of one workspace"
    assert all([a.name for a in items] == ["Existing"] for items in listed)

    async def write_then_list() -> list[str]:
        await agent(client, ws, "Mine")
        return [a.name for a in await client.list_all(ws, kinds.AGENTS)]

    # The installation that wrote sees its agent; one that did not may keep using the shared list.
    assert await asyncio.ensure_future(as_installation("inst-0", write_then_list)) == ["Existing", "Mine"]
    assert sent.lists("agents") == 2
    other = await asyncio.ensure_future(as_installation("inst-1", lambda: client.list_all(ws, kinds.AGENTS)))
    assert [a.name for a in other] == ["Existing", "Mine"]  # the newest shared list is the fresh one
    assert sent.lists("agents") == 2


async def test_a_429_pauses_every_installation_for_its_retry_after(
    fleet: tuple[PlatformClient, Sent], ws: str
) -> None:
    client, sent = fleet
    fault = FaultSpec(method="GET", path=f"/v1/workspaces/{ws}/agents", status=429, retry_after=2)
    await client.request("POST", "/_admin/faults", body=fault.model_dump_json().encode(), safe=False)
    sent.requests.clear()

    async def list_agents(owner: str, delay: float) -> Any:
        await asyncio.sleep(delay)
        filters = {"name": owner}
        return await as_installation(owner, lambda: client.list_all(ws, kinds.AGENTS, filters=filters))

    started = time.monotonic()
    results = await asyncio.gather(
        list_agents("first", 0.0), *(list_agents(f"inst-{i}", 0.3) for i in range(10))
    )
    assert all(r == [] for r in results)
    refused_at = sent.requests[0][0]
    during = [r for r in sent.requests if refused_at < r[0] < refused_at + 1.9]
    assert during == [], f"calls went out while the platform asked for a pause: {during}"
    assert len(sent.requests) == 12  # the refused call, its repeat, and one per other installation
    assert time.monotonic() - started >= 2.0


async def test_an_unreachable_platform_is_probed_not_hammered() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sent = Sent()
    gate = CallGate(8, first_pause=0.5, max_pause=2.0)
    client = PlatformClient(
        f"http://127.0.0.1:{port}",
        retry=RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05),
        event_hooks={"request": [sent]},
        gate=gate,
        shared=SharedReads(),
    )
    refused = 0

    async def reconcile_loop(owner: str) -> None:
        nonlocal refused
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            try:
                await as_installation(owner, lambda: client.get(f"ws-{owner}", kinds.AGENTS, "agt_1"))
            except CircuitOpen:
                refused += 1
            except Unavailable:
                pass
            await asyncio.sleep(0.05)  # a tight reconcile loop: the gate must be what holds it back

    async with client:
        await asyncio.gather(*(reconcile_loop(f"i{i}") for i in range(20)))
    # 20 installations retrying every 50 ms for 6 s would make thousands of calls; the gate lets
    # through the first wave and then one probe per pause (0.5, 1, 2, 2, ... s).
    assert len(sent.requests) <= 8 + 8, f"{len(sent.requests)} calls reached an unreachable platform"
    assert refused > 0, "no caller was told of the pause without a call"
    print(f"unreachable for 6 s: {len(sent.requests)} calls sent, {refused} refused by the gate")


async def test_the_operators_aiohttp_transport_speaks_the_api_like_httpx(
    platform: PlatformProcess, ws: str
) -> None:
    from bundle_operator.platform.errors import NotFound, PreconditionFailed, RateLimited
    from bundle_operator.platform.models import AgentUpdate
    from bundle_operator.platform.transport import AiohttpTransport

    async with PlatformClient(
        platform.url, token=TOKEN, retry=FAST_RETRY, transport=AiohttpTransport()
    ) as client:
        created = await agent(client, ws, "Über bot")  # a body with non-ASCII text
        assert (await client.get(ws, kinds.AGENTS, created.id)).name == "Über bot"
        assert [a.id for a in await client.list_all(ws, kinds.AGENTS, filters={"name": "Über bot"})] == [
            created.id
        ]
        updated = await client.update(
            ws, kinds.AGENTS, created.id, AgentUpdate(description="new"), revision=created.revision
        )
        assert updated.description == "new"
        with pytest.raises(PreconditionFailed):
            await client.update(
                ws, kinds.AGENTS, created.id, AgentUpdate(description="x"), revision=created.revision
            )
        await client.delete(ws, kinds.AGENTS, created.id)
        with pytest.raises(NotFound):
            await client.get(ws, kinds.AGENTS, created.id)
        fault = FaultSpec(
            method="GET", path=f"/v1/workspaces/{ws}/agents", status=429, retry_after=0, times=10
        )
        await client.request("POST", "/_admin/faults", body=fault.model_dump_json().encode(), safe=False)
        with pytest.raises(RateLimited):
            await client.list_all(ws, kinds.AGENTS)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with PlatformClient(
        f"http://127.0.0.1:{port}", retry=FAST_RETRY, transport=AiohttpTransport()
    ) as down:
        with pytest.raises(Unavailable) as refused:
            await down.get(ws, kinds.AGENTS, "agt_1")
        assert refused.value.code == "unreachable"
