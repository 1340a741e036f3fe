"""Export writes the gateway bundle named after the document (seed 002: bundle names are the natural
key for export and import): installed into an empty workspace it presents the same tools, prompts and
resources through an endpoint, and the same workspace exports the same bytes."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.export import export_with_report
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
    GatewayEntryCuration,
    GatewayMemberPut,
    GatewayPromptPut,
    GatewayResourcePut,
    GatewayToolCuration,
    McpInstanceCreate,
    McpServerCreate,
)
from tests.integration.engine.conftest import TOKEN
from tests.integration.engine.harness import install
from tests.integration.platform.platform_harness import PlatformProcess, start_platform

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members, running_members

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture(scope="module")
def quick_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    """A platform of its own that discovers members every 2 s."""
    running = start_platform(
        tmp_path_factory.mktemp("export-gw") / "platform.db", "--token", TOKEN, "--discovery-interval", "2"
    )
    yield running
    running.stop()


@pytest.fixture
async def api(quick_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(quick_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


@pytest.fixture
async def members() -> AsyncIterator[Members]:
    async with running_members() as running:
        yield running


def key() -> str:
    return uuid.uuid4().hex


async def discovered(api: PlatformClient, ws: str, bundle_id: str, tools: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listed = await api.list_members(ws, bundle_id)
        if all(m.healthy for m in listed) and len(await api.list_tools(ws, bundle_id)) >= tools:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the members were not discovered within 20 s")


async def built_by_hand(api: PlatformClient, ws: str, members: Members) -> str:
    """A gateway made on the platform (not by a bundle): members whose MCP instances have other
    names, curation of tools, member prompts and resources, an own prompt embedding an own resource."""
    bundle = await api.create(
        ws,
        kinds.GATEWAY_BUNDLES,
        GatewayBundleCreate(
            name="planner", description="Weather and notes", overview="For planning.\n\nBoth."
        ),
        idempotency_key=key(),
    )
    for member, instance_name in (("weather", "Weather Service"), ("notes", "Notes")):
        server = await api.create(
            ws,
            kinds.MCP_SERVERS,
            McpServerCreate(name=instance_name, type="url", endpoint_url=members.url(member)),
            idempotency_key=key(),
        )
        instance = await api.create(
            ws,
            kinds.MCP_INSTANCES,
            McpInstanceCreate(server_id=server.id, name=instance_name),
            idempotency_key=key(),
        )
        await api.put_member(ws, bundle.id, member, GatewayMemberPut(mcp_instance_id=instance.id))
    await discovered(api, ws, bundle.id, 4)
    await api.order_members(ws, bundle.id, ["notes", "weather"])
    forecast = GatewayToolCuration(
        override_name="get_forecast",
        override_description="Seven-day forecast for a city.",
        override_annotations={"openWorldHint": True},
    )
    await api.put_tool(ws, bundle.id, "weather__forecast", forecast)
    await api.put_tool(ws, bundle.id, "weather__echo", GatewayToolCuration(enabled=False))
    await api.put_member_prompt(ws, bundle.id, "notes", "summarize", GatewayEntryCuration(title="Sum up"))
    today = GatewayEntryCuration(title="Today", description="What is on today")
    await api.put_member_resource(ws, bundle.id, "notes", "notes://today", today)
    await api.put_resource(
        ws,
        bundle.id,
        GatewayResourcePut(name="guides/style", title="House style", content="# Style\n\nBrief."),
    )
    plan = {
        "name": "plan",
        "title": "Plan a day",
        "description": "A day in the house style",
        "arguments": [{"name": "city", "required": True}, {"name": "mood", "values": ["calm", "busy"]}],
        "messages": [
            {"role": "user", "text": "Plan {{city}} as a {{mood}} day."},
            {"role": "user", "resource": "guides/style"},
        ],
    }
    await api.put_prompt(ws, bundle.id, GatewayPromptPut.model_validate(plan))
    return bundle.id


async def presented(api: PlatformClient, ws: str, bundle_id: str) -> dict[str, Any]:
    """What a client sees through a new endpoint of the bundle."""
    endpoint = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate.model_validate({"name": f"ep-{ws}", "gateway_bundle_id": bundle_id}),
        idempotency_key=key(),
    )
    assert endpoint.api_key is not None
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {endpoint.api_key.get_secret_value()}"})
    async with Client(streamable_http_client(endpoint.url, http_client=http), cache=None) as client:
        tools = [t.model_dump(mode="json", exclude_none=True) for t in (await client.list_tools()).tools]
        prompts = [
            p.model_dump(mode="json", exclude_none=True) for p in (await client.list_prompts()).prompts
        ]
        resources = [
            r.model_dump(mode="json", exclude_none=True) for r in (await client.list_resources()).resources
        ]
        return {
            "instructions": client.instructions,
            "tools": tools,
            "prompts": prompts,
            "resources": resources,
        }


async def test_a_gateway_exports_and_installs_elsewhere_presenting_the_same(
    api: PlatformClient, members: Members
) -> None:
    ws = f"x-{key()[:12]}"
    bundle_id = await built_by_hand(api, ws, members)
    seen = await presented(api, ws, bundle_id)
    assert {t["name"] for t in seen["tools"]} == {"get_forecast", "weather__set_alert", "notes__add_note"}

    exported = await export_with_report(api, ws)  # named after the workspace's one gateway bundle
    document = exported.document
    assert document["name"] == "planner"
    keys = {m["name"]: m["key"] for m in document["mcps"]}
    assert keys == {"Weather Service": "weather", "Notes": "notes"}  # the member names stay
    gateway = document["gateway"]
    assert gateway["members"] == ["notes", "weather"]
    assert gateway["description"] == "Weather and notes" and gateway["overview"] == "For planning.\n\nBoth."
    assert gateway["tools"] == [
        {
            "member": "weather",
            "tool": "echo",
            "enabled": False,
        },
        {
            "member": "weather",
            "tool": "forecast",
            "override_name": "get_forecast",
            "override_description": "Seven-day forecast for a city.",
            "override_annotations": {"openWorldHint": True},
        },
    ]
    assert gateway["member_prompts"] == [{"member": "notes", "name": "summarize", "title": "Sum up"}]
    assert gateway["member_resources"] == [
        {"member": "notes", "uri": "notes://today", "title": "Today", "description": "What is on today"}
    ]
    assert [p["name"] for p in gateway["prompts"]] == ["plan"]
    assert gateway["resources"][0]["name"] == "guides/style"
    dropped = [d.path for d in exported.report.dropped]
    assert not any("gateway-bundles" in path for path in dropped)  # the gateway is no longer left out
    assert any(path.startswith("endpoints/") for path in dropped)  # its endpoint is, and says so
    assert (await export_with_report(api, ws)).text == exported.text  # the same bytes again

    parsed = parse_bundle_text(exported.text)
    assert parsed.bundle is not None and not parsed.blocking, [i.to_json() for i in parsed.issues]
    target = f"y-{key()[:12]}"
    _, record = await install(api, target, parsed, {})
    copy = record.find("gateway:gateway")
    assert copy is not None and copy.primary_id is not None
    await discovered(api, target, copy.primary_id, 4)
    assert await presented(api, target, copy.primary_id) == seen
    assert (await export_with_report(api, target)).document["gateway"] == gateway


async def test_another_gateway_bundle_is_reported_with_the_name_that_exports_it(
    api: PlatformClient,
) -> None:
    ws = f"z-{key()[:12]}"
    for name in ("first", "second"):
        await api.create(ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name=name), idempotency_key=key())
    exported = await export_with_report(api, ws, "first")
    assert exported.document["gateway"] == {"members": []}
    (line,) = [line for line in exported.report.lines() if "gateway-bundles/" in line]
    assert "--name second" in line
