"""The MCP member servers of tests/mcp_members.py, checked with the official `mcp.Client`.

Both protocol eras the SDK speaks: "legacy" (the initialize handshake, change notifications on the
session's GET stream, seen through `message_handler`) and the default "auto" mode, which lands on
2026-07-28 (no session; change notifications on `subscriptions/listen` streams via `client.listen`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from tests.mcp_members import (
    SECRET_RESOURCE_URI,
    TODAY_RESOURCE_URI,
    Members,
    members_subprocess,
    members_thread,
    running_members,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

MODES = ["legacy", "auto"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def members() -> Iterator[Members]:
    """Both members in a background thread, shared by the read-only tests of this module."""
    with members_thread() as running:
        yield running


def _text(content: list[types.ContentBlock]) -> str:
    assert len(content) == 1
    block = content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _check_era(client: Client, mode: str) -> None:
    if mode == "legacy":
        assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
    else:
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS


@pytest.mark.parametrize("mode", MODES)
async def test_weather_tools_carry_annotations_and_answer(members: Members, mode: str) -> None:
    assert members.url("weather").startswith("http://127.0.0.1:")
    assert members.url("weather").endswith("/mcp")
    async with Client(members.url("weather"), mode=mode) as client:
        _check_era(client, mode)
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"forecast", "set_alert", "echo"}
        forecast = tools["forecast"].annotations
        assert forecast is not None and forecast.read_only_hint is True and forecast.title == "Forecast"
        alert = tools["set_alert"].annotations
        assert alert is not None and alert.read_only_hint is False and alert.destructive_hint is True
        assert tools["forecast"].input_schema["required"] == ["city"]

        result = await client.call_tool("forecast", {"city": "Paris"})
        assert not result.is_error and _text(result.content) == "forecast for Paris: sunny"
        result = await client.call_tool("set_alert", {"city": "Oslo", "level": "red"})
        assert _text(result.content) == "alert set for Oslo"
        result = await client.call_tool("echo", {"text": "same  text\n"})
        assert _text(result.content) == "same  text\n"
        result = await client.call_tool("forecast", {})
        assert result.is_error
    assert members.last_headers("weather")["host"].startswith("127.0.0.1:")


@pytest.mark.parametrize("mode", MODES)
async def test_notes_prompt_resources_and_tool(members: Members, mode: str) -> None:
    async with Client(members.url("notes"), mode=mode) as client:
        _check_era(client, mode)
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["summarize"]
        arguments = {a.name: a.required for a in prompts[0].arguments or []}
        assert arguments == {"topic": True, "style": False}
        prompt = await client.get_prompt("summarize", {"topic": "groceries"})
        assert len(prompt.messages) == 1 and prompt.messages[0].role == "user"
        content = prompt.messages[0].content
        assert isinstance(content, types.TextContent) and "groceries" in content.text
        styled = await client.get_prompt("summarize", {"topic": "groceries", "style": "terse"})
        styled_content = styled.messages[0].content
        assert isinstance(styled_content, types.TextContent) and "terse" in styled_content.text
        with pytest.raises(MCPError):
            await client.get_prompt("summarize", {})

        uris = {r.uri: r for r in (await client.list_resources()).resources}
        assert set(uris) == {TODAY_RESOURCE_URI, SECRET_RESOURCE_URI}
        assert uris[TODAY_RESOURCE_URI].mime_type == "text/plain"
        read = await client.read_resource(TODAY_RESOURCE_URI)
        today = read.contents[0]
        assert isinstance(today, types.TextResourceContents)
        assert (today.text, today.mime_type) == ("buy milk", "text/plain")

        result = await client.call_tool("add_note", {"text": "call mum"})
        assert _text(result.content) == "noted"


async def test_added_tool_reaches_a_modern_listen_stream_across_threads(members: Members) -> None:
    async with Client(members.url("weather")) as client:
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
        async with client.listen(tools_list_changed=True) as subscription:
            await members.add_tool("weather", "radar", "Rain radar")
            with anyio.fail_after(5):
                async for event in subscription:
                    assert isinstance(event, ToolsListChanged)
                    break
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "radar" in names
        result = await client.call_tool("radar", {})
        assert _text(result.content) == "radar called"
    members.remove_tool_sync("weather", "radar")


async def test_added_tool_reaches_legacy_sessions_and_listen_streams_in_loop() -> None:
    async with running_members() as members:
        legacy_seen = anyio.Event()

        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                legacy_seen.set()

        async with (
            Client(members.url("weather"), mode="legacy", message_handler=on_message) as legacy,
            Client(members.url("weather")) as modern,
            modern.listen(tools_list_changed=True) as subscription,
        ):
            assert legacy.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            await members.wait_legacy_streams("weather", 1)
            await members.add_tool("weather", "uv_index", "UV index")
            with anyio.fail_after(5):
                await legacy_seen.wait()
                async for event in subscription:
                    assert isinstance(event, ToolsListChanged)
                    break
            for client in (legacy, modern):
                tools = (await client.list_tools()).tools
                assert "uv_index" in [tool.name for tool in tools]
        with pytest.raises(ValueError, match="already has"):
            await members.add_tool("weather", "uv_index")


def test_process_serves_until_sigterm_and_requires_the_header() -> None:
    with members_subprocess(require_header=("X-Member-Key", "s3cret")) as members:
        assert set(members.urls) == {"weather", "notes"}
        request = urllib.request.Request(
            members.url("weather"),
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401

        members.add_tool_sync("weather", "pollen", "Pollen count")
        with pytest.raises(ValueError, match="already has"):
            members.add_tool_sync("weather", "pollen")
        with pytest.raises(KeyError):
            members.remove_tool_sync("weather", "no-such-tool")

        async def use() -> None:
            # A Client sends extra headers through its own httpx2 client.
            async with (
                httpx2.AsyncClient(headers={"X-Member-Key": "s3cret"}, timeout=30) as http,
                Client(streamable_http_client(members.url("weather"), http_client=http)) as client,
            ):
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert names == ["forecast", "set_alert", "echo", "pollen"]
            async with Client(members.url("notes"), mode="legacy") as notes:
                assert (await notes.read_resource(TODAY_RESOURCE_URI)).contents[0].uri == TODAY_RESOURCE_URI

        anyio.run(use)
        assert members.last_headers("weather")["x-member-key"] == "s3cret"
        process = members.process
    assert process is not None and process.returncode == 0
