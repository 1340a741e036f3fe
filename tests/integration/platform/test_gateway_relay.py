"""What a member says to a client mid-call reaches that client through an Endpoint (DESIGN.md §9.6).

"Relay, per client session and per call": while the member behind an Endpoint serves a call, its
progress, its log messages (``logger`` prefixed by the member's name, filtered by the session's
``logging/setLevel``) and its requests to the client (sampling, form elicitation) go to the client
that made the call, and what that client answers goes back to the member; a client that did not
declare a capability makes the member get an error, and the call still completes. Resource
templates are listed and read through the gateway, and resources/subscribe and unsubscribe are
relayed to the member serving the URI.

The member is tests/conformance_member.py (the conformance suite's server, our own), as a process,
behind an ApiKey Endpoint of a real reference platform whose gateway bundle has it as its one
member, its tools presented by their own names (tests/conformance/run.py ``served_gateway``). The
client is the official Python SDK's, on the handshake wire (``mode="legacy"``), unless a test says
otherwise; what it sees through the gateway is compared with what it sees from the member directly.
The last test speaks the 2026-07-28 wire as raw HTTP: a ``tools/call`` carrying a progress token is
answered as an SSE stream with the member's progress before the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

# This folder is on sys.path as itself (no __init__.py); the pieces live in the tests package.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.conformance import run

from bundle_operator.platform.client import PlatformClient
from bundle_operator.reference_platform.process import start_platform

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    # logging/setLevel and resources/(un)subscribe are deprecated on the 2026-07-28 wire, not on this one.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

TOKEN = "relay-token-not-secret"
MODERN = "2026-07-28"
TEMPLATE = "test://template/{id}/data"
# How long a message the member sent may take to reach the client after the call's result.
SETTLE = 0.3


@dataclass(frozen=True)
class Served:
    """The member's own URL, and the Endpoint that serves it with its key."""

    member_url: str
    endpoint_url: str
    api_key: str


async def _endpoint(platform_url: str, member_url: str) -> tuple[str, str]:
    async with (
        PlatformClient(platform_url, token=TOKEN, timeout=10.0) as api,
        run.served_gateway(api, member_url) as (_, endpoint_url, api_key),
    ):
        return endpoint_url, api_key


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The conformance member as a process, a platform, and an Endpoint of the member's bundle."""
    tmp = tmp_path_factory.mktemp("relay")
    ready = tmp / "member-ready.json"
    with (tmp / "member.log").open("w+") as log:
        member = run._start_member(sys.executable, ready, log)
        try:
            deadline = time.monotonic() + 30
            while (member_url := run._member_url(ready)) is None:
                if member.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"the conformance member did not start: {log.read()[-2000:]}")
                time.sleep(0.05)
            platform = start_platform(tmp / "platform.db", "--token", TOKEN, log=tmp / "platform.log")
            try:
                endpoint_url, api_key = asyncio.run(_endpoint(platform.url, member_url))
                yield Served(member_url, endpoint_url, api_key)
            finally:
                platform.stop()
        finally:
            run._stop(member)


