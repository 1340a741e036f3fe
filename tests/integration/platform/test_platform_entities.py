"""Entity basics over real HTTP: ids, revisions, idempotent create, conditional update, paging,
typed errors, bearer auth and write-only secrets."""

from __future__ import annotations

import httpx
import pytest
from platform_builders import agent, create, key, secret
from pydantic import SecretStr

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import (
    BadRequest,
    Conflict,
    NotFound,
    PreconditionFailed,
    Refused,
    Unauthorized,
)
from bundle_operator.platform.models import AgentCreate, AgentUpdate, SecretCreate, SecretUpdate

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_create_get_update_delete_round_trip(client: PlatformClient, ws: str) -> None:
    created = await agent(client, ws, description="Sorts issues")
    assert created.id.startswith("agt_")
    assert created.revision == 1
    assert created.archived is False

    fetched = await client.get(ws, kinds.AGENTS, created.id)
    assert fetched == created

    updated = await client.update(
        ws, kinds.AGENTS, created.id, AgentUpdate(instructions="Label by area."), revision=1
    )
    assert updated.revision == 2
    assert updated.instructions == "Label by area."
    assert updated.description == "Sorts issues"  # fields left out stay as they were

    await client.delete(ws, kinds.AGENTS, created.id, revision=2)
    with pytest.raises(NotFound):
        await client.get(ws, kinds.AGENTS, created.id)
    with pytest.raises(NotFound):
        await client.delete(ws, kinds.AGENTS, created.id)


async def test_repeated_idempotency_key_returns_the_same_entity(client: PlatformClient, ws: str) -> None:
    body = AgentCreate(name="Triage bot", model="gpt-5")
    the_key = key()
    first = await client.create(ws, kinds.AGENTS, body, idempotency_key=the_key)
    second = await client.create(ws, kinds.AGENTS, body, idempotency_key=the_key)
    assert second == first
    assert len(await client.list_all(ws, kinds.AGENTS)) == 1


