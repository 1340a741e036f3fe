"""Results pass through the gateway unchanged (DESIGN.md §9.6), on both wires, read as raw JSON.

What a member answers directly and what the gateway answers for it are compared field by field:
the gateway adds nothing (no ``isError`` the member did not send) and drops nothing, apart from its
own server identity stamp on the 2026-07-28 wire.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_builders import key, member_gateway, rpc_answer
from platform_harness import TOKEN, PlatformProcess, start_platform

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
MODERN = "2026-07-28"
HANDSHAKE = "2025-06-18"
_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


@pytest.fixture(scope="module")
def gateway_platform(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("passthrough") / "platform.db"
    running = start_platform(db, "--token", TOKEN, "--discovery-interval", "2")
    yield running
    running.stop()


@pytest.fixture
async def api(gateway_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(gateway_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


async def served(api: PlatformClient, members: Members) -> tuple[str, str]:
    """An ApiKey endpoint of a bundle of both members, once they are discovered: its URL and key."""
    ws = f"pt-{key()[:8]}"
    bundle_id = await member_gateway(api, ws, members, GatewayBundleCreate(name=f"b-{ws}"))
    created = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate(name=f"ep-{ws}", gateway_bundle_id=bundle_id),
        idempotency_key=key(),
    )
    assert created.api_key is not None
    return created.url, created.api_key.get_secret_value()


def _message(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer, whether plain JSON or one SSE event."""
    # The 2026-07-28 wire gives a JSON-RPC error an HTTP status of its own (400 for -32602).
    assert answer.status_code in (200, 400), answer.text
    return rpc_answer(answer)


async def request(
    url: str, method: str, params: dict[str, Any], *, version: str, token: str | None = None
) -> dict[str, Any]:
    """One request on ``version``'s wire as a raw JSON-RPC exchange (with a handshake when it has one)."""
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=10) as http:
        if version == MODERN:
            envelope = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            params = {**params, "_meta": envelope}
            headers["Mcp-Method"] = method
            if "name" in params:
                headers["Mcp-Name"] = params["name"]
        else:
            opened = await http.post(
                url,
                headers=headers,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": version,
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                },
            )
            _message(opened)
            headers["Mcp-Session-Id"] = opened.headers["Mcp-Session-Id"]
            await http.post(
                url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
        answer = await http.post(
            url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        )
        return _message(answer)


def _without_stamp(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without the server identity stamp, which is the gateway's own on purpose."""
    meta = {k: v for k, v in (result.get("_meta") or {}).items() if k != _SERVER_INFO}
    trimmed = {k: v for k, v in result.items() if k != "_meta"}
    return {**trimmed, **({"_meta": meta} if meta else {})}


@pytest.mark.parametrize(
    ("member_wire", "version"),
    [(MODERN, MODERN), (MODERN, HANDSHAKE), (HANDSHAKE, HANDSHAKE), (HANDSHAKE, MODERN)],
)
async def test_a_tool_result_passes_with_no_field_added_or_dropped(
    api: PlatformClient, members: Members, member_wire: str, version: str
) -> None:
    if member_wire == HANDSHAKE:
        members.speak_handshake_only("weather")
    url, api_key = await served(api, members)
    # No isError, as a member of another SDK may write it; an annotation the SDK's model would keep.
    # resultType is the 2026-07-28 wire's; the member's SDK leaves it out on the older wire.
    written = {"content": [{"type": "text", "text": "rain", "annotations": {"priority": 0.5}}]}
    members.answer_raw("weather", "forecast", {**written, "resultType": "complete"})
    call = {"name": "forecast", "arguments": {"city": "Oslo"}}
    direct = (await request(members.url("weather"), "tools/call", call, version=member_wire))["result"]
    through = await request(
        url, "tools/call", {**call, "name": "weather__forecast"}, version=version, token=api_key
    )
    assert "error" not in through, through
    assert "isError" not in direct
    expected = _without_stamp(direct)
    if version == MODERN:
        expected["resultType"] = "complete"  # the client's wire has it, whatever the member's
    else:
        expected.pop("resultType", None)
    assert _without_stamp(through["result"]) == expected


@pytest.mark.parametrize("version", [MODERN, HANDSHAKE])
async def test_completion_for_a_prompt_or_template_the_bundle_lacks_is_an_error(
    api: PlatformClient, members: Members, version: str
) -> None:
    url, api_key = await served(api, members)
    argument = {"name": "topic", "value": "m"}
    for ref, named in (
        ({"type": "ref/prompt", "name": "notes__nothing"}, "no prompt 'notes__nothing'"),
        ({"type": "ref/resource", "uri": "test://template/{id}/data"}, "no resource template"),
    ):
        answer = await request(
            url, "completion/complete", {"ref": ref, "argument": argument}, version=version, token=api_key
        )
        assert answer.get("error", {}).get("code") == -32602, answer
        assert named in answer["error"]["message"]


async def _modern_call(url: str, api_key: str, params: dict[str, Any], *, progress: bool = False) -> Any:
    """A raw 2026-07-28 ``tools/call`` by a client that can elicit (with a progress token: streamed)."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    if progress:
        meta["progressToken"] = "p-1"
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": params["name"],
        "Authorization": f"Bearer {api_key}",
    }
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {**params, "_meta": meta}}
    async with httpx.AsyncClient(timeout=10) as http:
        return _message(await http.post(url, headers=headers, json=body))


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
async def test_a_members_input_request_reaches_a_modern_client_and_its_answers_the_member(
    api: PlatformClient, members: Members, streamed: bool
) -> None:
    # On the 2026-07-28 wire a member asks for input with an input-required result; the client
    # answers on its retry. The gateway passes both as written, on its JSON path and on the
    # streamed one (a call with a progress token).
    url, api_key = await served(api, members)
    elicit = {"mode": "form", "message": "Go ahead?", "requestedSchema": {"type": "object", "properties": {}}}
    asked = {
        "resultType": "input_required",
        "inputRequests": {"confirm": {"method": "elicitation/create", "params": elicit}},
        "requestState": "member-state-1",
    }
    members.answer_raw("weather", "forecast", asked)
    call = {"name": "weather__forecast", "arguments": {"city": "Oslo"}}
    first = await _modern_call(url, api_key, call, progress=streamed)
    assert "error" not in first, first
    assert _without_stamp(first["result"]) == asked
    done = {"content": [{"type": "text", "text": "rain"}], "resultType": "complete"}
    members.answer_raw("weather", "forecast", done)
    answers = {"confirm": {"action": "accept", "content": {}}}
    retry = {**call, "inputResponses": answers, "requestState": "member-state-1"}
    second = await _modern_call(url, api_key, retry, progress=streamed)
    assert _without_stamp(second["result"]) == done
    reached = members.last_call("weather")
    assert (reached["inputResponses"], reached["requestState"]) == (answers, "member-state-1")
    assert reached["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}}
