"""Regressions for the defects a review of the platform API found, each asserted as a client
sees it: status, problem code and body."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from platform_builders import bundle, create, instance, secret, url_server
from platform_harness import TOKEN, PlatformProcess
from pydantic import SecretStr

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Conflict, NotFound, Refused
from bundle_operator.platform.models import (
    AgentCreate,
    Catalog,
    CatalogTool,
    FaultSpec,
    GatewayEntryCuration,
    GatewayMemberPut,
    GatewayResourcePut,
    GatewayToolCuration,
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServerCreate,
    McpServerUpdate,
    SecretRef,
    SecretUpdate,
)
from bundle_operator.platform.retry import parse_retry_after
from bundle_operator.reference_platform.storage import Store, Tx

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def raw(platform: PlatformProcess) -> httpx.AsyncClient:
    """A plain HTTP client, to see exactly what the server answers."""
    return httpx.AsyncClient(
        base_url=platform.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0
    )


def raw_client(client: PlatformClient) -> httpx.AsyncClient:
    """A plain HTTP client on the platform the fixtures' client talks to."""
    return httpx.AsyncClient(
        base_url=client.base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0
    )


# --- 11: finding what a create made by its idempotency key ---------------------------------------


async def test_an_idempotency_key_finds_the_entity_it_created(client: PlatformClient, ws: str) -> None:
    the_key = "install/42:agent.triage"
    created = await client.create(
        ws, kinds.AGENTS, AgentCreate(name="Triage", model="gpt-5"), idempotency_key=the_key
    )
    found = await client.find_by_idempotency_key(ws, the_key)
    assert found is not None
    assert (found.key, found.kind, found.id, found.exists) == (the_key, "agents", created.id, True)

    await client.delete(ws, kinds.AGENTS, created.id)
    gone = await client.find_by_idempotency_key(ws, the_key)
    assert gone is not None and gone.id == created.id and gone.exists is False

    assert await client.find_by_idempotency_key(ws, "never-sent") is None
    # Keys are per workspace.
    assert await client.find_by_idempotency_key(f"{ws}-other", the_key) is None


async def test_the_idempotency_key_route_answers_problems(platform: PlatformProcess, ws: str) -> None:
    async with raw(platform) as http:
        missing = await http.get(f"/v1/workspaces/{ws}/idempotency-keys/nope")
        assert missing.status_code == 404
        assert missing.headers["Content-Type"].startswith("application/problem+json")
        assert missing.json()["code"] == "not_found"
        bad = await http.get(f"/v1/workspaces/{ws}/idempotency-keys/%C3%A9")
        assert bad.status_code == 422
        assert bad.json()["code"] == "invalid_request"
        assert bad.json()["errors"][0]["field"] == "key"


# --- 1: SKILL.md metadata is bounded and its keys are text ---------------------------------------


def _skill_md(front: str) -> str:
    return f"---\nname: triage\ndescription: Sort issues.\n{front}---\n# Triage\n"


async def test_skill_metadata_with_date_and_number_keys_is_stored_as_text(
    platform: PlatformProcess, ws: str
) -> None:
    front = "2024-01-01: launch\nversions:\n  2024-02-01: beta\n  3: three\n  ~: none\n"
    async with raw(platform) as http:
        created = await http.post(
            f"/v1/workspaces/{ws}/skills", json={"source_type": "inline", "content": _skill_md(front)}
        )
    assert created.status_code == 201, created.text
    assert created.json()["metadata"] == {
        "2024-01-01": "launch",
        "versions": {"2024-02-01": "beta", "3": "three", "null": "none"},
    }


async def test_skill_metadata_larger_than_the_limit_is_refused(platform: PlatformProcess, ws: str) -> None:
    items = "".join(f"  - {'x' * 60}{i}\n" for i in range(1500))  # about 100 KB of metadata
    async with raw(platform) as http:
        refused = await http.post(
            f"/v1/workspaces/{ws}/skills",
            json={"source_type": "inline", "content": _skill_md(f"notes:\n{items}")},
        )
        assert refused.status_code == 422
        problem = refused.json()
        assert problem["code"] == "limit_exceeded"
        assert problem["errors"][0]["field"] == "content"
        listed = await http.get(f"/v1/workspaces/{ws}/skills")
    assert listed.json()["items"] == []