async def test_replay_is_marked_and_a_reused_key_with_another_body_is_refused(
    client: PlatformClient, ws: str
) -> None:
    path = f"/v1/workspaces/{ws}/agents"
    headers = {"Idempotency-Key": "k-1"}
    first = await client.request(
        "POST", path, body=b'{"name": "a", "model": "m"}', headers=headers, safe=True
    )
    again = await client.request(
        "POST", path, body=b'{"name": "a", "model": "m"}', headers=headers, safe=True
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    with pytest.raises(Refused) as refused:
        await client.request("POST", path, body=b'{"name": "b", "model": "m"}', headers=headers, safe=True)
    assert refused.value.code == "idempotency_key_reused"


async def test_the_same_key_in_another_workspace_or_kind_is_independent(
    client: PlatformClient, ws: str
) -> None:
    the_key = key()
    one = await client.create(ws, kinds.AGENTS, AgentCreate(name="a", model="m"), idempotency_key=the_key)
    other = await client.create(
        ws + "-b", kinds.AGENTS, AgentCreate(name="a", model="m"), idempotency_key=the_key
    )
    assert one.id != other.id


async def test_update_needs_the_current_revision(client: PlatformClient, ws: str) -> None:
    created = await agent(client, ws)
    await client.update(ws, kinds.AGENTS, created.id, AgentUpdate(model="gpt-5-mini"), revision=1)
    with pytest.raises(PreconditionFailed) as stale:
        await client.update(ws, kinds.AGENTS, created.id, AgentUpdate(model="other"), revision=1)
    assert stale.value.code == "revision_mismatch"
    assert isinstance(stale.value, Conflict)
    assert (await client.get(ws, kinds.AGENTS, created.id)).model == "gpt-5-mini"
    with pytest.raises(PreconditionFailed):
        await client.delete(ws, kinds.AGENTS, created.id, revision=1)


async def test_update_without_if_match_is_refused(client: PlatformClient, ws: str) -> None:
    created = await agent(client, ws)
    with pytest.raises(BadRequest) as missing:
        await client.request(
            "PATCH", f"/v1/workspaces/{ws}/agents/{created.id}", body=b'{"model": "x"}', safe=False
        )
    assert missing.value.status == 428


async def test_etag_header_carries_the_revision(client: PlatformClient, ws: str) -> None:
    created = await agent(client, ws)
    response = await client.request("GET", f"/v1/workspaces/{ws}/agents/{created.id}", safe=True)
    assert response.headers["ETag"] == '"1"'


async def test_lists_are_paginated_in_creation_order(client: PlatformClient, ws: str) -> None:
    made = [await agent(client, ws, name=f"agent {i}") for i in range(7)]
    first = await client.list_page(ws, kinds.AGENTS, limit=3)
    assert [a.id for a in first.items] == [a.id for a in made[:3]]
    assert first.next_cursor is not None
    second = await client.list_page(ws, kinds.AGENTS, limit=3, cursor=first.next_cursor)
    assert [a.id for a in second.items] == [a.id for a in made[3:6]]
    everything = await client.list_all(ws, kinds.AGENTS)
    assert [a.id for a in everything] == [a.id for a in made]
    last = await client.list_page(ws, kinds.AGENTS, limit=7)
    assert last.next_cursor is None


async def test_lists_filter_by_name_and_flags(client: PlatformClient, ws: str) -> None:
    keep = await agent(client, ws, name="keep")
    gone = await agent(client, ws, name="gone")
    await client.update(ws, kinds.AGENTS, gone.id, AgentUpdate(archived=True), revision=1)
    assert [a.id for a in await client.list_all(ws, kinds.AGENTS, filters={"name": "keep"})] == [keep.id]
    archived = await client.list_all(ws, kinds.AGENTS, filters={"archived": True})
    assert [a.id for a in archived] == [gone.id]
    assert archived[0].archived is True


async def test_a_bad_cursor_or_limit_names_the_parameter(client: PlatformClient, ws: str) -> None:
    with pytest.raises(Refused) as bad:
        await client.request("GET", f"/v1/workspaces/{ws}/agents", params={"cursor": "%%%"}, safe=True)
    assert bad.value.errors[0].field == "cursor"
    with pytest.raises(Refused) as big:
        await client.request("GET", f"/v1/workspaces/{ws}/agents", params={"limit": "5000"}, safe=True)
    assert big.value.errors[0].field == "limit"


async def test_unknown_and_invalid_fields_are_named(client: PlatformClient, ws: str) -> None:
    with pytest.raises(Refused) as unknown:
        await client.request(
            "POST",
            f"/v1/workspaces/{ws}/agents",
            body=b'{"name": "a", "model": "m", "colour": "red"}',
            safe=True,
        )
    assert [e.field for e in unknown.value.errors] == ["colour"]
    with pytest.raises(Refused) as missing:
        await client.request("POST", f"/v1/workspaces/{ws}/agents", body=b'{"name": "a"}', safe=True)
    assert [e.field for e in missing.value.errors] == ["model"]


async def test_a_body_that_is_not_json_is_a_bad_request(client: PlatformClient, ws: str) -> None:
    with pytest.raises(BadRequest) as bad:
        await client.request("POST", f"/v1/workspaces/{ws}/agents", body=b"{not json", safe=True)
    assert bad.value.status == 400
    assert bad.value.code == "invalid_json"
    bot = await agent(client, ws)
    nan = f'{{"type": "spend_cap", "agent_id": "{bot.id}", "config": {{"limit": NaN}}}}'.encode()
    with pytest.raises(BadRequest) as not_a_number:
        await client.request("POST", f"/v1/workspaces/{ws}/policies", body=nan, safe=True)
    assert not_a_number.value.code == "invalid_json"


async def test_a_reference_to_a_missing_entity_is_refused_naming_the_field(
    client: PlatformClient, ws: str
) -> None:
    with pytest.raises(Refused) as refused:
        await agent(client, ws, skill_ids=["skl_doesnotexist"])
    assert refused.value.code == "unknown_reference"
    assert refused.value.errors[0].field == "skill_ids.0"


async def test_an_invalid_workspace_name_is_refused(client: PlatformClient) -> None:
    with pytest.raises(Refused) as refused:
        await client.list_page("Not_A_Workspace", kinds.AGENTS)
    assert refused.value.errors[0].field == "workspace"


async def test_unknown_routes_answer_problem_json(client: PlatformClient, ws: str) -> None:
    with pytest.raises(NotFound) as missing:
        await client.request("GET", f"/v1/workspaces/{ws}/widgets", safe=True)
    assert missing.value.code == "not_found"


async def test_calls_without_the_token_are_unauthorized(platform: object, ws: str) -> None:
    url = platform.url  # type: ignore[attr-defined]
    async with PlatformClient(url) as anonymous:
        with pytest.raises(Unauthorized) as denied:
            await anonymous.list_page(ws, kinds.AGENTS)
        assert denied.value.status == 401
        assert await anonymous.health()  # the health route stays open
    async with PlatformClient(url, token="wrong") as wrong:
        with pytest.raises(Unauthorized):
            await wrong.get(ws, kinds.AGENTS, "agt_x")


async def test_secret_values_never_come_back(client: PlatformClient, ws: str) -> None:
    value = "sk-live-" + "q" * 40
    created = await secret(client, ws, value=value, name="openai")
    assert created.name == "openai"
    seen = [
        await client.request("GET", f"/v1/workspaces/{ws}/secrets/{created.id}", safe=True),
        await client.request("GET", f"/v1/workspaces/{ws}/secrets", safe=True),
    ]
    rotated = await client.update(
        ws, kinds.SECRETS, created.id, SecretUpdate(value=SecretStr("new-" + "z" * 40)), revision=1
    )
    assert rotated.revision == 2
    for response in seen:
        assert value not in response.text
        assert "value" not in response.text
    assert "q" * 40 not in repr(SecretCreate(name="x", value=SecretStr(value)))


async def test_secret_create_errors_do_not_echo_the_value(client: PlatformClient, ws: str) -> None:
    value = "v" * 70_000  # over the size limit
    with pytest.raises(Refused) as refused:
        request_body = SecretCreate.model_construct(name="big", value=SecretStr(value))
        await create(client, ws, kinds.SECRETS, request_body)
    assert refused.value.errors[0].field == "value"
    assert "vvvvvvvv" not in str(refused.value)


async def test_raw_http_sees_problem_json(platform: object, ws: str) -> None:
    async with httpx.AsyncClient(base_url=platform.url) as raw:  # type: ignore[attr-defined]
        response = await raw.get(f"/v1/workspaces/{ws}/agents")
    assert response.status_code == 401
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "unauthorized" and body["status"] == 401 and body["detail"]
