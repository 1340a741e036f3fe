"""Fault injection and the client's retries: what is repeated, what is not, and idempotent creates
whose first answer was lost."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from platform_builders import agent, bundle, create
from platform_harness import FAST_RETRY, TOKEN, PlatformProcess

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import NotFound, RateLimited, Unavailable
from bundle_operator.platform.models import AgentCreate, AgentUpdate, FaultSpec
from bundle_operator.platform.retry import RetryPolicy
from bundle_operator.reference_platform import ServerConfig, start

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def arm(client: PlatformClient, **spec: Any) -> str:
    response = await client.request(
        "POST", "/_admin/faults", body=FaultSpec.model_validate(spec).model_dump_json().encode(), safe=False
    )
    return str(response.json()["id"])


async def fault_counts(client: PlatformClient, fault_id: str) -> tuple[int, int]:
    faults = (await client.request("GET", "/_admin/faults", safe=True)).json()["items"]
    found = next(f for f in faults if f["id"] == fault_id)
    return found["matched"], found["injected"]


class RecordingSleep:
    """Stands in for asyncio.sleep: records the delays the client chose, waits for none."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def test_faults_can_be_armed_listed_and_cleared(client: PlatformClient, ws: str) -> None:
    fault_id = await arm(client, method="POST", path=f"/v1/workspaces/{ws}/agents", status=500)
    listed = (await client.request("GET", "/_admin/faults", safe=True)).json()["items"]
    assert [(f["id"], f["status"], f["after"], f["times"]) for f in listed] == [(fault_id, 500, 0, 1)]
    await client.request("DELETE", "/_admin/faults", safe=True)
    assert (await client.request("GET", "/_admin/faults", safe=True)).json()["items"] == []


async def test_a_fault_fails_the_calls_after_the_first_ones(platform: PlatformProcess, ws: str) -> None:
    async with PlatformClient(platform.url, token=TOKEN, retry=RetryPolicy(attempts=1)) as once:
        fault_id = await arm(
            once, method="POST", path="/v1/workspaces/*/agents", after=1, times=1, status=503
        )
        await agent(once, ws, name="first")  # call 0 passes
        with pytest.raises(Unavailable) as failed:  # call 1 fails
            await agent(once, ws, name="second")
        assert failed.value.code == "injected_fault" and failed.value.status == 503
        await agent(once, ws, name="third")  # call 2 passes again
        assert await fault_counts(once, fault_id) == (3, 1)
        assert [a.name for a in await once.list_all(ws, kinds.AGENTS)] == ["first", "third"]


async def test_a_star_stands_for_exactly_one_segment(platform: PlatformProcess, ws: str) -> None:
    async with PlatformClient(platform.url, token=TOKEN, retry=RetryPolicy(attempts=1)) as once:
        made = await agent(once, ws)
        await arm(once, method="GET", path="/v1/workspaces/*/agents/*", times=5, status=500)
        await once.list_page(ws, kinds.AGENTS)  # /agents has one segment fewer: untouched
        with pytest.raises(Unavailable):
            await once.get(ws, kinds.AGENTS, made.id)


async def test_reads_are_retried_through_server_errors(platform: PlatformProcess, ws: str) -> None:
    sleep = RecordingSleep()
    async with PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY, sleep=sleep) as client:
        made = await agent(client, ws)
        fault_id = await arm(
            client, method="GET", path=f"/v1/workspaces/{ws}/agents/{made.id}", times=2, status=503
        )
        assert (await client.get(ws, kinds.AGENTS, made.id)).id == made.id
        assert await fault_counts(client, fault_id) == (3, 2)
        assert len(sleep.delays) == 2
        assert all(0 <= d <= FAST_RETRY.max_delay for d in sleep.delays)


async def test_an_update_is_not_repeated_after_a_server_error(platform: PlatformProcess, ws: str) -> None:
    async with PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY, sleep=RecordingSleep()) as client:
        made = await agent(client, ws)
        fault_id = await arm(client, method="PATCH", path=f"/v1/workspaces/{ws}/agents/{made.id}", status=500)
        with pytest.raises(Unavailable):
            await client.update(ws, kinds.AGENTS, made.id, AgentUpdate(model="other"), revision=1)
        assert await fault_counts(client, fault_id) == (1, 1)
        assert (await client.get(ws, kinds.AGENTS, made.id)).revision == 1


