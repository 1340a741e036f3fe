"""The gateway speaks MCP: members discovered with a real client, endpoints served to real clients.

The reference platform runs as a subprocess; the two members are real MCP servers (tests/
mcp_members.py) on loopback; every client here is the official `mcp` Client.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess, start_platform

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    EndpointUpdate,
    GatewayBundleCreate,
    GatewayBundleUpdate,
    GatewayEntryCuration,
    GatewayMemberPut,
    GatewayPromptPut,
    GatewayResourcePut,
    GatewayToolCuration,
    McpInstanceCreate,
    McpServerCreate,
)

# This folder is on sys.path as itself (no __init__.py); the members live in the tests package.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members, running_members

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture(scope="module")
def gateway_platform(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A platform of its own with quick rediscovery, so a timer refresh shows within a test."""
    db = tmp_path_factory.mktemp("gateway") / "platform.db"
    running = start_platform(db, "--token", TOKEN, "--discovery-interval", "2")
    yield running
    running.stop()


@pytest.fixture
async def api(gateway_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(gateway_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {within}s: {what}")


async def member(api: PlatformClient, ws: str, bundle_id: str, name: str, url: str) -> None:
    server = await api.create(
        ws, kinds.MCP_SERVERS, McpServerCreate(name=name, type="url", endpoint_url=url), idempotency_key=key()
    )
    inst = await api.create(
        ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name=name), idempotency_key=key()
    )
    await api.put_member(ws, bundle_id, name, GatewayMemberPut(mcp_instance_id=inst.id))


async def assistant(api: PlatformClient, ws: str, members: Members) -> str:
    """A bundle of both members with curation, an own prompt embedding an own resource."""
    bundle = await api.create(
        ws,
        kinds.GATEWAY_BUNDLES,
        GatewayBundleCreate(name=f"assistant-{ws}", description="Weather and notes for planning"),
        idempotency_key=key(),
    )
    await member(api, ws, bundle.id, "weather", members.url("weather"))
    await member(api, ws, bundle.id, "notes", members.url("notes"))

    async def discovered() -> bool:
        listed = await api.list_members(ws, bundle.id)
        return all(m.healthy for m in listed) and len(await api.list_tools(ws, bundle.id)) >= 4

    await eventually(discovered, what="both members discovered")
    await api.put_tool(
        ws,
        bundle.id,
        "weather__forecast",
        GatewayToolCuration(
            override_name="get_forecast",
            override_description="Seven-day forecast for a city.",
            override_annotations={"openWorldHint": True, "title": None},
        ),
    )
    await api.put_tool(ws, bundle.id, "weather__echo", GatewayToolCuration(enabled=False))
    await api.put_resource(
        ws,
        bundle.id,
        GatewayResourcePut(name="guides/style", title="House style", content="# Style\n\nBe brief."),
    )
    await api.put_prompt(
        ws,
        bundle.id,
        GatewayPromptPut.model_validate(
            {
                "name": "plan",
                "title": "Plan a day",
                "arguments": [
                    {"name": "city", "required": True},
                    {"name": "mood", "values": ["Calm", "busy", "CHEERFUL"]},
                ],
                "messages": [
                    {"role": "user", "text": "Plan {{city}} as a {{mood}} day."},
                    {"role": "user", "resource": "guides/style"},
                ],
            }
        ),
    )
    return bundle.id


async def endpoint(
    api: PlatformClient, ws: str, bundle_id: str, profile: str = "Default"
) -> tuple[str, str, str]:
    created = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate.model_validate(
            {"name": f"ep-{profile.lower()}-{ws}", "gateway_bundle_id": bundle_id, "profile": profile}
        ),
        idempotency_key=key(),
    )
    assert created.api_key is not None
    return created.id, created.url, created.api_key.get_secret_value()


async def served_assistant(api: PlatformClient, members: Members) -> tuple[str, str, str, str]:
    """A fresh workspace with the assistant bundle behind a Default endpoint: (ws, bundle, URL, key)."""
    ws = f"gw-{key()[:8]}"
    bundle_id = await assistant(api, ws, members)
    _, url, api_key = await endpoint(api, ws, bundle_id)
    return ws, bundle_id, url, api_key