@contextlib.asynccontextmanager
async def through(served: Served, **options: Any) -> AsyncIterator[Client]:
    """An SDK client of the Endpoint (handshake wire), with the Endpoint's key."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.api_key}"}, timeout=30) as http,
        Client(
            streamable_http_client(served.endpoint_url, http_client=http),
            mode="legacy",
            cache=None,
            **options,
        ) as client,
    ):
        yield client


@contextlib.asynccontextmanager
async def direct(served: Served, **options: Any) -> AsyncIterator[Client]:
    """An SDK client of the member itself (handshake wire)."""
    async with Client(served.member_url, mode="legacy", cache=None, **options) as client:
        yield client


def _text(result: types.CallToolResult) -> str:
    assert result.content and isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


async def _eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within}s"
        await asyncio.sleep(0.02)


Progress = tuple[float, float | None, str | None]


def _recorder(into: list[Progress]) -> ProgressFnT:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        into.append((progress, total, message))

    return on_progress


# ------------------------------------------------------------------------------------ progress


async def test_the_members_progress_reaches_the_caller_as_it_does_directly(served: Served) -> None:
    seen_directly: list[Progress] = []
    async with direct(served) as client:
        result = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=_recorder(seen_directly)
        )
        assert not result.is_error
    seen_through: list[Progress] = []
    async with through(served) as client:
        result = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=_recorder(seen_through)
        )
        assert not result.is_error, result
        assert _text(result) == "Progress reported: 0, 50, 100 of 100."
    await asyncio.sleep(SETTLE)
    assert [p for p, _, _ in seen_directly] == [0, 50, 100]  # the member's own, as a baseline
    assert seen_through == seen_directly


# ------------------------------------------------------------------------------------ logging


async def test_the_members_log_messages_reach_the_caller_at_the_level_it_set(served: Served) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with through(served, logging_callback=on_log) as client:
        assert client.server_capabilities.logging is not None  # the gateway advertises logging
        result = await client.call_tool("test_tool_with_logging", {})
        assert not result.is_error, result
        await _eventually(lambda: len(logged) >= 3)
        assert [m.data for m in logged] == [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ]
        assert {m.level for m in logged} == {"info"}  # the member logs at info only
        for message in logged:
            assert message.logger is not None and message.logger.startswith(run.MEMBER_NAME), message

        # Above the member's level: the call completes and nothing reaches the client.
        await client.set_logging_level("error")
        logged.clear()
        result = await client.call_tool("test_tool_with_logging", {})
        assert _text(result) == "Logged three messages."
        await asyncio.sleep(SETTLE)
        assert logged == []

        # Back down to info: the session's level holds per session, and delivery resumes.
        await client.set_logging_level("info")
        await client.call_tool("test_tool_with_logging", {})
        await _eventually(lambda: len(logged) >= 3)
        assert len(logged) == 3


# ------------------------------------------------------------------------------------ sampling


async def test_the_members_sampling_request_is_answered_by_the_caller(served: Served) -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="The capital of France is Paris."),
            model="stub-model",
            stop_reason="endTurn",
        )

    prompt = "What is the capital of France?"
    async with through(served, sampling_callback=sample) as client:
        result = await client.call_tool("test_sampling", {"prompt": prompt})
    assert not result.is_error, result
    assert _text(result) == "LLM response: The capital of France is Paris."
    assert len(asked) == 1
    (message,) = asked[0].messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent) and message.content.text == prompt
    assert asked[0].max_tokens == 100


async def test_without_sampling_the_member_gets_an_error_and_the_call_completes(served: Served) -> None:
    async with direct(served) as client:
        directly = await client.call_tool("test_sampling", {"prompt": "Hello?"})
    async with through(served) as client:
        result = await client.call_tool("test_sampling", {"prompt": "Hello?"})
    # As the member reports it when a client without sampling calls it directly.
    assert directly.is_error and _text(directly).startswith("Sampling failed")
    assert result.is_error, result
    assert _text(result).startswith("Sampling failed"), result


# ------------------------------------------------------------------------------------ elicitation


async def test_the_members_form_elicitation_is_answered_by_the_caller(served: Served) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    message = "Please give your username and email"
    async with through(served, elicitation_callback=elicit) as client:
        result = await client.call_tool("test_elicitation", {"message": message})
    assert not result.is_error, result
    assert _text(result) == (
        'User response: action=accept, content={"email": "ada@example.com", "username": "ada"}'
    )
    assert len(asked) == 1
    params = asked[0]
    assert isinstance(params, types.ElicitRequestFormParams), params
    assert params.message == message
    schema = params.requested_schema
    assert set(schema["properties"]) == {"username", "email"}
    assert sorted(schema["required"]) == ["email", "username"]


async def test_without_elicitation_the_member_gets_an_error_and_the_call_completes(served: Served) -> None:
    async with direct(served) as client:
        directly = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    async with through(served) as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert directly.is_error and _text(directly).startswith("Elicitation failed")
    assert result.is_error, result
    assert _text(result).startswith("Elicitation failed"), result


# ------------------------------------------------------------------------------------ templates


async def test_the_members_resource_template_is_listed_and_read_through_the_gateway(served: Served) -> None:
    uri = "test://template/123/data"
    async with direct(served) as client:
        read_directly = await client.read_resource(uri)
    async with through(served) as client:
        templates = (await client.list_resource_templates()).resource_templates
        read = await client.read_resource(uri)
    assert [t.uri_template for t in templates] == [TEMPLATE]
    assert templates[0].mime_type == "application/json"
    dump = read.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert (
        dump["contents"]
        == read_directly.model_dump(by_alias=True, mode="json", exclude_none=True)["contents"]
    )
    (contents,) = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert json.loads(contents.text) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}


# ------------------------------------------------------------------------------------ subscriptions


async def test_subscribing_to_a_member_resource_is_relayed_and_an_unknown_uri_is_an_error(
    served: Served,
) -> None:
    async with through(served) as client:
        assert isinstance(await client.subscribe_resource("test://watched-resource"), types.EmptyResult)
        assert isinstance(await client.unsubscribe_resource("test://watched-resource"), types.EmptyResult)
        with pytest.raises(MCPError) as refused:
            await client.subscribe_resource("test://nowhere-in-this-bundle")
        assert refused.value.code == types.INVALID_PARAMS
        # The session goes on after the error.
        assert isinstance(await client.subscribe_resource("test://watched-resource"), types.EmptyResult)


# ------------------------------------------------------------------------------------ 2026-07-28 wire


async def test_a_modern_call_with_a_progress_token_is_streamed_with_the_members_progress(
    served: Served,
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "tok-7",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_tool_with_progress",
        "Authorization": f"Bearer {served.api_key}",
    }
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(served.endpoint_url, headers=headers, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/event-stream"), answer.headers
    messages = [
        json.loads(line[5:].strip())
        for line in answer.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert [m["params"]["progressToken"] for m in progress] == ["tok-7"] * 3, messages
    assert [(m["params"]["progress"], m["params"].get("total")) for m in progress] == [
        (0, 100),
        (50, 100),
        (100, 100),
    ]
    assert messages[-1].get("id") == 7, messages
    result = messages[-1]["result"]
    assert result["content"] == [{"type": "text", "text": "Progress reported: 0, 50, 100 of 100."}]
    assert "isError" not in result or result["isError"] is False
    assert messages.index(progress[-1]) < len(messages) - 1  # every progress before the result


# ------------------------------------------------------------------------------------ roots


async def test_the_members_roots_request_is_answered_by_the_caller(served: Served) -> None:
    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async with through(served, list_roots_callback=roots) as client:
        result = await client.call_tool("test_list_roots", {})
        assert _text(result) == "Roots: file:///work/project", result
    async with through(served) as client:
        refused = await client.call_tool("test_list_roots", {})
        assert refused.is_error and _text(refused).startswith("Roots failed"), refused


# ------------------------------------------------------------------------------------ cancellation


async def _cancellations(served: Served) -> int:
    async with direct(served) as client:
        read = await client.read_resource("test://cancellations")
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return int(content.text)


async def test_a_cancelled_call_is_cancelled_at_the_member(served: Served) -> None:
    before = await _cancellations(served)
    async with through(served) as client:
        call = asyncio.create_task(client.call_tool("test_wait_for_cancellation", {}))
        await asyncio.sleep(0.5)
        call.cancel()  # the SDK client sends notifications/cancelled for the call
        with contextlib.suppress(asyncio.CancelledError):
            await call
        deadline = time.monotonic() + 5
        while await _cancellations(served) == before:
            assert time.monotonic() < deadline, "the member's call was not cancelled within 5s"
            await asyncio.sleep(0.1)


async def test_a_modern_call_whose_stream_closes_is_cancelled_at_the_member(served: Served) -> None:
    # The 2026-07-28 wire has no cancel notification over HTTP: closing the call's stream is the signal.
    before = await _cancellations(served)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "test_wait_for_cancellation", "arguments": {}, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {served.api_key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_wait_for_cancellation",
    }
    async with httpx.AsyncClient(timeout=30) as http:
        with contextlib.suppress(httpx.TimeoutException):
            await http.post(served.endpoint_url, json=body, headers=headers, timeout=0.5)
    deadline = time.monotonic() + 5
    while await _cancellations(served) == before:
        assert time.monotonic() < deadline, "the member's call was not cancelled within 5s"
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------------------------ updates


async def test_the_members_update_of_a_subscribed_resource_reaches_the_subscriber(served: Served) -> None:
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async with through(served, message_handler=on_message) as client:
        await client.subscribe_resource("test://watched-resource")
        told = await client.call_tool("test_touch_resource", {"uri": "test://watched-resource"})
        assert _text(told) == "Told 1 session(s).", told
        await _eventually(lambda: updated == ["test://watched-resource"])
        await client.unsubscribe_resource("test://watched-resource")
        told = await client.call_tool("test_touch_resource", {"uri": "test://watched-resource"})
        assert _text(told) == "Told 0 session(s).", told