async def test_an_alias_bomb_in_skill_front_matter_is_refused_quickly(
    platform: PlatformProcess, ws: str
) -> None:
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        bomb += f"{name}: &{name} [{','.join(['*' + prev] * 9)}]\n"
    async with raw(platform) as http:
        refused = await http.post(
            f"/v1/workspaces/{ws}/skills", json={"source_type": "inline", "content": _skill_md(bomb)}
        )
        assert refused.status_code == 422
        assert refused.json()["code"] in ("invalid_skill_md", "limit_exceeded")
        # The writer thread is free: the next request is answered at once.
        assert (await http.get(f"/v1/workspaces/{ws}/skills", timeout=2.0)).status_code == 200


# --- 2: member names that would make member__tool split two ways --------------------------------


@pytest.mark.parametrize("name", ["a_", "_a", "_", "a_b_"])
async def test_member_names_starting_or_ending_with_underscore_are_refused(
    client: PlatformClient, ws: str, name: str
) -> None:
    gw = await bundle(client, ws)
    inst = await instance(client, ws, await url_server(client, ws, tools=("x", "_x")))
    with pytest.raises(Refused) as refused:
        await client.put_member(ws, gw.id, name, GatewayMemberPut(mcp_instance_id=inst.id))
    assert refused.value.status == 422
    assert refused.value.errors[0].field == "member"
    assert "'_'" in refused.value.errors[0].message
    assert await client.list_members(ws, gw.id) == []


async def test_a_member_with_underscores_inside_presents_each_tool_once(
    client: PlatformClient, ws: str
) -> None:
    gw = await bundle(client, ws)
    inst = await instance(client, ws, await url_server(client, ws, tools=("x", "_x")))
    await client.put_member(ws, gw.id, "a_b", GatewayMemberPut(mcp_instance_id=inst.id))
    tools = await client.list_tools(ws, gw.id)
    assert [(t.member, t.tool, t.presented_name) for t in tools] == [
        ("a_b", "x", "a_b__x"),
        ("a_b", "_x", "a_b___x"),
    ]
    with pytest.raises(ValueError):
        await client.put_member_prompt(ws, gw.id, "a_", "x", GatewayEntryCuration())


async def test_a_bundle_holds_at_most_200_members_so_an_order_can_name_them_all(
    client: PlatformClient, ws: str
) -> None:
    gw = await bundle(client, ws)
    inst = await instance(client, ws, await url_server(client, ws, tools=("x",)))
    names = [f"m{i}" for i in range(200)]
    for name in names:
        await client.put_member(ws, gw.id, name, GatewayMemberPut(mcp_instance_id=inst.id))
    with pytest.raises(Refused) as full:
        await client.put_member(ws, gw.id, "one-more", GatewayMemberPut(mcp_instance_id=inst.id))
    assert full.value.code == "limit_exceeded"
    reordered = await client.order_members(ws, gw.id, list(reversed(names)))
    assert [m.name for m in reordered] == list(reversed(names))


# --- 3: a tool discovery adds under a name an override holds -------------------------------------


