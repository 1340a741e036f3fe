"""One tool call through an Endpoint is one trace: the client's span, the gateway's span for the call,
its forwarding span, and the member that was sent the forwarding span's context in ``params._meta``
(SEP-414) and, over HTTP, as a ``traceparent`` header.

The platform runs as a subprocess exporting to the tests' own OTLP receiver; the members are real
MCP servers (tests/mcp_members.py records what each call brought; the stdio archive's
``trace_keys`` tool answers it); every client is the official MCP client, sending its own
``traceparent`` in ``_meta`` as a traced client does.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from platform_builders import create, key
from platform_harness import TOKEN, PlatformProcess, start_traced_platform
from stdio_archive import digest_of, python_archive, server_spec

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
    GatewayMemberPut,
    McpInstanceCreate,
    McpServerCreate,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

SHOWN = (
    "http.response.status_code",
    "bundle_operator.endpoint",
    "bundle_operator.workspace",
    "bundle_operator.member",
    "gen_ai.tool.name",
    "network.transport",
    "bundle_operator.outcome",
)


@pytest.fixture(scope="module")
def receiver(module_otlp_receiver: OtlpReceiver) -> OtlpReceiver:
    return module_otlp_receiver


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("traced-gateway") / "platform.db"
    running = start_traced_platform(db, receiver.endpoint, "--discovery-interval", "2")
    yield running
    running.stop()


@pytest.fixture
async def traced_api(traced: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(traced.url, token=TOKEN, timeout=20.0) as client:
        yield client


@pytest.fixture
async def plain_api(platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    """The folder's shared platform, which does not trace."""
    async with PlatformClient(platform.url, token=TOKEN, timeout=20.0) as client:
        yield client


def client_context() -> tuple[str, str, dict[str, Any]]:
    """A trace id and span id of the client's own, and the ``_meta`` a traced client sends."""
    trace_id, span_id = key(), key()[:16]
    return trace_id, span_id, {"traceparent": f"00-{trace_id}-{span_id}-01", "tracestate": "client=1"}


async def endpoint_of(api: PlatformClient, ws: str, instance_id: str, member: str) -> tuple[str, str]:
    """A bundle of the one instance behind an Endpoint, once its tools are discovered: (URL, key)."""
    bundle = await create(api, ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name=f"b-{ws}"))
    await api.put_member(ws, bundle.id, member, GatewayMemberPut(mcp_instance_id=instance_id))
    deadline = time.monotonic() + 20
    while not (await api.list_members(ws, bundle.id))[0].healthy or not await api.list_tools(ws, bundle.id):
        assert time.monotonic() < deadline, "the member was not discovered"
        await asyncio.sleep(0.1)
    endpoint = await create(
        api, ws, kinds.ENDPOINTS, EndpointCreate(name=f"ep-{ws}", gateway_bundle_id=bundle.id)
    )
    assert endpoint.api_key is not None
    return endpoint.url, endpoint.api_key.get_secret_value()


async def weather_endpoint(api: PlatformClient, members: Members) -> tuple[str, str]:
    ws = f"tr-{key()[:8]}"
    server = await create(
        api,
        ws,
        kinds.MCP_SERVERS,
        McpServerCreate(name="weather", type="url", endpoint_url=members.url("weather")),
    )
    instance = await create(
        api, ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name="weather")
    )
    return await endpoint_of(api, ws, instance.id, "weather")


def connect(url: str, api_key: str, mode: ConnectMode) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), cache=None, mode=mode)


def parent_of_traceparent(traceparent: str) -> tuple[str, str]:
    """(trace id, parent span id) of a W3C traceparent."""
    version, trace_id, parent_id, flags = traceparent.split("-")
    assert (version, flags) == ("00", "01")
    return trace_id, parent_id


def call_chain(spans: list[ReceivedSpan], client_span: str) -> tuple[ReceivedSpan, ReceivedSpan]:
    """The gateway's span for the call (the client's span its parent) and its forwarding span."""
    (served,) = [s for s in spans if s.parent_id == client_span]
    (forward,) = [s for s in spans if s.parent_id == served.span_id]
    return served, forward


