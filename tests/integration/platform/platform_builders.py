"""Small builders for platform entities used across the platform tests."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, TypeVar

import httpx
import pytest
from pydantic import SecretStr

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Conflict
from bundle_operator.platform.kinds import Kind
from bundle_operator.platform.models import (
    Agent,
    AgentCreate,
    ApiModel,
    App,
    AppCreate,
    Catalog,
    CatalogPrompt,
    CatalogResource,
    CatalogTool,
    Entity,
    GatewayBundle,
    GatewayBundleCreate,
    GatewayMemberPut,
    KnowledgeSet,
    KnowledgeSetCreate,
    McpInstance,
    McpInstanceCreate,
    McpServer,
    McpServerCreate,
    Secret,
    SecretCreate,
    SecretRef,
)

E = TypeVar("E", bound=Entity)
C = TypeVar("C", bound=ApiModel)

SKILL_MD = """---
name: triage
description: Sort incoming issues by area and urgency.
---
# Triage

Read the issue, pick labels.
"""


def key() -> str:
    """A fresh idempotency key."""
    return uuid.uuid4().hex


async def create(client: PlatformClient, ws: str, kind: Kind[E, C, Any], body: C) -> E:
    """Create an entity under a fresh idempotency key."""
    return await client.create(ws, kind, body, idempotency_key=key())


async def assert_in_use(
    client: PlatformClient, ws: str, kind: Kind[Any, Any, Any], entity_id: str, holders: list[str]
) -> None:
    """Deleting the entity is refused as in use, naming ``holders``."""
    with pytest.raises(Conflict) as held:
        await client.delete(ws, kind, entity_id)
    assert (held.value.code, held.value.holders) == ("in_use", holders)


async def secret(
    client: PlatformClient, ws: str, value: str = "ghp_" + "x" * 36, name: str = "token"
) -> Secret:
    return await client.create(
        ws, kinds.SECRETS, SecretCreate(name=name, value=SecretStr(value)), idempotency_key=key()
    )


async def command_server(client: PlatformClient, ws: str, name: str = "github") -> McpServer:
    body = McpServerCreate.model_validate(
        {
            "name": name,
            "type": "command",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env_schema": [
                {"name": "GITHUB_TOKEN", "type": "secret"},
                {"name": "GITHUB_ORG", "type": "string", "required": False},
            ],
        }
    )
    return await client.create(ws, kinds.MCP_SERVERS, body, idempotency_key=key())


async def url_server(
    client: PlatformClient,
    ws: str,
    name: str = "weather",
    url: str = "https://weather.example.com/mcp",
    tools: tuple[str, ...] = ("forecast", "current_conditions"),
    prompts: tuple[str, ...] = (),
    resources: tuple[str, ...] = (),
) -> McpServer:
    body = McpServerCreate(
        name=name,
        type="url",
        endpoint_url=url,
        catalog=Catalog(
            tools=[CatalogTool(name=t, description=f"the {t} tool") for t in tools],
            prompts=[CatalogPrompt(name=p) for p in prompts],
            resources=[CatalogResource(uri=r) for r in resources],
        ),
    )
    return await client.create(ws, kinds.MCP_SERVERS, body, idempotency_key=key())


async def instance(
    client: PlatformClient, ws: str, server: McpServer, name: str | None = None
) -> McpInstance:
    env: dict[str, str | SecretRef] = {}
    if server.type == "command":
        env["GITHUB_TOKEN"] = SecretRef(secret_id=(await secret(client, ws)).id)
    body = McpInstanceCreate(server_id=server.id, name=name or server.name, env=env)
    return await client.create(ws, kinds.MCP_INSTANCES, body, idempotency_key=key())


async def agent(client: PlatformClient, ws: str, name: str = "Triage bot", **fields: object) -> Agent:
    body = AgentCreate.model_validate({"name": name, "model": "gpt-5"} | fields)
    return await client.create(ws, kinds.AGENTS, body, idempotency_key=key())


async def bundle(client: PlatformClient, ws: str, name: str = "assistant") -> GatewayBundle:
    body = GatewayBundleCreate(name=name, description="Weather and notes")
    return await client.create(ws, kinds.GATEWAY_BUNDLES, body, idempotency_key=key())


async def knowledge_set(client: PlatformClient, ws: str, name: str = "Statutes") -> KnowledgeSet:
    body = KnowledgeSetCreate(name=name, description="Laws the agent cites")
    return await client.create(ws, kinds.KNOWLEDGE_SETS, body, idempotency_key=key())


async def app(client: PlatformClient, ws: str, name: str = "Dashboard", **fields: object) -> App:
    body = AppCreate.model_validate({"name": name, "document": {"title": name}} | fields)
    return await client.create(ws, kinds.APPS, body, idempotency_key=key())


async def member_gateway(
    api: PlatformClient,
    ws: str,
    members: Any,
    body: GatewayBundleCreate,
    names: tuple[str, ...] = ("weather", "notes"),
) -> str:
    """A gateway bundle of the test members ``names`` (tests/mcp_members.py), each its own server and
    instance, once every member is discovered healthy with at least two tools each: its id."""
    bundle = await api.create(ws, kinds.GATEWAY_BUNDLES, body, idempotency_key=key())
    for name in names:
        server = await api.create(
            ws,
            kinds.MCP_SERVERS,
            McpServerCreate(name=name, type="url", endpoint_url=members.url(name)),
            idempotency_key=key(),
        )
        inst = await api.create(
            ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name=name), idempotency_key=key()
        )
        await api.put_member(ws, bundle.id, name, GatewayMemberPut(mcp_instance_id=inst.id))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if all(m.healthy for m in await api.list_members(ws, bundle.id)) and len(
            await api.list_tools(ws, bundle.id)
        ) >= 2 * len(names):
            return bundle.id
        await asyncio.sleep(0.1)
    raise AssertionError("the members were not discovered")


def rpc_answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an MCP answer, whether plain JSON or the last event of an SSE stream."""
    if response.headers["Content-Type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        message: dict[str, Any] = json.loads(data[-1])
        return message
    plain: dict[str, Any] = response.json()
    return plain
