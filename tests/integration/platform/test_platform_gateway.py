"""Gateway bundles over real HTTP: members, presented names, curation, prompts, resources, limits,
self-reference, rename and endpoints."""

from __future__ import annotations

import pytest
from platform_builders import assert_in_use, bundle, create, instance, key, url_server

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Conflict, NotFound, Refused
from bundle_operator.platform.models import (
    Catalog,
    CatalogTool,
    EndpointCreate,
    EndpointOAuth,
    EndpointUpdate,
    GatewayBundleUpdate,
    GatewayEntryCuration,
    GatewayMemberPut,
    GatewayPromptPut,
    GatewayResourcePut,
    GatewayToolCuration,
    McpServerUpdate,
    PromptMessage,
)
from bundle_operator.reference_platform.gateway_rules import is_gateway_endpoint

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def _member(client: PlatformClient, ws: str, bundle_id: str, name: str, **server: object) -> None:
    spec = await url_server(client, ws, name=name, **server)  # type: ignore[arg-type]
    inst = await instance(client, ws, spec)
    await client.put_member(ws, bundle_id, name, GatewayMemberPut(mcp_instance_id=inst.id))


async def test_member_tools_are_presented_as_member__tool(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    await _member(client, ws, gw.id, "weather", tools=("forecast", "current_conditions"))
    await _member(client, ws, gw.id, "notes", url="https://notes.example.com/mcp", tools=("search",))
    tools = await client.list_tools(ws, gw.id)
    assert [t.presented_name for t in tools] == [
        "weather__forecast",
        "weather__current_conditions",
        "notes__search",
    ]
    assert all(not t.stale and t.enabled for t in tools)
    members = await client.list_members(ws, gw.id)
    assert [(m.name, m.position, m.url) for m in members] == [
        ("weather", 0, "https://weather.example.com/mcp"),
        ("notes", 1, "https://notes.example.com/mcp"),
    ]


async def test_member_names_never_contain_the_separator(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws)
    inst = await instance(client, ws, spec)
    with pytest.raises(Refused) as refused:
        await client.put_member(ws, gw.id, "we__ather", GatewayMemberPut(mcp_instance_id=inst.id))
    assert refused.value.errors[0].field == "member"


async def test_override_names_are_checked_and_unique(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    await _member(client, ws, gw.id, "weather", tools=("forecast", "current_conditions"))
    curated = await client.put_tool(
        ws,
        gw.id,
        "weather__forecast",
        GatewayToolCuration(
            override_name="get_forecast",
            override_description="Seven days.",
            override_annotations={"readOnlyHint": True},
        ),
    )
    assert curated.presented_name == "get_forecast"
    assert curated.override_annotations == {"readOnlyHint": True}

    with pytest.raises(Conflict) as taken:
        await client.put_tool(
            ws, gw.id, "weather__current_conditions", GatewayToolCuration(override_name="get_forecast")
        )
    assert taken.value.code == "presented_name_taken"
    assert taken.value.holders == ["weather__forecast"]
    assert "weather__forecast" in taken.value.detail

    # weather__forecast is free while forecast presents its override ...
    borrowed = await client.put_tool(
        ws, gw.id, "weather__current_conditions", GatewayToolCuration(override_name="weather__forecast")
    )
    assert borrowed.presented_name == "weather__forecast"
    # ... so clearing that override would present the same name twice, and is refused.
    with pytest.raises(Conflict) as back:
        await client.put_tool(ws, gw.id, "weather__forecast", GatewayToolCuration())
    assert back.value.holders == ["weather__current_conditions"]

    with pytest.raises(Refused) as pattern:
        await client.request(
            "PUT",
            f"/v1/workspaces/{ws}/gateway-bundles/{gw.id}/tools/weather__forecast",
            body=b'{"override_name": "has space"}',
            safe=True,
        )
    assert pattern.value.errors[0].field == "override_name"


async def test_a_put_replaces_the_whole_curation(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    await _member(client, ws, gw.id, "weather", tools=("forecast",))
    await client.put_tool(
        ws, gw.id, "weather__forecast", GatewayToolCuration(override_title="Forecast", enabled=False)
    )
    cleared = await client.put_tool(ws, gw.id, "weather__forecast", GatewayToolCuration())
    assert (cleared.override_title, cleared.enabled, cleared.presented_name) == (
        None,
        True,
        "weather__forecast",
    )


async def test_adding_a_member_whose_tool_name_an_override_holds_is_refused(
    client: PlatformClient, ws: str
) -> None:
    gw = await bundle(client, ws)
    await _member(client, ws, gw.id, "weather", tools=("forecast",))
    await client.put_tool(ws, gw.id, "weather__forecast", GatewayToolCuration(override_name="notes__search"))
    with pytest.raises(Conflict) as clash:
        await _member(client, ws, gw.id, "notes", url="https://notes.example.com/mcp", tools=("search",))
    assert clash.value.holders == ["weather__forecast"]
    assert [m.name for m in await client.list_members(ws, gw.id)] == ["weather"]  # nothing changed


async def test_curation_of_an_undiscovered_tool_is_kept_as_stale(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws, tools=("forecast",))
    inst = await instance(client, ws, spec)
    await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
    stale = await client.put_tool(ws, gw.id, "weather__alerts", GatewayToolCuration(override_title="Alerts"))
    assert stale.stale is True and stale.definition is None
    # A new discovery (here: a new catalog) brings the tool, and the curation applies.
    await client.update(
        ws,
        kinds.MCP_SERVERS,
        spec.id,
        McpServerUpdate(catalog=Catalog(tools=[CatalogTool(name="forecast"), CatalogTool(name="alerts")])),
        revision=spec.revision,
    )
    alerts = next(t for t in await client.list_tools(ws, gw.id) if t.id == "weather__alerts")
    assert alerts.stale is False and alerts.override_title == "Alerts"
    with pytest.raises(NotFound):
        await client.put_tool(ws, gw.id, "nomember__x", GatewayToolCuration())


async def test_member_order_names_every_member_once(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    await _member(client, ws, gw.id, "weather")
    await _member(client, ws, gw.id, "notes", url="https://notes.example.com/mcp", tools=("search",))
    await _member(client, ws, gw.id, "calendar", url="https://cal.example.com/mcp", tools=("events",))
    for wrong in (
        ["notes", "weather"],
        ["notes", "weather", "calendar", "notes"],
        ["notes", "weather", "mail"],
    ):
        with pytest.raises(Refused) as refused:
            await client.order_members(ws, gw.id, wrong)
        assert refused.value.errors[0].field == "members"
    assert [m.name for m in await client.list_members(ws, gw.id)] == ["weather", "notes", "calendar"]
    ordered = await client.order_members(ws, gw.id, ["calendar", "weather", "notes"])
    assert [m.name for m in ordered] == ["calendar", "weather", "notes"]
    assert (await client.list_tools(ws, gw.id))[0].member == "calendar"


@pytest.mark.parametrize(
    "url",
    [
        "https://gw.example.com/mcp/assistant/mcp",
        "https://GW.Example.COM/mcp/assistant/mcp",
        "https://gw.example.com:443/mcp/assistant/mcp",
        "https://gw.example.com/mcp/assistant/mcp/",
        "https://gw.example.com//mcp/any-name//mcp?x=1",
        "https://gw.example.com/mcp/%61ssistant/mcp",
    ],
)
def test_every_spelling_of_a_gateway_endpoint_is_recognised(url: str) -> None:
    assert is_gateway_endpoint(url, "https://gw.example.com/mcp")


@pytest.mark.parametrize(
    "url",
    [
        "https://gw.example.com:8443/mcp/assistant/mcp",
        "http://gw.example.com/mcp/assistant/mcp",
        "https://other.example.com/mcp/assistant/mcp",
        "https://gw.example.com/mcp/a/b/mcp",
        "https://gw.example.com/mcp/assistant",
        "https://gw.example.com/api/assistant/mcp",
    ],
)
def test_other_urls_are_not_the_gateway(url: str) -> None:
    assert not is_gateway_endpoint(url, "https://gw.example.com/mcp")


@pytest.mark.parametrize("suffix", ["/mcp/other/mcp", "/mcp/x/mcp/", "//mcp/x//mcp"])
async def test_a_member_that_is_the_gateway_itself_is_refused(
    client: PlatformClient, ws: str, platform: object, suffix: str
) -> None:
    url = platform.url.replace("http://", "HTTP://") + suffix  # type: ignore[attr-defined]
    gw = await bundle(client, ws)
    spec = await url_server(client, ws, url=url)
    inst = await instance(client, ws, spec)
    with pytest.raises(Conflict) as refused:
        await client.put_member(ws, gw.id, "loop", GatewayMemberPut(mcp_instance_id=inst.id))
    assert refused.value.code == "gateway_self_reference"
    assert await client.list_members(ws, gw.id) == []


async def test_changing_a_member_url_to_the_gateway_is_refused(
    client: PlatformClient, ws: str, platform: object
) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws)
    inst = await instance(client, ws, spec)
    await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
    loop = platform.url + "/mcp/someone/mcp"  # type: ignore[attr-defined]
    with pytest.raises(Conflict) as refused:
        await client.update(ws, kinds.MCP_SERVERS, spec.id, McpServerUpdate(endpoint_url=loop), revision=1)
    assert refused.value.code == "gateway_self_reference"


async def test_bundle_prompts_follow_the_naming_and_template_rules(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    await client.put_resource(ws, gw.id, GatewayResourcePut(name="guides/style", content="# House style"))
    prompt = GatewayPromptPut.model_validate(
        {
            "name": "plot",
            "arguments": [{"name": "series", "required": True}, {"name": "kind", "values": ["bar", "line"]}],
            "messages": [
                {"role": "user", "text": "Plot {{series}} as a {{ kind }} chart."},
                {"role": "user", "resource": "guides/style"},
            ],
        }
    )
    stored = await client.put_prompt(ws, gw.id, prompt)
    assert stored.name == "plot" and len(stored.messages) == 2
    assert (await client.get_prompt(ws, gw.id, "plot")).arguments[1].values == ["bar", "line"]

    bad = [
        (prompt.model_copy(update={"name": "my__plot"}), "name"),
        (
            prompt.model_copy(update={"messages": [PromptMessage(role="user", text="{{colour}}")]}),
            "messages.0.text",
        ),
        (
            prompt.model_copy(update={"messages": [PromptMessage(role="user", resource="missing")]}),
            "messages.0.resource",
        ),
    ]
    for body, field in bad:
        with pytest.raises(Refused) as refused:
            await client.put_prompt(ws, gw.id, body)
        assert refused.value.errors[0].field == field


async def test_an_embedded_resource_cannot_be_deleted(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    resource = await client.put_resource(ws, gw.id, GatewayResourcePut(name="guides/style", content="x"))
    assert resource.uri == "bundle://resources/guides/style"
    await client.put_prompt(
        ws, gw.id, GatewayPromptPut(name="p", messages=[PromptMessage(role="user", resource="guides/style")])
    )
    with pytest.raises(Conflict) as held:
        await client.delete_resource(ws, gw.id, "guides/style")
    assert held.value.code == "resource_in_use" and held.value.holders == ["p"]
    await client.delete_prompt(ws, gw.id, "p")
    await client.delete_resource(ws, gw.id, "guides/style")
    with pytest.raises(NotFound):
        await client.get_resource(ws, gw.id, "guides/style")


async def test_prompts_and_resources_list_in_name_order_with_pages(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    for name in ("zeta", "alpha", "mid/deep", "beta"):
        await client.put_resource(ws, gw.id, GatewayResourcePut(name=name, content=name))
    names = [r.name for r in await client.list_resources(ws, gw.id)]
    assert names == ["alpha", "beta", "mid/deep", "zeta"]
    first = await client.request(
        "GET", f"/v1/workspaces/{ws}/gateway-bundles/{gw.id}/resources", params={"limit": "3"}, safe=True
    )
    assert [r["name"] for r in first.json()["items"]] == ["alpha", "beta", "mid/deep"]
    assert first.json()["next_cursor"]


async def test_gateway_limits_refuse_and_never_truncate(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    with pytest.raises(Refused) as big_resource:
        await client.put_resource(ws, gw.id, GatewayResourcePut(name="big", content="x" * (256 * 1024 + 1)))
    assert big_resource.value.code == "limit_exceeded"
    with pytest.raises(Refused) as big_prompt:
        await client.put_prompt(
            ws,
            gw.id,
            GatewayPromptPut(name="p", messages=[PromptMessage(role="user", text="y" * (64 * 1024 + 1))]),
        )
    assert big_prompt.value.code == "limit_exceeded"
    # 16 resources of 256 KiB fill the 4 MiB total; the 17th is refused.
    chunk = "z" * (256 * 1024)
    for i in range(16):
        await client.put_resource(ws, gw.id, GatewayResourcePut(name=f"r{i:02d}", content=chunk))
    with pytest.raises(Refused) as total:
        await client.put_resource(ws, gw.id, GatewayResourcePut(name="r16", content="z"))
    assert total.value.code == "limit_exceeded" and "4194304" in total.value.detail
    # Replacing one within its size still fits.
    await client.put_resource(ws, gw.id, GatewayResourcePut(name="r00", content="small"))


async def test_a_bundle_holds_at_most_100_prompts(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    for i in range(100):
        await client.put_prompt(
            ws, gw.id, GatewayPromptPut(name=f"p{i}", messages=[PromptMessage(role="user", text="hi")])
        )
    with pytest.raises(Refused) as refused:
        await client.put_prompt(
            ws, gw.id, GatewayPromptPut(name="p100", messages=[PromptMessage(role="user", text="hi")])
        )
    assert refused.value.code == "limit_exceeded"
    await client.put_prompt(
        ws, gw.id, GatewayPromptPut(name="p5", messages=[PromptMessage(role="user", text="again")])
    )


async def test_member_prompts_and_resources_can_be_curated(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    await _member(client, ws, gw.id, "weather", prompts=("daily",), resources=("weather://stations",))
    prompts = await client.list_member_prompts(ws, gw.id)
    assert [(p.presented_name, p.enabled) for p in prompts] == [("weather__daily", True)]
    hidden = await client.put_member_prompt(
        ws, gw.id, "weather", "daily", GatewayEntryCuration(enabled=False)
    )
    assert hidden.enabled is False and hidden.stale is False
    resources = await client.list_member_resources(ws, gw.id)
    assert [r.uri for r in resources] == ["weather://stations"]
    titled = await client.put_member_resource(
        ws, gw.id, "weather", "weather://stations", GatewayEntryCuration(title="Stations")
    )
    assert titled.title == "Stations" and titled.id == resources[0].id


async def test_rename_needs_force_and_a_free_name(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws, name="assistant")
    await bundle(client, ws, name="planner")
    with pytest.raises(Conflict) as unforced:
        await client.rename_gateway_bundle(ws, gw.id, "helper", force=False)
    assert unforced.value.code == "rename_needs_force"
    assert (await client.get(ws, kinds.GATEWAY_BUNDLES, gw.id)).name == "assistant"
    with pytest.raises(Conflict) as taken:
        await client.rename_gateway_bundle(ws, gw.id, "planner", force=True)
    assert taken.value.code == "name_taken"
    with pytest.raises(Refused):
        await client.rename_gateway_bundle(ws, gw.id, "not a name", force=True)
    renamed = await client.rename_gateway_bundle(ws, gw.id, "helper", force=True)
    assert (renamed.id, renamed.name, renamed.revision) == (gw.id, "helper", 2)


async def test_bundle_names_are_unique_in_a_workspace(client: PlatformClient, ws: str) -> None:
    first = await bundle(client, ws, name="assistant")
    with pytest.raises(Conflict) as taken:
        await bundle(client, ws, name="assistant")
    assert taken.value.holders == [first.id]
    updated = await client.update(
        ws, kinds.GATEWAY_BUNDLES, first.id, GatewayBundleUpdate(overview="For people."), revision=1
    )
    assert updated.overview == "For people." and updated.description == "Weather and notes"


async def test_endpoints_issue_a_key_once_and_go_with_their_bundle(
    client: PlatformClient, ws: str, platform: object
) -> None:
    gw = await bundle(client, ws)
    name = f"ep-{ws}"
    the_key = key()
    body = EndpointCreate(name=name, gateway_bundle_id=gw.id, profile="ChatGPT")
    endpoint = await client.create(ws, kinds.ENDPOINTS, body, idempotency_key=the_key)
    assert endpoint.url == f"{platform.url}/mcp/{name}/mcp"  # type: ignore[attr-defined]
    assert endpoint.api_key is not None
    issued = endpoint.api_key.get_secret_value()
    assert issued not in repr(endpoint)
    # A retried create (the first answer was lost) still hands over the key.
    replay = await client.create(ws, kinds.ENDPOINTS, body, idempotency_key=the_key)
    assert replay.api_key is not None and replay.api_key.get_secret_value() == issued
    fetched = await client.get(ws, kinds.ENDPOINTS, endpoint.id)
    assert fetched.api_key is None
    rotated = await client.issue_endpoint_key(ws, endpoint.id)
    assert rotated.get_secret_value() != issued
    off = await client.update(ws, kinds.ENDPOINTS, endpoint.id, EndpointUpdate(enabled=False), revision=1)
    assert off.enabled is False
    with pytest.raises(Conflict):
        await create(client, ws, kinds.ENDPOINTS, EndpointCreate(name=name, gateway_bundle_id=gw.id))
    await client.delete(ws, kinds.GATEWAY_BUNDLES, gw.id)
    with pytest.raises(NotFound):
        await client.get(ws, kinds.ENDPOINTS, endpoint.id)


async def test_an_oauth_endpoint_has_no_key(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    request_body = EndpointCreate(
        name=f"oa-{ws}",
        gateway_bundle_id=gw.id,
        auth_mode="OAuth",
        oauth=EndpointOAuth(issuer="https://issuer.example"),
    )
    endpoint = await create(client, ws, kinds.ENDPOINTS, request_body)
    assert endpoint.api_key is None
    with pytest.raises(Conflict):
        await client.issue_endpoint_key(ws, endpoint.id)


async def test_an_instance_serving_a_bundle_cannot_be_deleted(client: PlatformClient, ws: str) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws)
    inst = await instance(client, ws, spec)
    await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
    await assert_in_use(client, ws, kinds.MCP_INSTANCES, inst.id, [gw.id])
    await client.delete_member(ws, gw.id, "weather")
    await client.delete(ws, kinds.MCP_INSTANCES, inst.id)