@pytest.mark.parametrize(
    ("client_mode", "member_wire"),
    [("auto", "modern"), ("legacy", "modern"), ("auto", "handshake")],
    ids=["door-direct", "sdk-server", "handshake-member"],
)
async def test_one_tool_call_is_one_trace_from_the_client_through_the_gateway_to_the_member(
    traced_api: PlatformClient, receiver: OtlpReceiver, members: Members, client_mode: str, member_wire: str
) -> None:
    if member_wire == "handshake":
        members.speak_handshake_only("weather")
    url, api_key = await weather_endpoint(traced_api, members)
    trace_id, client_span, meta = client_context()
    async with connect(url, api_key, client_mode) as client:
        result = await client.call_tool("weather__forecast", {"city": "Oslo"}, meta=meta)  # type: ignore[arg-type]
    assert result.content[0].text == "forecast for Oslo: sunny"  # type: ignore[union-attr]

    spans = receiver.wait_for_trace(lambda spans: spans[0].trace_id == trace_id and len(spans) >= 2)
    print(f"\n{client_mode} client, {member_wire} member:\n{OtlpReceiver.render(spans, SHOWN)}")
    served, forward = call_chain(spans, client_span)
    assert (served.name, served.kind, served.status) == ("tools/call weather__forecast", "SERVER", "UNSET")
    assert served.service == "bundle-platform"
    assert served.attributes["mcp.method.name"] == "tools/call"
    assert served.attributes["gen_ai.tool.name"] == "weather__forecast"
    assert served.attributes["bundle_operator.endpoint"] == url.rstrip("/").split("/")[-2]
    assert served.attributes["bundle_operator.outcome"] == "ok"
    assert (forward.name, forward.kind) == ("tools/call forecast", "CLIENT")
    assert forward.attributes["bundle_operator.member"] == "weather"
    assert forward.attributes["network.transport"] == "tcp"
    # The member's parent is the gateway's forwarding span, in the client's trace, with its state.
    sent = members.last_call("weather")["_meta"]
    assert parent_of_traceparent(sent["traceparent"]) == (trace_id, forward.span_id)
    assert sent["tracestate"] == "client=1"
    if member_wire == "modern":
        # The gateway's own POST to the member carries it as a header too.
        header = members.last_headers("weather")["traceparent"]
        assert parent_of_traceparent(header) == (trace_id, forward.span_id)


async def test_a_refused_call_is_a_failed_span_named_by_the_method_alone(
    traced_api: PlatformClient, receiver: OtlpReceiver, members: Members
) -> None:
    url, api_key = await weather_endpoint(traced_api, members)
    trace_id, client_span, meta = client_context()
    async with connect(url, api_key, "auto") as client:
        with pytest.raises(MCPError, match="no tool"):
            await client.call_tool("weather__made_up", {}, meta=meta)  # type: ignore[arg-type]
    (refused,) = receiver.wait_for_trace(lambda spans: spans[0].trace_id == trace_id)
    assert refused.parent_id == client_span
    assert (refused.name, refused.status) == ("tools/call", "ERROR")
    assert refused.attributes["gen_ai.tool.name"] == "weather__made_up"
    assert refused.attributes["bundle_operator.outcome"] == "refused"
    assert refused.attributes["error.type"] == "-32602"
    assert members.tool_calls("weather", "made_up") == 0


async def test_without_tracing_the_member_gets_the_clients_trace_keys_unchanged_and_no_others(
    plain_api: PlatformClient, members: Members
) -> None:
    url, api_key = await weather_endpoint(plain_api, members)
    _, _, meta = client_context()
    for mode in ("auto", "legacy"):
        async with connect(url, api_key, mode) as client:
            await client.call_tool("weather__forecast", {"city": "Oslo"}, meta=meta)  # type: ignore[arg-type]
            sent = members.last_call("weather")["_meta"]
            assert {k: sent.get(k) for k in ("traceparent", "tracestate")} == meta, (mode, sent)
            await client.call_tool("weather__forecast", {"city": "Oslo"})
            sent = members.last_call("weather").get("_meta") or {}
            assert not {"traceparent", "tracestate"} & set(sent), mode
            assert "traceparent" not in members.last_headers("weather"), mode


