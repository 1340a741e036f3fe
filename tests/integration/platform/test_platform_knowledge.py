"""Knowledge sets over real HTTP: the set itself, keyed and user-added sources, per-type fields,
write-only credentials, revisions, embedding, and agents holding sets."""

from __future__ import annotations

import json

import pytest
from platform_builders import agent, assert_in_use, key, knowledge_set
from pydantic import SecretStr, ValidationError

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Conflict, NotFound, PlatformError, Refused
from bundle_operator.platform.models import (
    AgentUpdate,
    FaultSpec,
    KnowledgeSetCreate,
    KnowledgeSetUpdate,
    KnowledgeSourcePut,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PASSWORD = "hunter2-" + "p" * 32


def statutes(*laws: str) -> KnowledgeSourcePut:
    return KnowledgeSourcePut(type="statutes", laws=list(laws))


def sftp(password: str | None) -> KnowledgeSourcePut:
    credentials = None if password is None else {"password": SecretStr(password)}
    return KnowledgeSourcePut(type="sftp", host="files.example.com", port=22, credentials=credentials)


async def test_a_set_round_trips(client: PlatformClient, ws: str) -> None:
    created = await knowledge_set(client, ws)
    assert created.id.startswith("kns_") and created.revision == 1
    assert (created.description, created.data_description, created.sources) == (
        "Laws the agent cites",
        "",
        [],
    )
    assert await client.get(ws, kinds.KNOWLEDGE_SETS, created.id) == created
    listed = await client.list_all(ws, kinds.KNOWLEDGE_SETS, filters={"name": "Statutes"})
    assert [s.id for s in listed] == [created.id]
    updated = await client.update(
        ws, kinds.KNOWLEDGE_SETS, created.id, KnowledgeSetUpdate(data_description="German law"), revision=1
    )
    assert (updated.revision, updated.data_description, updated.description) == (
        2,
        "German law",
        "Laws the agent cites",
    )
    await client.delete(ws, kinds.KNOWLEDGE_SETS, created.id)
    with pytest.raises(NotFound):
        await client.get(ws, kinds.KNOWLEDGE_SETS, created.id)


async def test_a_create_is_found_by_its_idempotency_key(client: PlatformClient, ws: str) -> None:
    the_key = key()
    body = KnowledgeSetCreate(name="Statutes")
    first = await client.create(ws, kinds.KNOWLEDGE_SETS, body, idempotency_key=the_key)
    again = await client.create(ws, kinds.KNOWLEDGE_SETS, body, idempotency_key=the_key)
    assert again == first
    record = await client.find_by_idempotency_key(ws, the_key)
    assert record is not None and (record.kind, record.id, record.exists) == (
        "knowledge-sets",
        first.id,
        True,
    )


async def test_put_creates_then_replaces_a_keyed_source(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    created = await client.put_source(ws, ks.id, "statutes-1", statutes("BGB"))
    assert created.id.startswith("src_")
    assert (created.key, created.type, created.laws, created.revision) == (
        "statutes-1",
        "statutes",
        ["BGB"],
        1,
    )
    replaced = await client.put_source(ws, ks.id, "statutes-1", statutes("BGB", "HGB"))
    assert (replaced.id, replaced.laws, replaced.revision) == (created.id, ["BGB", "HGB"], 2)
    # A replace is whole: another type leaves none of the old type's fields behind.
    retyped = await client.put_source(
        ws, ks.id, "statutes-1", KnowledgeSourcePut(type="website", urls=["https://law.example.com"])
    )
    assert (retyped.id, retyped.type, retyped.laws, retyped.urls) == (
        created.id,
        "website",
        None,
        ["https://law.example.com"],
    )
    assert [s.id for s in await client.list_sources(ws, ks.id)] == [created.id]


async def test_a_put_answers_201_when_it_creates_and_200_when_it_replaces(
    client: PlatformClient, ws: str
) -> None:
    ks = await knowledge_set(client, ws)
    path = f"/v1/workspaces/{ws}/knowledge-sets/{ks.id}/sources/laws"
    body = b'{"type": "statutes", "laws": ["BGB"]}'
    first = await client.request("PUT", path, body=body, safe=True)
    again = await client.request("PUT", path, body=body, safe=True)
    assert (first.status_code, again.status_code) == (201, 200)


async def test_user_added_sources_have_no_key(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    keyed = await client.put_source(ws, ks.id, "statutes-1", statutes("BGB"))
    mine = await client.add_source(ws, ks.id, KnowledgeSourcePut(type="ris", host="ris.example.com"))
    theirs = await client.add_source(ws, ks.id, KnowledgeSourcePut(type="ris", host="ris.example.com"))
    assert (mine.key, theirs.key) == (None, None) and mine.id != theirs.id
    assert [s.id for s in await client.list_sources(ws, ks.id)] == [keyed.id, mine.id, theirs.id]
    await client.delete_source(ws, ks.id, mine.id)
    await client.delete_source(ws, ks.id, "statutes-1")
    assert [s.id for s in await client.list_sources(ws, ks.id)] == [theirs.id]
    with pytest.raises(NotFound):
        await client.delete_source(ws, ks.id, "statutes-1")
    with pytest.raises(NotFound):
        await client.delete_source(ws, ks.id, mine.id)
    # A source of another set is not this set's to delete.
    other = await knowledge_set(client, ws, name="Other")
    with pytest.raises(NotFound):
        await client.delete_source(ws, other.id, theirs.id)


async def test_sources_of_a_missing_set_are_not_found(client: PlatformClient, ws: str) -> None:
    with pytest.raises(NotFound):
        await client.list_sources(ws, "kns_missing")
    with pytest.raises(NotFound):
        await client.put_source(ws, "kns_missing", "laws", statutes("BGB"))


async def _refused_put(
    client: PlatformClient, ws: str, set_id: str, source_key: str, body: object
) -> Refused:
    path = f"/v1/workspaces/{ws}/knowledge-sets/{set_id}/sources/{source_key}"
    with pytest.raises(Refused) as refused:
        await client.request("PUT", path, body=json.dumps(body).encode(), safe=True)
    return refused.value


async def test_fields_must_belong_to_the_type_and_required_ones_be_given(
    client: PlatformClient, ws: str
) -> None:
    ks = await knowledge_set(client, ws)
    foreign = await _refused_put(client, ws, ks.id, "s3", {"type": "s3", "bucket": "docs", "laws": ["BGB"]})
    assert [e.field for e in foreign.errors] == ["laws"]
    missing = await _refused_put(client, ws, ks.id, "smb", {"type": "smb", "server": "fs.example.com"})
    assert [e.field for e in missing.errors] == ["share"]
    empty = await _refused_put(client, ws, ks.id, "s3", {"type": "s3", "bucket": ""})
    assert [e.field for e in empty.errors] == ["bucket"]
    bad_key = await _refused_put(client, ws, ks.id, "Not_A_Key", {"type": "ris", "host": "ris.example.com"})
    assert [e.field for e in bad_key.errors] == ["key"]
    schedule = await _refused_put(
        client, ws, ks.id, "ris", {"type": "ris", "host": "ris.example.com", "sync_schedule": "every day"}
    )
    assert [e.field for e in schedule.errors] == ["sync_schedule"] and schedule.code == "invalid_schedule"
    # The client's own model refuses the same before anything is sent.
    with pytest.raises(ValidationError):
        KnowledgeSourcePut(type="s3", bucket="docs", host="ris.example.com")
    assert await client.list_sources(ws, ks.id) == []


async def test_a_valid_sync_schedule_is_kept(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    body = KnowledgeSourcePut(type="ris", host="ris.example.com", sync_schedule="0 3 * * 1")
    assert (await client.put_source(ws, ks.id, "ris", body)).sync_schedule == "0 3 * * 1"


async def test_credentials_never_come_back(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    path = f"/v1/workspaces/{ws}/knowledge-sets/{ks.id}/sources/files"
    body = {"type": "sftp", "host": "files.example.com", "credentials": {"password": PASSWORD}}
    written = await client.request("PUT", path, body=json.dumps(body).encode(), safe=True)
    seen = [
        written,
        await client.request("GET", f"/v1/workspaces/{ws}/knowledge-sets/{ks.id}", safe=True),
        await client.request("GET", f"/v1/workspaces/{ws}/knowledge-sets", safe=True),
        await client.request("GET", f"/v1/workspaces/{ws}/knowledge-sets/{ks.id}/sources", safe=True),
        await client.request("GET", f"/v1/workspaces/{ws}/secrets", safe=True),
    ]
    for response in seen:
        assert PASSWORD not in response.text
    secret_id = written.json()["credentials"]["password"]
    assert secret_id.startswith("sec_")
    assert secret_id in [s.id for s in await client.list_all(ws, kinds.SECRETS)]


async def test_null_credentials_keep_the_stored_ones_and_a_dict_replaces_them(
    client: PlatformClient, ws: str
) -> None:
    ks = await knowledge_set(client, ws)
    first = (await client.put_source(ws, ks.id, "files", sftp(PASSWORD))).credentials["password"]
    kept = await client.put_source(ws, ks.id, "files", sftp(None))
    assert kept.credentials == {"password": first}
    same = await client.put_source(ws, ks.id, "files", sftp(PASSWORD))
    assert same.credentials == {"password": first}  # the same value keeps its secret
    rotated = await client.put_source(ws, ks.id, "files", sftp("another-" + "q" * 32))
    assert rotated.credentials["password"] != first
    with pytest.raises(NotFound):  # the replaced value's secret is gone
        await client.get(ws, kinds.SECRETS, first)
    emptied = await client.put_source(
        ws, ks.id, "files", KnowledgeSourcePut(type="sftp", host="files.example.com", credentials={})
    )
    assert emptied.credentials == {}
    with pytest.raises(NotFound):
        await client.get(ws, kinds.SECRETS, rotated.credentials["password"])


async def test_a_source_holds_its_credentials_until_it_goes(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    source = await client.put_source(ws, ks.id, "files", sftp(PASSWORD))
    secret_id = source.credentials["password"]
    await assert_in_use(client, ws, kinds.SECRETS, secret_id, [ks.id])
    await client.delete_source(ws, ks.id, "files")
    with pytest.raises(NotFound):
        await client.get(ws, kinds.SECRETS, secret_id)


async def test_every_source_write_moves_the_set_to_a_new_revision(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    await client.put_source(ws, ks.id, "laws", statutes("BGB"))
    after_put = await client.get(ws, kinds.KNOWLEDGE_SETS, ks.id)
    added = await client.add_source(ws, ks.id, KnowledgeSourcePut(type="ris", host="ris.example.com"))
    after_add = await client.get(ws, kinds.KNOWLEDGE_SETS, ks.id)
    await client.delete_source(ws, ks.id, added.id)
    after_delete = await client.get(ws, kinds.KNOWLEDGE_SETS, ks.id)
    assert [after_put.revision, after_add.revision, after_delete.revision] == [2, 3, 4]
    assert ks.updated_at < after_put.updated_at < after_add.updated_at < after_delete.updated_at
    # A client that read the set before a source write cannot update it on that revision.
    with pytest.raises(Conflict):
        await client.update(ws, kinds.KNOWLEDGE_SETS, ks.id, KnowledgeSetUpdate(name="x"), revision=1)


async def test_a_source_write_with_if_match_is_refused_once_the_source_moved_on(
    client: PlatformClient, ws: str
) -> None:
    ks = await knowledge_set(client, ws)
    first = await client.put_source(ws, ks.id, "laws", statutes("BGB"))
    second = await client.put_source(ws, ks.id, "laws", statutes("BGB", "HGB"), revision=first.revision)
    assert second.revision > first.revision
    with pytest.raises(Conflict):  # 412: someone wrote it since revision `first`
        await client.put_source(ws, ks.id, "laws", statutes("StGB"), revision=first.revision)
    with pytest.raises(Conflict):
        await client.delete_source(ws, ks.id, "laws", revision=first.revision)
    with pytest.raises(Conflict):  # the caller read a source that is not there
        await client.put_source(ws, ks.id, "gone", statutes("BGB"), revision=1)
    await client.delete_source(ws, ks.id, "laws", revision=second.revision)
    assert (await client.list_sources(ws, ks.id)) == []


async def test_sets_embed_their_sources_in_get_and_list(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    keyed = await client.put_source(ws, ks.id, "laws", statutes("BGB"))
    mine = await client.add_source(ws, ks.id, KnowledgeSourcePut(type="s3", bucket="docs", region="eu"))
    fetched = await client.get(ws, kinds.KNOWLEDGE_SETS, ks.id)
    assert fetched.sources == [keyed, mine]
    (listed,) = await client.list_all(ws, kinds.KNOWLEDGE_SETS)
    assert listed.sources == [keyed, mine]
    assert (listed.sources[1].bucket, listed.sources[1].region, listed.sources[1].laws) == (
        "docs",
        "eu",
        None,
    )


async def test_a_set_an_agent_uses_cannot_be_deleted(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    source = await client.put_source(ws, ks.id, "files", sftp(PASSWORD))
    bot = await agent(client, ws, knowledge_set_ids=[ks.id])
    assert bot.knowledge_set_ids == [ks.id]
    await assert_in_use(client, ws, kinds.KNOWLEDGE_SETS, ks.id, [bot.id])
    await client.update(ws, kinds.AGENTS, bot.id, AgentUpdate(knowledge_set_ids=[]), revision=1)
    await client.delete(ws, kinds.KNOWLEDGE_SETS, ks.id)
    # The set's sources went with it, and so did their credentials.
    with pytest.raises(NotFound):
        await client.get(ws, kinds.SECRETS, source.credentials["password"])


async def test_an_agent_naming_an_unknown_set_is_refused(client: PlatformClient, ws: str) -> None:
    with pytest.raises(Refused) as refused:
        await agent(client, ws, knowledge_set_ids=["kns_doesnotexist"])
    assert refused.value.code == "unknown_reference"
    assert refused.value.errors[0].field == "knowledge_set_ids.0"
    bot = await agent(client, ws)
    assert bot.knowledge_set_ids == []
    with pytest.raises(Refused) as on_update:
        await client.update(
            ws, kinds.AGENTS, bot.id, AgentUpdate(knowledge_set_ids=["kns_doesnotexist"]), revision=1
        )
    assert on_update.value.errors[0].field == "knowledge_set_ids.0"


async def test_a_fault_can_fail_a_source_write(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    spec = FaultSpec(method="POST", path="/v1/workspaces/*/knowledge-sets/*/sources", status=500)
    await client.request("POST", "/_admin/faults", body=spec.model_dump_json().encode(), safe=False)
    with pytest.raises(PlatformError) as failed:  # a user-added source is not repeated after a 500
        await client.add_source(ws, ks.id, KnowledgeSourcePut(type="ris", host="ris.example.com"))
    assert failed.value.status == 500
    assert await client.list_sources(ws, ks.id) == []


async def test_sources_are_listed_in_pages(client: PlatformClient, ws: str) -> None:
    ks = await knowledge_set(client, ws)
    made = [await client.put_source(ws, ks.id, f"laws-{i}", statutes("BGB")) for i in range(3)]
    path = f"/v1/workspaces/{ws}/knowledge-sets/{ks.id}/sources"
    first = (await client.request("GET", path, params={"limit": "2"}, safe=True)).json()
    assert [s["id"] for s in first["items"]] == [made[0].id, made[1].id]
    await client.delete_source(ws, ks.id, made[1].id)  # gone between pages: nothing is skipped
    rest = (
        await client.request("GET", path, params={"limit": "2", "cursor": first["next_cursor"]}, safe=True)
    ).json()
    assert ([s["id"] for s in rest["items"]], rest["next_cursor"]) == ([made[2].id], None)
