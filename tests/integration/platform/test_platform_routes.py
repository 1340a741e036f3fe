"""Every route of the API document is reached through a client method, and every entity kind
makes the full create / get / list / update / delete round trip through the client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml
from platform_builders import SKILL_MD, agent, bundle, command_server, create, instance, secret, url_server
from pydantic import SecretStr

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import NotFound
from bundle_operator.platform.models import (
    AgentCreate,
    AgentUpdate,
    AppCreate,
    AppUpdate,
    ChannelCreate,
    ChannelUpdate,
    EndpointCreate,
    EndpointOAuth,
    EndpointUpdate,
    GatewayBundleCreate,
    GatewayBundleUpdate,
    GatewayMemberPut,
    KnowledgeSetCreate,
    KnowledgeSetUpdate,
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServerCreate,
    McpServerUpdate,
    PolicyCreate,
    PolicyUpdate,
    SecretCreate,
    SecretRef,
    SecretUpdate,
    SkillCreate,
    SkillUpdate,
    TriggerCreate,
    TriggerUpdate,
)
from bundle_operator.platform.openapi_build import OPENAPI_PATH

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# Each documented operation and the client method that calls it (generic CRUD per kind).
_GENERIC = {"create": "create", "list": "list_page", "get": "get", "update": "update", "delete": "delete"}
CLIENT_METHODS: dict[str, str] = {
    "health": "health",
    "issue_endpoint_api_key": "issue_endpoint_key",
    "find_by_idempotency_key": "find_by_idempotency_key",
    "list_models": "list_models",
    "rename_gateway_bundle": "rename_gateway_bundle",
    "list_gateway_audit": "list_audit",
    "list_gateway_members": "list_members",
    "order_gateway_members": "order_members",
    "put_gateway_member": "put_member",
    "delete_gateway_member": "delete_member",
    "list_gateway_tools": "list_tools",
    "get_gateway_tool": "get_tool",
    "put_gateway_tool": "put_tool",
    "list_gateway_member_prompts": "list_member_prompts",
    "put_gateway_member_prompt": "put_member_prompt",
    "list_gateway_member_resources": "list_member_resources",
    "put_gateway_member_resource": "put_member_resource",
    "list_gateway_prompts": "list_prompts",
    "get_gateway_prompt": "get_prompt",
    "put_gateway_prompt": "put_prompt",
    "delete_gateway_prompt": "delete_prompt",
    "list_gateway_resources": "list_resources",
    "get_gateway_resource": "get_resource",
    "put_gateway_resource": "put_resource",
    "delete_gateway_resource": "delete_resource",
    "list_knowledge_sources": "list_sources",
    "put_knowledge_source": "put_source",
    "add_knowledge_source": "add_source",
    "delete_knowledge_source": "delete_source",
    "list_app_versions": "list_app_versions",
    "add_app_version": "add_app_version",
    "update_app_version": "set_app_version_archived",
    "put_artifact": "put_artifact",
    "get_artifact": "get_artifact",
    "list_artifacts": "list_artifacts",
    "delete_artifact": "delete_artifact",
    # The fault admin routes are for tests; they are called with PlatformClient.request.
    "add_fault": "request",
    "list_faults": "request",
    "clear_faults": "request",
}
for _kind in kinds.ALL_KINDS:
    for _verb, _method in _GENERIC.items():
        CLIENT_METHODS[f"{_verb}_{_kind.path.replace('-', '_')}"] = _method


def test_every_documented_operation_has_a_client_method() -> None:
    document = yaml.safe_load(OPENAPI_PATH.read_text())
    operations = {op["operationId"] for ops in document["paths"].values() for op in ops.values()}
    assert operations == set(CLIENT_METHODS)
    for method in CLIENT_METHODS.values():
        assert callable(getattr(PlatformClient, method))


Case = Callable[
    [PlatformClient, str], Awaitable[tuple[Any, Any, dict[str, str | bool], Callable[[Any], bool]]]
]


async def _mcp_server(client: PlatformClient, ws: str) -> Any:
    body = McpServerCreate(name="docker-one", type="docker", image="ghcr.io/acme/mcp:1")
    return (
        body,
        McpServerUpdate(image="ghcr.io/acme/mcp:2"),
        {"type": "docker"},
        lambda e: e.image.endswith(":2"),
    )


async def _mcp_instance(client: PlatformClient, ws: str) -> Any:
    spec = await command_server(client, ws)
    token = await secret(client, ws)
    body = McpInstanceCreate(
        server_id=spec.id, name="gh", env={"GITHUB_TOKEN": SecretRef(secret_id=token.id)}
    )
    update = McpInstanceUpdate(env={"GITHUB_TOKEN": SecretRef(secret_id=token.id), "GITHUB_ORG": "acme"})
    return body, update, {"server_id": spec.id}, lambda e: e.env.get("GITHUB_ORG") == "acme"


async def _skill(client: PlatformClient, ws: str) -> Any:
    changed = SKILL_MD.replace("Sort incoming", "Triage incoming")
    return (
        SkillCreate(source_type="inline", content=SKILL_MD),
        SkillUpdate(content=changed),
        {"name": "triage"},
        lambda e: e.description.startswith("Triage"),
    )


async def _agent(client: PlatformClient, ws: str) -> Any:
    return (
        AgentCreate(name="a", model="m"),
        AgentUpdate(model="n"),
        {"archived": False},
        lambda e: e.model == "n",
    )


async def _channel(client: PlatformClient, ws: str) -> Any:
    bot = await agent(client, ws)
    body = ChannelCreate(type="telegram", agent_id=bot.id, bot_token=SecretStr("1:abc"))
    return body, ChannelUpdate(name="support"), {"agent_id": bot.id}, lambda e: e.name == "support"


async def _trigger(client: PlatformClient, ws: str) -> Any:
    bot = await agent(client, ws)
    body = TriggerCreate(name="kit:daily", type="cron", agent_id=bot.id, schedule="0 8 * * *")
    return body, TriggerUpdate(enabled=False), {"name": "kit:daily"}, lambda e: e.enabled is False


async def _policy(client: PlatformClient, ws: str) -> Any:
    bot = await agent(client, ws)
    body = PolicyCreate(type="tool_approval", agent_id=bot.id, config={"tools": ["x"]})
    return body, PolicyUpdate(config={}), {"type": "tool_approval"}, lambda e: e.config == {}


async def _secret(client: PlatformClient, ws: str) -> Any:
    body = SecretCreate(name="s", value=SecretStr("v"))
    return body, SecretUpdate(name="renamed"), {"name": "s"}, lambda e: e.name == "renamed"


async def _gateway_bundle(client: PlatformClient, ws: str) -> Any:
    body = GatewayBundleCreate(name="charts")
    return body, GatewayBundleUpdate(description="d"), {"name": "charts"}, lambda e: e.description == "d"


async def _endpoint(client: PlatformClient, ws: str) -> Any:
    gw = await bundle(client, ws)
    body = EndpointCreate(
        name=f"rt-{ws}",
        gateway_bundle_id=gw.id,
        auth_mode="OAuth",
        oauth=EndpointOAuth(issuer="https://issuer.example"),
    )
    return (
        body,
        EndpointUpdate(profile="ChatGPT"),
        {"gateway_bundle_id": gw.id},
        lambda e: e.profile == "ChatGPT",
    )


async def _knowledge_set(client: PlatformClient, ws: str) -> Any:
    body = KnowledgeSetCreate(name="laws", description="Statutes")
    return (
        body,
        KnowledgeSetUpdate(data_description="d"),
        {"name": "laws"},
        lambda e: e.data_description == "d",
    )


async def _app(client: PlatformClient, ws: str) -> Any:
    body = AppCreate(name="dashboard", document={"title": "Dashboard"})
    return body, AppUpdate(archived=True), {"archived": False}, lambda e: e.archived is True


CASES: dict[str, Case] = {
    "mcp-servers": _mcp_server,
    "mcp-instances": _mcp_instance,
    "skills": _skill,
    "agents": _agent,
    "channels": _channel,
    "triggers": _trigger,
    "policies": _policy,
    "secrets": _secret,
    "gateway-bundles": _gateway_bundle,
    "endpoints": _endpoint,
    "knowledge-sets": _knowledge_set,
    "apps": _app,
}


@pytest.mark.parametrize("kind", kinds.ALL_KINDS, ids=lambda k: k.path)
async def test_every_kind_round_trips_through_the_client(
    client: PlatformClient, ws: str, kind: kinds.Kind[Any, Any, Any]
) -> None:
    body, update, filters, changed = await CASES[kind.path](client, ws)
    created = await create(client, ws, kind, body)
    assert created.id.startswith(kind.prefix + "_") and created.revision == 1
    assert await client.get(ws, kind, created.id) == created
    listed = await client.list_page(ws, kind, filters=filters)
    assert created.id in [e.id for e in listed.items]
    updated = await client.update(ws, kind, created.id, update, revision=1)
    assert updated.revision == 2 and changed(updated)
    await client.delete(ws, kind, created.id, revision=2)
    with pytest.raises(NotFound):
        await client.get(ws, kind, created.id)


async def test_the_remaining_gateway_routes_through_the_client(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws, tools=("forecast",))
    inst = await instance(client, ws, spec)
    await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
    tool = await client.get_tool(ws, gw.id, "weather__forecast")
    assert (tool.presented_name, tool.definition.name if tool.definition else None) == (
        "weather__forecast",
        "forecast",
    )
    with pytest.raises(NotFound):
        await client.get_tool(ws, gw.id, "weather__nothing")
    await client.delete_member(ws, gw.id, "weather")
    assert await client.list_tools(ws, gw.id) == []