async def test_discovery_under_an_overridden_name_leaves_the_override_serving(
    client: PlatformClient, ws: str
) -> None:
    gw = await bundle(client, ws)
    weather = await url_server(client, ws, name="weather", tools=("forecast",))
    notes = await url_server(client, ws, name="notes", url="https://notes.example.com/mcp", tools=("list",))
    await client.put_member(
        ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=(await instance(client, ws, weather)).id)
    )
    await client.put_member(
        ws, gw.id, "notes", GatewayMemberPut(mcp_instance_id=(await instance(client, ws, notes)).id)
    )
    await client.put_tool(ws, gw.id, "weather__forecast", GatewayToolCuration(override_name="notes__search"))

    # Discovery: the notes upstream now lists a 'search' tool, whose prefixed name is held.
    catalog = Catalog(tools=[CatalogTool(name="list"), CatalogTool(name="search")])
    await client.update(ws, kinds.MCP_SERVERS, notes.id, McpServerUpdate(catalog=catalog), revision=1)
    tools = {t.id: t for t in await client.list_tools(ws, gw.id)}
    assert tools["weather__forecast"].presented_name == "notes__search"
    assert tools["weather__forecast"].served is True
    assert tools["notes__search"].served is False
    assert tools["notes__search"].shadowed_by == "weather__forecast"
    assert tools["notes__list"].served is True

    # Saving the override holder again, curating the shadowed tool and disabling its member all work.
    again = await client.put_tool(
        ws, gw.id, "weather__forecast", GatewayToolCuration(override_name="notes__search")
    )
    assert again.presented_name == "notes__search"
    hidden = await client.put_tool(ws, gw.id, "notes__search", GatewayToolCuration(enabled=False))
    assert hidden.served is False
    notes_instance = next(m for m in await client.list_members(ws, gw.id) if m.name == "notes")
    disabled = await client.put_member(
        ws, gw.id, "notes", GatewayMemberPut(mcp_instance_id=notes_instance.mcp_instance_id, enabled=False)
    )
    assert disabled.enabled is False

    # Another tool still cannot take the held name, and the shadowed tool cannot take a held one.
    with pytest.raises(Conflict) as taken:
        await client.put_tool(ws, gw.id, "notes__list", GatewayToolCuration(override_name="notes__search"))
    assert taken.value.holders == ["weather__forecast"]
    with pytest.raises(Conflict):
        await client.put_tool(ws, gw.id, "notes__search", GatewayToolCuration(override_name="notes__list"))
    # Once the override lets go of the name, the discovered tool is served under it.
    await client.put_tool(ws, gw.id, "weather__forecast", GatewayToolCuration())
    tools = {t.id: t for t in await client.list_tools(ws, gw.id)}
    assert tools["notes__search"].shadowed_by is None
    assert tools["notes__search"].presented_name == "notes__search"


# --- 4: a replayed endpoint create never shows a key issued since ---------------------------------


async def test_a_replay_after_rotation_returns_the_endpoint_without_its_key(
    platform: PlatformProcess, ws: str
) -> None:
    async with raw(platform) as http:
        base = f"/v1/workspaces/{ws}"
        gw = (await http.post(f"{base}/gateway-bundles", json={"name": "assistant"})).json()
        body = {"name": f"ep-{ws}", "gateway_bundle_id": gw["id"]}
        headers = {"Idempotency-Key": "create-endpoint"}
        first = await http.post(f"{base}/endpoints", json=body, headers=headers)
        assert first.status_code == 201 and first.json()["api_key"].startswith("bok_")
        replay = await http.post(f"{base}/endpoints", json=body, headers=headers)
        assert replay.status_code == 200 and replay.json()["api_key"] == first.json()["api_key"]

        rotated = await http.post(f"{base}/endpoints/{first.json()['id']}/api-key")
        assert rotated.status_code == 200
        after = await http.post(f"{base}/endpoints", json=body, headers=headers)
        assert after.status_code == 200
        assert after.headers["Idempotent-Replayed"] == "true"
        assert after.json()["id"] == first.json()["id"]
        assert "api_key" not in after.json()
        assert after.json()["revision"] == first.json()["revision"]


# --- 5: a member must not reach the gateway through a fallback, a secret or dot segments ---------


async def test_clearing_an_instance_url_back_to_a_gateway_server_url_is_refused(
    client: PlatformClient, ws: str, platform: PlatformProcess
) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws, url=platform.url + "/mcp/other/mcp")
    request_body = McpInstanceCreate(
        server_id=spec.id, name="w", endpoint_url="https://weather.example.com/mcp"
    )
    inst = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
    with pytest.raises(Conflict) as refused:
        await client.update(
            ws, kinds.MCP_INSTANCES, inst.id, McpInstanceUpdate(endpoint_url=None), revision=1
        )
    assert refused.value.code == "gateway_self_reference"
    assert (
        await client.get(ws, kinds.MCP_INSTANCES, inst.id)
    ).endpoint_url == "https://weather.example.com/mcp"