def connect(url: str, api_key: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"})
    return Client(streamable_http_client(url, http_client=http), cache=None, **options)


async def test_a_client_sees_the_curated_bundle_and_calls_through(
    api: PlatformClient, members: Members
) -> None:
    ws, bundle_id, url, api_key = await served_assistant(api, members)

    async with connect(url, api_key) as client:
        assert client.instructions == "Weather and notes for planning"
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"get_forecast", "weather__set_alert", "notes__add_note"}
        forecast = tools["get_forecast"]
        assert forecast.description == "Seven-day forecast for a city."
        annotations = forecast.annotations.model_dump(by_alias=True, exclude_none=True)  # type: ignore[union-attr]
        # Shallow merge: upstream readOnlyHint kept, openWorldHint added, title removed by null.
        assert annotations == {"readOnlyHint": True, "openWorldHint": True}
        assert forecast.input_schema["required"] == ["city"]

        result = await client.call_tool("get_forecast", {"city": "Oslo"})
        assert result.content[0].text == "forecast for Oslo: sunny"  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="disabled"):
            await client.call_tool("weather__echo", {"text": "hi"})
        with pytest.raises(MCPError, match="no tool"):
            await client.call_tool("weather__nothing", {})

        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == ["plan", "notes__summarize"]
        rendered = await client.get_prompt("plan", {"city": "Oslo"})
        assert rendered.messages[0].content.text == "Plan Oslo as a  day."  # type: ignore[union-attr]
        embedded = rendered.messages[1].content
        assert embedded.resource.text == "# Style\n\nBe brief."  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="city"):
            await client.get_prompt("plan", {})
        member_prompt = await client.get_prompt("notes__summarize", {"topic": "milk"})
        assert "milk" in member_prompt.messages[0].content.text  # type: ignore[union-attr]
        completion = await client.complete(PromptReference(name="plan"), {"name": "mood", "value": "c"})
        assert completion.completion.values == ["Calm", "CHEERFUL"]

        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        assert uris == ["bundle://resources/guides/style", "notes://today"]
        own = await client.read_resource("bundle://resources/guides/style")
        assert own.contents[0].text == "# Style\n\nBe brief."  # type: ignore[union-attr]
        theirs = await client.read_resource("notes://today")
        assert theirs.contents[0].text == "buy milk"  # type: ignore[union-attr]
        with pytest.raises(MCPError):
            await client.read_resource("bundle://resources/secret-note")

    audit = await api.list_audit(ws, bundle_id)
    outcomes = [(e.presented_name, e.member, e.outcome) for e in audit]
    assert ("get_forecast", "weather", "ok") in outcomes
    assert ("weather__echo", None, "refused") in outcomes  # refused calls name no member
    assert all("Oslo" not in e.model_dump_json() for e in audit)  # arguments never reach the audit log


async def test_the_chatgpt_profile_presents_writes_as_reads_unless_overridden(
    api: PlatformClient, members: Members
) -> None:
    ws = f"gw-{key()[:8]}"
    bundle_id = await assistant(api, ws, members)
    _, url, api_key = await endpoint(api, ws, bundle_id, profile="ChatGPT")
    async with connect(url, api_key) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        alert = tools["weather__set_alert"].annotations
        assert alert is not None and alert.read_only_hint is True and alert.destructive_hint is None
    keep_destructive = GatewayToolCuration(override_annotations={"destructiveHint": True})
    await api.put_tool(ws, bundle_id, "weather__set_alert", keep_destructive)
    async with connect(url, api_key) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        alert = tools["weather__set_alert"].annotations
        assert alert is not None and alert.read_only_hint is False and alert.destructive_hint is True


async def test_keys_disabled_endpoints_and_rotation(api: PlatformClient, members: Members) -> None:
    ws = f"gw-{key()[:8]}"
    bundle_id = await assistant(api, ws, members)
    endpoint_id, url, api_key = await endpoint(api, ws, bundle_id)
    async with httpx.AsyncClient() as http:
        assert (await http.post(url, json={})).status_code == 401
        assert (await http.post(url, json={}, headers={"Authorization": "Bearer wrong"})).status_code == 401

    new_key = (await api.issue_endpoint_key(ws, endpoint_id)).get_secret_value()
    with pytest.raises(Exception):  # noqa: B017 - the old key is refused at the door (401)
        async with connect(url, api_key) as client:
            await client.list_tools()
    async with connect(url, new_key) as client:
        assert len((await client.list_tools()).tools) == 3

    current = await api.get(ws, kinds.ENDPOINTS, endpoint_id)
    disable = EndpointUpdate(enabled=False)
    await api.update(ws, kinds.ENDPOINTS, endpoint_id, disable, revision=current.revision)
    async with httpx.AsyncClient() as http:
        refused = await http.post(url, json={}, headers={"Authorization": f"Bearer {new_key}"})
        assert refused.status_code == 403
        assert (await http.post(url.replace("/ep-", "/nope-"), json={})).status_code == 404