async def test_a_member_the_platform_runs_over_stdio_continues_the_trace(
    traced_api: PlatformClient, traced: PlatformProcess, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    ws = f"trs-{key()[:8]}"
    data = python_archive(tmp_path)
    await traced_api.put_artifact(ws, digest_of(data), data)
    server = await create(
        traced_api, ws, kinds.MCP_SERVERS, McpServerCreate.model_validate(server_spec(digest_of(data)))
    )
    instance = await create(
        traced_api, ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name="hello")
    )
    url, api_key = await endpoint_of(traced_api, ws, instance.id, "hello")
    trace_id, client_span, meta = client_context()
    async with connect(url, api_key, "auto") as client:
        result = await client.call_tool("hello__trace_keys", {}, meta=meta)  # type: ignore[arg-type]
    received = json.loads(result.content[0].text)  # type: ignore[union-attr]

    spans = receiver.wait_for_trace(lambda spans: spans[0].trace_id == trace_id and len(spans) >= 2)
    print(f"\nstdio member:\n{OtlpReceiver.render(spans, SHOWN)}")
    served, forward = call_chain(spans, client_span)
    assert served.name == "tools/call hello__trace_keys"
    assert forward.name == "tools/call trace_keys"
    assert forward.attributes["network.transport"] == "pipe"
    assert parent_of_traceparent(received["traceparent"]) == (trace_id, forward.span_id)
    assert received["tracestate"] == "client=1"


async def test_each_request_of_a_session_is_a_span_under_its_own_http_request(
    traced_api: PlatformClient, receiver: OtlpReceiver, members: Members
) -> None:
    url, api_key = await weather_endpoint(traced_api, members)
    async with connect(url, api_key, "legacy") as client:
        await client.list_tools()
    route = "POST /mcp/{endpoint}/mcp"
    listed = receiver.wait_for_trace(lambda spans: any(s.name == "tools/list" for s in spans))
    opened = receiver.wait_for_trace(lambda spans: any(s.name == "initialize" for s in spans))
    print(f"\n{OtlpReceiver.render(opened)}\n{OtlpReceiver.render(listed)}")
    for trace, method in ((listed, "tools/list"), (opened, "initialize")):
        http, mcp = trace
        assert (http.name, http.kind, mcp.kind) == (route, "SERVER", "SERVER")
        assert mcp.name == method and mcp.parent_id == http.span_id
        assert http.attributes["bundle_operator.endpoint"] == mcp.attributes["bundle_operator.endpoint"]
    # A later request of the session is not filed under the request that opened it.
    assert listed[0].trace_id != opened[0].trace_id


async def test_a_refusal_at_the_door_fails_the_requests_span_with_its_reason(
    traced_api: PlatformClient, receiver: OtlpReceiver, members: Members
) -> None:
    url, _ = await weather_endpoint(traced_api, members)
    trace_id, client_span, _ = client_context()
    headers = {"Authorization": "Bearer not-the-key", "traceparent": f"00-{trace_id}-{client_span}-01"}
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 401
    (refused,) = receiver.wait_for_trace(lambda spans: spans[0].trace_id == trace_id)
    assert refused.parent_id == client_span and refused.status == "ERROR"
    assert refused.attributes["error.type"] == "unauthorized"
    assert refused.attributes["http.response.status_code"] == 401


async def test_a_client_tracing_its_http_requests_too_gets_the_call_nested_under_its_request(
    traced_api: PlatformClient, receiver: OtlpReceiver, members: Members
) -> None:
    url, api_key = await weather_endpoint(traced_api, members)
    trace_id, mcp_span, meta = client_context()
    http_span = key()[:16]  # the client's HTTP request, under its MCP span, in the same trace
    headers = {"Authorization": f"Bearer {api_key}", "traceparent": f"00-{trace_id}-{http_span}-01"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        await client.call_tool("weather__forecast", {"city": "Oslo"}, meta=meta)  # type: ignore[arg-type]
    spans = receiver.wait_for_trace(
        lambda spans: spans[0].trace_id == trace_id and any(s.name.endswith(" forecast") for s in spans)
    )
    print(f"\nclient tracing its HTTP requests too:\n{OtlpReceiver.render(spans, SHOWN)}")
    (served,) = [s for s in spans if s.name == "tools/call weather__forecast"]
    (request,) = [s for s in spans if s.span_id == served.parent_id]
    assert (request.name, request.parent_id) == ("POST /mcp/{endpoint}/mcp", http_span)
    assert not [s for s in spans if s.parent_id == mcp_span]