async def test_a_secret_member_url_is_resolved_before_it_is_checked(
    client: PlatformClient, ws: str, platform: PlatformProcess
) -> None:
    gw = await bundle(client, ws)
    spec = await url_server(client, ws)
    loop = await secret(client, ws, value=platform.url + "/mcp/x/mcp", name="loop")
    request_body = McpInstanceCreate(
        server_id=spec.id, name="loop", endpoint_url=SecretRef(secret_id=loop.id)
    )
    looping = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    with pytest.raises(Conflict) as refused:
        await client.put_member(ws, gw.id, "loop", GatewayMemberPut(mcp_instance_id=looping.id))
    assert refused.value.code == "gateway_self_reference"

    # A secret already serving as a member's URL cannot be changed into the gateway's URL.
    fine = await secret(client, ws, value="https://weather.example.com/mcp", name="fine")
    request_body = McpInstanceCreate(
        server_id=spec.id, name="fine", endpoint_url=SecretRef(secret_id=fine.id)
    )
    member = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=member.id))
    with pytest.raises(Conflict) as patched:
        await client.update(
            ws,
            kinds.SECRETS,
            fine.id,
            SecretUpdate(value=SecretStr(platform.url.replace("127.0.0.1", "localhost") + "/mcp/x/mcp")),
            revision=1,
        )
    assert patched.value.code == "gateway_self_reference"
    assert patched.value.errors[0].field == "value"


@pytest.mark.parametrize("suffix", ["/mcp/x/./mcp", "/mcp/a/../x/mcp", "/mcp/x/mcp/.", "/mcp/%2e/x/mcp"])
async def test_dot_segments_do_not_hide_the_gateway(
    client: PlatformClient, ws: str, platform: PlatformProcess, suffix: str
) -> None:
    gw = await bundle(client, ws)
    inst = await instance(client, ws, await url_server(client, ws, url=platform.url + suffix))
    with pytest.raises(Conflict) as refused:
        await client.put_member(ws, gw.id, "loop", GatewayMemberPut(mcp_instance_id=inst.id))
    assert refused.value.code == "gateway_self_reference"
    assert await client.list_members(ws, gw.id) == []


# --- 6: bad input answers 4xx problem+json, never 500 -------------------------------------------


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


async def _problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body: dict[str, object] = response.json()
    return body


async def test_unicode_digits_and_huge_numbers_in_paging_are_refused(
    platform: PlatformProcess, ws: str
) -> None:
    base = f"/v1/workspaces/{ws}"
    async with raw(platform) as http:
        gw = (await http.post(f"{base}/gateway-bundles", json={"name": "assistant"})).json()
        for path in (f"{base}/agents", f"{base}/gateway-bundles/{gw['id']}/members"):
            limit = await _problem(await http.get(path, params={"limit": "²"}), 422)
            assert limit["code"] == "invalid_request"
            for cursor in (_b64("²"), _b64("9" * 30), _b64("[1, 2]"), "%%%"):
                body = await _problem(await http.get(path, params={"cursor": cursor}), 422)
                assert body["errors"] == [
                    {"field": "cursor", "message": "is not a cursor from a previous page"}
                ]


@pytest.mark.parametrize(
    "schedule", ["² * * * *", "*/² * * * *", "1-² * * * *", "9999999999999999999999 * * * *"]
)
async def test_cron_fields_with_unicode_digits_are_refused(
    platform: PlatformProcess, ws: str, schedule: str
) -> None:
    async with raw(platform) as http:
        made = await http.post(f"/v1/workspaces/{ws}/agents", json={"name": "a", "model": "m"})
        trigger = {"name": "t", "type": "cron", "agent_id": made.json()["id"], "schedule": schedule}
        body = await _problem(await http.post(f"/v1/workspaces/{ws}/triggers", json=trigger), 422)
    assert body["code"] == "invalid_schedule"


async def test_deeply_nested_json_is_refused(platform: PlatformProcess, ws: str) -> None:
    headers = {"Content-Type": "application/json"}
    async with raw(platform) as http:
        made = await http.post(f"/v1/workspaces/{ws}/agents", json={"name": "a", "model": "m"})
        deep = b"[" * 100_000 + b"]" * 100_000
        body = await _problem(
            await http.post(f"/v1/workspaces/{ws}/agents", content=deep, headers=headers), 400
        )
        assert body["code"] == "invalid_json"
        config = '{"a":' * 5000 + "1" + "}" * 5000
        policy = f'{{"type": "tool_approval", "agent_id": "{made.json()["id"]}", "config": {config}}}'
        response = await http.post(f"/v1/workspaces/{ws}/policies", content=policy.encode(), headers=headers)
        assert (await _problem(response, 400))["code"] == "invalid_json"


