"""The gateway door's short way for modern ``tools/call`` answers as the SDK's server would.

One aiohttp app serves the same tool handler twice: through the MCP SDK's streamable-HTTP
manager (the path every other request takes) and through gateway_direct. The same request must
get the same status and the same JSON back, whatever the tool returns or raises; requests the
short way is not sure of must be left to the SDK.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from bundle_operator.reference_platform.asgi_bridge import serve_asgi
from bundle_operator.reference_platform.gateway_direct import (
    answer,
    direct_call,
    failure,
    param_headers_agree,
)
from bundle_operator.reference_platform.gateway_limits import json_message, tool_calls

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}
BODY_LIMIT = 4096

# What the tool returns (a result or an exception), by tool name.
OUTCOMES: dict[str, Any] = {
    "plain": {"content": [{"type": "text", "text": "hi"}], "isError": False, "resultType": "complete"},
    "structured": {
        "content": [{"type": "text", "text": "{}"}],
        "structuredContent": {"a": None, "b": [1, 2]},
        "isError": True,
        "resultType": "complete",
    },
    "with_meta": {"content": [], "_meta": {"trace": "t-1"}, "resultType": "complete"},
    "extra_field": {"content": [], "surprise": {"x": 1}, "resultType": "complete"},
    "typed": types.CallToolResult(content=[types.TextContent(type="text", text="typed")]),
    "no_result_type": {"content": []},
    "not_a_result": {"content": "text where a list belongs", "resultType": "complete"},
    "refused": MCPError(code=types.INVALID_PARAMS, message="the tool 'refused' is not for you"),
    "broken": RuntimeError("internal detail that must not reach the wire"),
}


async def outcome(name: str) -> types.CallToolResult | dict[str, Any]:
    found = OUTCOMES[name]
    if isinstance(found, Exception):
        raise found
    return found if isinstance(found, types.CallToolResult) else json.loads(json.dumps(found))


# Input schemas by tool: ``routed`` carries its ``region`` argument in the Mcp-Param-Region header.
SCHEMAS: dict[str, dict[str, Any]] = {
    "routed": {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    },
}
OUTCOMES["routed"] = {"content": [{"type": "text", "text": "routed"}], "resultType": "complete"}


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    server: Server[Any] = Server("bundle-gateway/test", version="1", get_tool_input_schema=SCHEMAS.get)

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | dict[str, Any]:
        return await outcome(params.name)

    server.add_request_handler("tools/call", types.CallToolRequestParams, call)
    manager = StreamableHTTPSessionManager(app=server, json_response=True, max_request_body_size=BODY_LIMIT)

    async def through_sdk(request: web.Request) -> web.StreamResponse:
        return await serve_asgi(manager.handle_request, request, body=await request.read())

    async def directly(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        found = direct_call(request, body, json_message(body), BODY_LIMIT)
        if found is None or not param_headers_agree(request, found, SCHEMAS.get(found.name)):
            return web.Response(status=599, text="left to the SDK")
        try:
            result = await outcome(found.name)
        except Exception as exc:
            return failure(found, exc)
        return answer(found, result, server.server_info_stamp)

    app = web.Application()
    app.router.add_post("/sdk", through_sdk)
    app.router.add_post("/direct", directly)
    async with manager.run(), TestClient(TestServer(app)) as test_client:
        yield test_client


def call_body(name: str, request_id: object = 7, **extra: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": {"text": "x"}, "_meta": META},
        **extra,
    }


def call_headers(name: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }


async def both(
    client: TestClient[web.Request, web.Application], body: object, headers: dict[str, str]
) -> tuple[tuple[int, Any], tuple[int, Any]]:
    raw = json.dumps(body)
    answers = []
    for path in ("/sdk", "/direct"):
        response = await client.post(path, data=raw, headers=headers)
        text = await response.text()
        is_json = response.content_type == "application/json"
        answers.append((response.status, json.loads(text) if is_json else text))
    return answers[0], answers[1]


@pytest.mark.parametrize("tool", sorted(OUTCOMES))
async def test_a_call_gets_the_answer_the_sdk_gives(
    client: TestClient[web.Request, web.Application], tool: str
) -> None:
    sdk, direct = await both(client, call_body(tool), call_headers(tool))
    assert direct == sdk
    if tool == "broken":
        assert "internal detail" not in json.dumps(direct[1])


async def test_the_answer_carries_the_gateways_identity_and_the_request_id(
    client: TestClient[web.Request, web.Application],
) -> None:
    _, (status, message) = await both(
        client, call_body("with_meta", request_id="abc"), call_headers("with_meta")
    )
    assert status == 200
    assert message["id"] == "abc"
    assert message["result"]["_meta"] == {
        "trace": "t-1",
        "io.modelcontextprotocol/serverInfo": {"name": "bundle-gateway/test", "version": "1"},
    }
    assert message["result"]["resultType"] == "complete"


@pytest.mark.parametrize(
    ("case", "body", "headers"),
    [
        ("a name header that disagrees", call_body("plain"), call_headers("other")),
        ("a batch", [call_body("plain")], call_headers("plain")),
        ("a notification", {"jsonrpc": "2.0", "method": "tools/call"}, call_headers("plain")),
        ("another method", {**call_body("plain"), "method": "tools/list"}, call_headers("plain")),
        ("no envelope", {**call_body("plain"), "params": {"name": "plain"}}, call_headers("plain")),
        ("a boolean id", call_body("plain", request_id=True), call_headers("plain")),
        (
            "arguments that are not an object",
            call_body("plain") | {"params": {"name": "plain", "arguments": [1], "_meta": META}},
            call_headers("plain"),
        ),
        (
            "a handshake-era version",
            call_body("plain"),
            call_headers("plain") | {"MCP-Protocol-Version": "2025-11-25"},
        ),
        (
            "an unknown version",
            call_body("plain"),
            call_headers("plain") | {"MCP-Protocol-Version": "2099-01-01"},
        ),
        ("text instead of JSON", call_body("plain"), call_headers("plain") | {"Content-Type": "text/plain"}),
        ("no JSON accepted", call_body("plain"), call_headers("plain") | {"Accept": "text/event-stream"}),
        ("a body over the limit", call_body("plain" + " " * BODY_LIMIT), call_headers("plain")),
    ],
)
async def test_what_it_is_not_sure_of_is_left_to_the_sdk(
    client: TestClient[web.Request, web.Application], case: str, body: object, headers: dict[str, str]
) -> None:
    sdk, direct = await both(client, body, headers)
    assert direct == (599, "left to the SDK"), case
    assert sdk[0] != 599


async def test_a_repeated_routing_header_is_left_to_the_sdk(
    client: TestClient[web.Request, web.Application],
) -> None:
    from multidict import CIMultiDict

    headers = CIMultiDict(call_headers("plain"))
    headers.add("Mcp-Name", "plain")
    raw = json.dumps(call_body("plain"))
    direct = await client.post("/direct", data=raw, headers=headers)
    sdk = await client.post("/sdk", data=raw, headers=headers)
    assert direct.status == 599
    assert sdk.status == 400
    assert "more than once" in (await sdk.json())["error"]["message"]


@pytest.mark.parametrize(
    ("body", "tools"),
    [
        (json.dumps(call_body("plain")).encode(), ["plain"]),
        (
            json.dumps(
                [call_body("a"), {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, call_body("b")]
            ).encode(),
            ["a", "b"],
        ),
        (b'{"jsonrpc": "2.0", "id": 1' + b"1" * 5000 + b', "method": "tools/call"}', []),
        (b"\xff\xfe not UTF-8", []),
        (b"[" * 100_000, []),
        (b"null", []),
    ],
    ids=["one call", "a batch", "an integer past the digit limit", "not UTF-8", "nested too deep", "null"],
)
def test_the_door_reads_a_body_once_and_never_fails_on_it(body: bytes, tools: list[str]) -> None:
    # The rate limit counts these names; a body it cannot read is the SDK's to answer.
    assert tool_calls(json_message(body)) == tools


def routed_call(region: str) -> dict[str, Any]:
    body = call_body("routed")
    body["params"]["arguments"] = {"region": region}
    return body


async def test_a_param_header_that_agrees_is_answered_directly_as_the_sdk_answers(
    client: TestClient[web.Request, web.Application],
) -> None:
    sdk, direct = await both(client, routed_call("eu"), call_headers("routed") | {"Mcp-Param-Region": "eu"})
    assert direct == sdk and direct[0] == 200


@pytest.mark.parametrize("case", ["missing", "different", "repeated"])
async def test_a_param_header_that_does_not_agree_is_left_to_the_sdk(
    client: TestClient[web.Request, web.Application], case: str
) -> None:
    from multidict import CIMultiDict

    headers = CIMultiDict(call_headers("routed"))
    if case == "different":
        headers.add("Mcp-Param-Region", "us")
    elif case == "repeated":
        headers.add("Mcp-Param-Region", "eu")
        headers.add("Mcp-Param-Region", "eu")
    raw = json.dumps(routed_call("eu"))
    direct = await client.post("/direct", data=raw, headers=headers)
    sdk = await client.post("/sdk", data=raw, headers=headers)
    assert direct.status == 599, case
    assert sdk.status == 400 and (await sdk.json())["error"]["code"] == -32020  # HEADER_MISMATCH