async def test_changes_reach_connected_clients_as_list_changed(api: PlatformClient, members: Members) -> None:
    ws, bundle_id, url, api_key = await served_assistant(api, members)

    # 2026-07-28 clients listen on a subscriptions/listen stream.
    async with (
        connect(url, api_key) as client,
        client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription,
    ):
        events = subscription.__aiter__()
        await api.put_tool(ws, bundle_id, "notes__add_note", GatewayToolCuration(override_name="remember"))
        await asyncio.wait_for(events.__anext__(), timeout=10)
        names = {t.name for t in (await client.list_tools()).tools}
        assert "remember" in names and "notes__add_note" not in names

    # Handshake-era clients get notifications on their session.
    seen: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method:
            seen.append(method)

    async with connect(url, api_key, mode="legacy", message_handler=on_message) as client:
        capabilities = client.server_capabilities
        assert capabilities.tools and capabilities.tools.list_changed
        assert capabilities.prompts and capabilities.prompts.list_changed
        assert capabilities.resources and capabilities.resources.list_changed
        await client.list_tools()
        await asyncio.sleep(0.5)  # the standalone GET stream opens after initialized
        current = await api.get(ws, kinds.GATEWAY_BUNDLES, bundle_id)
        await api.update(
            ws,
            kinds.GATEWAY_BUNDLES,
            bundle_id,
            GatewayBundleUpdate(description="Changed"),
            revision=current.revision,
        )
        await api.put_member_prompt(ws, bundle_id, "notes", "summarize", GatewayEntryCuration(enabled=False))

        async def prompts_changed() -> bool:
            return "notifications/prompts/list_changed" in seen

        await eventually(prompts_changed, within=10, what="prompts list_changed on the legacy session")
        assert [p.name for p in (await client.list_prompts()).prompts] == ["plan"]

        await api.put_member_resource(
            ws, bundle_id, "notes", "notes://today", GatewayEntryCuration(enabled=False)
        )

        async def resources_changed() -> bool:
            return "notifications/resources/list_changed" in seen

        await eventually(resources_changed, within=10, what="resources list_changed")
        with pytest.raises(MCPError):
            await client.read_resource("notes://today")


async def test_discovery_follows_the_member_and_reports_health(api: PlatformClient, members: Members) -> None:
    ws, bundle_id, url, api_key = await served_assistant(api, members)

    # The member's own list_changed brings its new tool to the gateway and on to clients.
    await members.add_tool("weather", "radar", "Radar images")

    async def radar_served() -> bool:
        async with connect(url, api_key) as client:
            return "weather__radar" in {t.name for t in (await client.list_tools()).tools}

    await eventually(radar_served, what="the new tool through the gateway")

    # A member that stops answering turns unhealthy with the reason; its curation stays.
    await member(api, ws, bundle_id, "gone", "http://127.0.0.1:9/mcp")

    async def gone_unhealthy() -> bool:
        listed = {m.name: m for m in await api.list_members(ws, bundle_id)}
        return not listed["gone"].healthy and "discovery failed" in listed["gone"].message

    await eventually(gone_unhealthy, what="an unreachable member reported unhealthy")
    listed = {m.name: m for m in await api.list_members(ws, bundle_id)}
    assert listed["weather"].healthy and listed["weather"].message == ""
    tools = {t.id: t for t in await api.list_tools(ws, bundle_id)}
    assert tools["weather__forecast"].override_name == "get_forecast"


async def test_every_tool_name_mcp_allows_is_presented_and_one_it_does_not_is_reported_never_dropped(
    api: PlatformClient, members: Members
) -> None:
    """Seed 002: every tool of a member is presented as member__tool; MCP allows '.' in tool names."""
    ws, bundle_id, url, api_key = await served_assistant(api, members)
    await members.add_tool("weather", "files.read", "Read a file")
    await members.add_tool("weather", "read file", "A name MCP does not allow")

    async def dotted_served() -> bool:
        async with connect(url, api_key) as client:
            return "weather__files.read" in {t.name for t in (await client.list_tools()).tools}

    await eventually(dotted_served, what="the dotted tool through the gateway")
    async with connect(url, api_key) as client:
        answer = await client.call_tool("weather__files.read", {"text": "x"})
        assert answer.content[0].text == "files.read called"  # type: ignore[union-attr]
        assert "weather__read file" not in {t.name for t in (await client.list_tools()).tools}
        with pytest.raises(MCPError, match="not an MCP tool name"):
            await client.call_tool("weather__read file", {"text": "x"})

    # The one no client could call is in the tool list with the reason, and on the member's health.
    tools = {t.id: t for t in await api.list_tools(ws, bundle_id)}
    unnamed = tools["weather__read file"]
    assert not unnamed.served and unnamed.withheld_reason is not None
    assert "not an MCP tool name" in unnamed.withheld_reason and "override_name" in unnamed.withheld_reason
    weather = {m.name: m for m in await api.list_members(ws, bundle_id)}["weather"]
    assert weather.healthy and "'read file'" in weather.message and "override_name" in weather.message

    # An override gives it a name a client can call; the member is then asked under its own name.
    await api.put_tool(ws, bundle_id, "weather__read file", GatewayToolCuration(override_name="read_file"))
    async with connect(url, api_key) as client:
        answer = await client.call_tool("read_file", {"text": "x"})
        assert answer.content[0].text == "read file called"  # type: ignore[union-attr]
    weather = {m.name: m for m in await api.list_members(ws, bundle_id)}["weather"]
    assert weather.message == ""