async def test_lone_surrogates_are_refused_naming_the_field(platform: PlatformProcess, ws: str) -> None:
    headers = {"Content-Type": "application/json"}
    async with raw(platform) as http:
        secret_body = b'{"name": "s", "value": "abc\\ud800def"}'
        response = await http.post(f"/v1/workspaces/{ws}/secrets", content=secret_body, headers=headers)
        body = await _problem(response, 422)
        assert body["errors"][0]["field"] == "value"  # type: ignore[index]
        listed = await http.get(f"/v1/workspaces/{ws}/secrets")
    assert listed.json()["items"] == []


# --- 7: a trailing newline does not pass a name check ---------------------------------------------


async def test_a_workspace_or_member_name_with_a_trailing_newline_is_refused(
    platform: PlatformProcess, ws: str
) -> None:
    async with raw(platform) as http:
        made = await http.post("/v1/workspaces/ws1%0A/agents", json={"name": "a", "model": "m"})
        body = await _problem(made, 422)
        assert body["errors"] == [
            {
                "field": "workspace",
                "message": "must be lowercase letters, digits and '-', at most 63 characters",
            }
        ]
        assert (await _problem(await http.get("/v1/workspaces/ws1%0A/agents"), 422))[
            "code"
        ] == "invalid_request"
        gw = (await http.post(f"/v1/workspaces/{ws}/gateway-bundles", json={"name": "assistant"})).json()
        member = await http.put(
            f"/v1/workspaces/{ws}/gateway-bundles/{gw['id']}/members/weather%0A",
            json={"mcp_instance_id": "mci_x"},
        )
        assert (await _problem(member, 422))["errors"][0]["field"] == "member"  # type: ignore[index]
        key_lookup = await http.get(f"/v1/workspaces/{ws}/idempotency-keys/k%0A")
        assert (await _problem(key_lookup, 422))["code"] == "invalid_request"


def test_retry_after_takes_ascii_digits_only() -> None:
    assert parse_retry_after("²") is None
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("3\n") == 3.0  # surrounding whitespace is not part of the value


# --- 9: list pages do not skip entries deleted between pages --------------------------------------


async def test_member_and_tool_pages_skip_nothing_when_members_go_between_pages(
    client: PlatformClient, ws: str
) -> None:
    gw = await bundle(client, ws)
    inst = await instance(client, ws, await url_server(client, ws, tools=("a", "b")))
    for name in ("m0", "m1", "m2", "m3", "m4"):
        await client.put_member(ws, gw.id, name, GatewayMemberPut(mcp_instance_id=inst.id))
    members = f"/v1/workspaces/{ws}/gateway-bundles/{gw.id}/members"
    first = (await client.request("GET", members, params={"limit": "2"}, safe=True)).json()
    assert [m["name"] for m in first["items"]] == ["m0", "m1"]
    await client.delete_member(ws, gw.id, "m0")
    second = await client.request(
        "GET", members, params={"limit": "2", "cursor": first["next_cursor"]}, safe=True
    )
    assert [m["name"] for m in second.json()["items"]] == ["m2", "m3"]

    tools = f"/v1/workspaces/{ws}/gateway-bundles/{gw.id}/tools"
    page1 = (await client.request("GET", tools, params={"limit": "3"}, safe=True)).json()
    assert [t["id"] for t in page1["items"]] == ["m1__a", "m1__b", "m2__a"]
    await client.delete_member(ws, gw.id, "m1")
    await client.delete_member(ws, gw.id, "m2")  # the last item seen is gone too
    page2 = await client.request(
        "GET", tools, params={"limit": "3", "cursor": page1["next_cursor"]}, safe=True
    )
    assert [t["id"] for t in page2.json()["items"]] == ["m3__a", "m3__b", "m4__a"]


# --- 10: a DELETE repeated after a lost answer succeeds -------------------------------------------


