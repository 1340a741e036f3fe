"""A member's health follows reality (DESIGN.md §9.4, issue 40), on the platform's default settings.

The platform runs with its default discovery interval (60 s), so nothing here is found by a timely
rediscovery: a member whose process is killed must show unhealthy within 10 s, a call that fails
must show it at once, and a write to the member (disable and enable in one burst) must have it
discovered again.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess, start_platform

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
    GatewayMember,
    GatewayMemberPut,
    McpInstanceCreate,
    McpServerCreate,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members, members_subprocess

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture(scope="module")
def default_platform(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A platform with the default discovery interval."""
    running = start_platform(tmp_path_factory.mktemp("health") / "platform.db", "--token", TOKEN)
    yield running
    running.stop()


@pytest.fixture
async def api(default_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(default_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


async def eventually(check: Callable[[], Awaitable[bool]], within: float, what: str) -> float:
    """Seconds until ``check`` holds, failing past ``within``."""
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < within, f"not within {within} s: {what}"
        await asyncio.sleep(0.1)
    return time.monotonic() - start


async def one_member_bundle(api: PlatformClient, url: str) -> tuple[str, str, str]:
    """A bundle whose member ``weather`` is at ``url``, once discovered: (workspace, bundle, instance)."""
    ws = f"mh-{key()[:8]}"
    bundle = await api.create(
        ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name=f"b-{ws}"), idempotency_key=key()
    )
    server = await api.create(
        ws,
        kinds.MCP_SERVERS,
        McpServerCreate(name="weather", type="url", endpoint_url=url),
        idempotency_key=key(),
    )
    inst = await api.create(
        ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name="weather"), idempotency_key=key()
    )
    await api.put_member(ws, bundle.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))

    async def discovered() -> bool:
        return (await weather(api, ws, bundle.id)).healthy and len(await api.list_tools(ws, bundle.id)) >= 3

    await eventually(discovered, 15, "the member discovered")
    return ws, bundle.id, inst.id


async def weather(api: PlatformClient, ws: str, bundle_id: str) -> GatewayMember:
    [member] = await api.list_members(ws, bundle_id)
    return member


@pytest.mark.parametrize("wire", ["2026-07-28", "handshake"])
async def test_a_killed_member_shows_unhealthy_within_10_s_with_no_call(
    api: PlatformClient, wire: str
) -> None:
    # On the 2026-07-28 wire its listen stream breaks; a handshake-era member is found by a probe.
    with members_subprocess(extra_args=("--handshake-only",) if wire == "handshake" else ()) as remote:
        ws, bundle_id, _ = await one_member_bundle(api, remote.url("weather"))
        remote.process.kill()
        remote.process.wait()

        async def down() -> bool:
            member = await weather(api, ws, bundle_id)
            return not member.healthy and bool(member.message)

        await eventually(down, 10, "the killed member reported unhealthy")


async def test_a_failed_call_marks_the_member_unhealthy_at_once_with_the_reason(api: PlatformClient) -> None:
    # A handshake-era member: no listen stream whose end would give the member away before the call.
    with members_subprocess(extra_args=("--handshake-only",)) as remote:
        ws, bundle_id, _ = await one_member_bundle(api, remote.url("weather"))
        created = await api.create(
            ws,
            kinds.ENDPOINTS,
            EndpointCreate(name=f"ep-{ws}", gateway_bundle_id=bundle_id),
            idempotency_key=key(),
        )
        assert created.api_key is not None
        remote.process.kill()
        remote.process.wait()
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "weather__forecast", "arguments": {"city": "Oslo"}},
        }
        headers = {
            "Authorization": f"Bearer {created.api_key.get_secret_value()}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "weather__forecast",
        }
        body["params"]["_meta"] = {  # type: ignore[index]
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        async with httpx.AsyncClient(timeout=10) as http:
            failed = (await http.post(created.url, json=body, headers=headers)).json()
        assert "did not answer" in failed["error"]["message"], failed
        member = await weather(api, ws, bundle_id)
        assert not member.healthy, "the members list still says healthy right after a failed call"
        assert member.message


async def test_a_member_written_again_in_one_burst_is_discovered_again(
    api: PlatformClient, members: Members
) -> None:
    ws, bundle_id, instance_id = await one_member_bundle(api, members.url("weather"))
    # The server changed without telling anyone; the 60 s interval would not see it in this test.
    await members.add_tool("weather", "radar", quiet=True)
    await api.put_member(
        ws, bundle_id, "weather", GatewayMemberPut(mcp_instance_id=instance_id, enabled=False)
    )
    await api.put_member(
        ws, bundle_id, "weather", GatewayMemberPut(mcp_instance_id=instance_id, enabled=True)
    )

    async def radar_listed() -> bool:
        return "weather__radar" in {t.id for t in await api.list_tools(ws, bundle_id)}

    await eventually(radar_listed, 10, "the member discovered again after its writes")