async def test_a_member_that_fails_keeps_its_entries_stale_with_their_curation(api: PlatformClient) -> None:
    ws = f"gw-{key()[:8]}"
    bundle = await api.create(
        ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name=f"flaky-{ws}"), idempotency_key=key()
    )
    async with running_members() as flaky:
        await member(api, ws, bundle.id, "weather", flaky.url("weather"))

        async def discovered() -> bool:
            return any(
                t.id == "weather__forecast" and not t.stale for t in await api.list_tools(ws, bundle.id)
            )

        await eventually(discovered, what="the member discovered")
        await api.put_tool(ws, bundle.id, "weather__forecast", GatewayToolCuration(override_title="Outlook"))
    # The member is gone now; the next discovery (every 2 s here) fails.

    async def unhealthy() -> bool:
        [listed] = await api.list_members(ws, bundle.id)
        return not listed.healthy and listed.message.startswith("discovery failed")

    await eventually(unhealthy, what="the stopped member reported unhealthy")
    tools = {t.id: t for t in await api.list_tools(ws, bundle.id)}
    assert set(tools) == {"weather__forecast", "weather__set_alert", "weather__echo"}
    assert all(t.stale and not t.served for t in tools.values())
    assert tools["weather__forecast"].override_title == "Outlook"
    assert tools["weather__forecast"].definition is not None  # what it offered is still shown


async def test_discovery_logs_a_collision_with_an_override_and_serves_the_holder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, members: Members
) -> None:
    from bundle_operator.reference_platform.context import ServerConfig
    from bundle_operator.reference_platform.server import start

    running = await start(ServerConfig(db_path=tmp_path / "p.db", discovery_interval=1))
    try:
        async with PlatformClient(running.url, timeout=10.0) as api:
            ws = "collide"
            bundle_id = await assistant(api, ws, members)
            held = GatewayToolCuration(override_name="weather__storm")
            await api.put_tool(ws, bundle_id, "notes__add_note", held)
            _, url, api_key = await endpoint(api, ws, bundle_id)
            with caplog.at_level("WARNING", logger="bundle_operator.platform.gateway"):
                await members.add_tool("weather", "storm", "Storm warnings")

                async def logged() -> bool:
                    return any("bundle.presented_name_collision" in r.getMessage() for r in caplog.records)

                await eventually(logged, what="the collision logged")
            [record] = [r for r in caplog.records if "presented_name_collision" in r.getMessage()]
            assert record.__dict__["tool"] == "weather__storm"
            assert record.__dict__["held_by"] == "notes__add_note"
            async with connect(url, api_key) as client:
                await client.list_tools()
                answer = await client.call_tool("weather__storm", {"text": "x"})
                assert answer.content[0].text == "noted"  # type: ignore[union-attr]  # the holder answers
    finally:
        await running.stop()


async def test_a_raw_modern_tool_call_is_answered_as_the_gateway_and_a_mismatch_is_refused(
    api: PlatformClient, members: Members
) -> None:
    ws, bundle_id, url, api_key = await served_assistant(api, members)
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def call(name: str, header_name: str) -> tuple[dict[str, Any], dict[str, str]]:
        body = {
            "jsonrpc": "2.0",
            "id": 41,
            "method": "tools/call",
            "params": {"name": name, "arguments": {"city": "Oslo"}, "_meta": envelope},
        }
        headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": header_name,
        }
        return body, headers

    async with httpx.AsyncClient() as http:
        body, headers = call("get_forecast", "get_forecast")
        answered = await http.post(url, json=body, headers=headers)
        assert answered.status_code == 200
        message = answered.json()
        assert message["id"] == 41
        assert message["result"]["content"] == [{"type": "text", "text": "forecast for Oslo: sunny"}]
        # The client talks to the gateway: the member's own identity does not show through.
        assert message["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].startswith(
            "bundle-gateway/"
        )

        body, headers = call("get_forecast", "weather__set_alert")
        refused = await http.post(url, json=body, headers=headers)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32020  # HEADER_MISMATCH, as the SDK's server says it

    audit = await api.list_audit(ws, bundle_id)
    assert [(e.presented_name, e.outcome) for e in audit] == [("get_forecast", "ok")]