async def test_a_delete_whose_answer_was_lost_is_not_reported_missing(
    client: PlatformClient, ws: str
) -> None:
    made = await create(client, ws, kinds.AGENTS, AgentCreate(name="a", model="m"))
    spec = FaultSpec(method="DELETE", path=f"/v1/workspaces/{ws}/agents/{made.id}", status=502, when="after")
    await client.request("POST", "/_admin/faults", body=spec.model_dump_json().encode(), safe=False)
    await client.delete(ws, kinds.AGENTS, made.id)  # done by the first call; the repeat finds it gone
    assert await client.find_by_idempotency_key(ws, "nothing") is None
    with pytest.raises(NotFound):
        await client.get(ws, kinds.AGENTS, made.id)
    # A plain delete of something missing is still NotFound.
    with pytest.raises(NotFound):
        await client.delete(ws, kinds.AGENTS, made.id)


# --- 8: a spec change that existing instances would break is refused ------------------------------


async def test_redeclaring_an_env_var_secret_or_required_names_the_instances(
    client: PlatformClient, ws: str
) -> None:
    request_body = McpServerCreate.model_validate(
        {
            "name": "github",
            "type": "command",
            "command": "npx",
            "env_schema": [{"name": "GITHUB_ORG", "type": "string", "required": False}],
        }
    )
    spec = await create(client, ws, kinds.MCP_SERVERS, request_body)
    request_body = McpInstanceCreate(server_id=spec.id, name="gh", env={"GITHUB_ORG": "acme"})
    inst = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    secret_now = McpServerUpdate.model_validate(
        {"env_schema": [{"name": "GITHUB_ORG", "type": "secret", "required": False}]}
    )
    with pytest.raises(Conflict) as secret_change:
        await client.update(ws, kinds.MCP_SERVERS, spec.id, secret_now, revision=1)
    assert secret_change.value.code == "instances_do_not_fit"
    assert secret_change.value.holders == [inst.id]
    assert "env.GITHUB_ORG" in secret_change.value.detail
    assert "acme" not in secret_change.value.detail

    required_now = McpServerUpdate.model_validate(
        {
            "env_schema": [
                {"name": "GITHUB_ORG", "type": "string", "required": False},
                {"name": "GITHUB_HOST", "type": "string"},
            ]
        }
    )
    with pytest.raises(Conflict) as required_change:
        await client.update(ws, kinds.MCP_SERVERS, spec.id, required_now, revision=1)
    assert required_change.value.holders == [inst.id]
    assert (await client.get(ws, kinds.MCP_INSTANCES, inst.id)).env == {"GITHUB_ORG": "acme"}
    assert (await client.get(ws, kinds.MCP_SERVERS, spec.id)).revision == 1


# --- lesser findings ------------------------------------------------------------------------------


async def test_a_405_names_the_allowed_methods(platform: PlatformProcess, ws: str) -> None:
    async with raw(platform) as http:
        response = await http.put(f"/v1/workspaces/{ws}/agents", json={})
    body = await _problem(response, 405)
    assert body["code"] == "method_not_allowed"
    assert {m.strip() for m in response.headers["Allow"].split(",")} >= {"GET", "POST"}


@pytest.mark.parametrize("name", ["guides/../style", "./style", "guides/."])
async def test_resource_names_with_dot_segments_are_refused(
    client: PlatformClient, ws: str, name: str
) -> None:
    gw = await bundle(client, ws)
    # Dots escaped, so neither the client nor the server's router folds the segments away first.
    escaped = name.replace(".", "%2E")
    path = f"/v1/workspaces/{ws}/gateway-bundles/{gw.id}/resources/{escaped}"
    body = GatewayResourcePut(name=name, content="x").model_dump_json().encode()
    async with raw_client(client) as http:
        response = await http.put(path, content=body, headers={"Content-Type": "application/json"})
    problem = await _problem(response, 422)
    assert problem["errors"] == [{"field": "name", "message": "must not have '.' or '..' segments"}]
    assert await client.list_resources(ws, gw.id) == []


async def test_deleting_an_entity_keeps_secrets_of_ids_that_differ_where_it_has_an_underscore(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "platform.db")
    await store.open()
    try:

        def seed(tx: Tx) -> None:
            tx.put_secret("ept_abc:api_key", "mine")
            tx.put_secret("eptXabc:api_key", "someone else's")

        await store.transact(seed)
        await store.transact(lambda tx: tx.delete("ept_abc"))
        left = await store.transact(lambda tx: (tx.secret("ept_abc:api_key"), tx.secret("eptXabc:api_key")))
    finally:
        await store.close()
    assert left == (None, "someone else's")