async def test_429_is_retried_after_the_time_the_platform_asks_for(
    platform: PlatformProcess, ws: str
) -> None:
    sleep = RecordingSleep()
    async with PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY, sleep=sleep) as client:
        made = await agent(client, ws)
        await arm(
            client, method="PATCH", path=f"/v1/workspaces/{ws}/agents/{made.id}", status=429, retry_after=1
        )
        updated = await client.update(ws, kinds.AGENTS, made.id, AgentUpdate(model="other"), revision=1)
        assert updated.model == "other"
        assert sleep.delays == [1.0]


async def test_429_that_persists_surfaces_as_rate_limited(platform: PlatformProcess, ws: str) -> None:
    async with PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY, sleep=RecordingSleep()) as client:
        await arm(
            client, method="GET", path=f"/v1/workspaces/{ws}/agents", status=429, retry_after=7, times=10
        )
        with pytest.raises(RateLimited) as limited:
            await client.list_page(ws, kinds.AGENTS)
        assert limited.value.retry_after == 7.0 and limited.value.temporary


async def test_a_create_whose_answer_was_lost_is_retried_without_a_duplicate(
    platform: PlatformProcess, ws: str
) -> None:
    sleep = RecordingSleep()
    async with PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY, sleep=sleep) as client:
        # The platform creates the agent, then the caller sees a 503 as if the answer was lost.
        fault_id = await arm(
            client, method="POST", path=f"/v1/workspaces/{ws}/agents", status=503, when="after"
        )
        created = await create(client, ws, kinds.AGENTS, AgentCreate(name="bot", model="m"))
        assert await fault_counts(client, fault_id) == (2, 1)
        assert len(sleep.delays) == 1
        assert [a.id for a in await client.list_all(ws, kinds.AGENTS)] == [created.id]


async def test_a_create_timing_out_is_retried_without_a_duplicate(platform: PlatformProcess, ws: str) -> None:
    body = AgentCreate(name="bot", model="m")
    async with PlatformClient(platform.url, token=TOKEN, timeout=0.3, retry=FAST_RETRY) as client:
        # The first call outlives the client's timeout; the retry and the late first call both
        # carry the same key, so whichever lands second returns the entity the other created.
        await arm(client, method="POST", path=f"/v1/workspaces/{ws}/agents", delay_ms=800)
        made = await create(client, ws, kinds.AGENTS, body)
        await asyncio.sleep(1.0)  # let the delayed first call finish on the server
        assert [a.id for a in await client.list_all(ws, kinds.AGENTS)] == [made.id]


async def test_an_unsafe_call_is_not_repeated_after_a_server_error(
    platform: PlatformProcess, ws: str
) -> None:
    async with PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY, sleep=RecordingSleep()) as client:
        gw = await bundle(client, ws)
        fault_id = await arm(
            client, method="POST", path=f"/v1/workspaces/{ws}/gateway-bundles/*/rename", status=502
        )
        with pytest.raises(Unavailable):
            await client.rename_gateway_bundle(ws, gw.id, "helper", force=True)
        assert await fault_counts(client, fault_id) == (1, 1)


async def test_connection_failures_are_retried_then_reported(ws: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleep = RecordingSleep()
    async with PlatformClient(f"http://127.0.0.1:{port}", retry=FAST_RETRY, sleep=sleep) as client:
        with pytest.raises(Unavailable) as down:
            await client.update(ws, kinds.AGENTS, "agt_x", AgentUpdate(model="m"), revision=1)
    assert down.value.code == "unreachable"
    assert len(sleep.delays) == FAST_RETRY.attempts - 1


async def test_admin_routes_do_not_exist_without_the_flag(tmp_path: Path) -> None:
    running = await start(ServerConfig(db_path=tmp_path / "p.db"))
    try:
        async with PlatformClient(running.url) as client:
            for method in ("GET", "POST", "DELETE"):
                with pytest.raises(NotFound):
                    await client.request(method, "/_admin/faults", body=b"{}", safe=False)
    finally:
        await running.stop()
