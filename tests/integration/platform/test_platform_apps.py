"""Apps over real HTTP: documents kept in numbered versions, the latest unarchived one shown,
archiving, deleting, and the MCP instances an app holds."""

from __future__ import annotations

import pytest
from platform_builders import app, assert_in_use, create, instance, key, url_server

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import NotFound, PlatformError, Refused
from bundle_operator.platform.models import AppCreate, AppUpdate, AppVersionCreate, FaultSpec

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_an_app_is_created_with_its_first_version(client: PlatformClient, ws: str) -> None:
    created = await app(client, ws, description="Daily numbers")
    assert created.id.startswith("app_") and created.revision == 1
    assert (created.latest_version, created.document, created.archived) == (1, {"title": "Dashboard"}, False)
    assert await client.get(ws, kinds.APPS, created.id) == created
    (version,) = await client.list_app_versions(ws, created.id)
    assert (version.version, version.document, version.archived) == (1, {"title": "Dashboard"}, False)


async def test_a_new_version_becomes_the_document_lists_show(client: PlatformClient, ws: str) -> None:
    made = await app(client, ws)
    updated = await client.add_app_version(ws, made.id, AppVersionCreate(document={"title": "v2"}))
    assert (updated.latest_version, updated.document, updated.revision) == (2, {"title": "v2"}, 2)
    (listed,) = await client.list_all(ws, kinds.APPS)
    assert (listed.latest_version, listed.document) == (2, {"title": "v2"})
    versions = await client.list_app_versions(ws, made.id)
    assert [(v.version, v.document) for v in versions] == [(1, {"title": "Dashboard"}), (2, {"title": "v2"})]


async def test_archiving_the_latest_version_falls_back_to_the_one_before(
    client: PlatformClient, ws: str
) -> None:
    made = await app(client, ws)
    await client.add_app_version(ws, made.id, AppVersionCreate(document={"title": "v2"}))
    archived = await client.set_app_version_archived(ws, made.id, 2, True)
    assert (archived.version, archived.archived) == (2, True)
    shown = await client.get(ws, kinds.APPS, made.id)
    assert (shown.latest_version, shown.document, shown.revision) == (1, {"title": "Dashboard"}, 3)
    await client.set_app_version_archived(ws, made.id, 1, True)
    nothing = await client.get(ws, kinds.APPS, made.id)
    assert (nothing.latest_version, nothing.document) == (None, None)
    await client.set_app_version_archived(ws, made.id, 2, False)
    assert (await client.get(ws, kinds.APPS, made.id)).latest_version == 2
    # Numbers are never reused: the next version is 3 even while 2 was archived.
    third = await client.add_app_version(ws, made.id, AppVersionCreate(document={"title": "v3"}))
    assert third.latest_version == 3
    with pytest.raises(NotFound):
        await client.set_app_version_archived(ws, made.id, 9, True)


async def test_an_app_is_archived_by_update_and_removed_by_delete(client: PlatformClient, ws: str) -> None:
    made = await app(client, ws)
    archived = await client.update(ws, kinds.APPS, made.id, AppUpdate(archived=True), revision=1)
    assert (archived.archived, archived.document) == (True, {"title": "Dashboard"})
    assert [a.id for a in await client.list_all(ws, kinds.APPS, filters={"archived": True})] == [made.id]
    assert await client.list_all(ws, kinds.APPS, filters={"archived": False}) == []
    await client.delete(ws, kinds.APPS, made.id)
    with pytest.raises(NotFound):
        await client.get(ws, kinds.APPS, made.id)
    with pytest.raises(NotFound):
        await client.list_app_versions(ws, made.id)


async def test_a_document_must_be_a_json_object_of_bounded_size(client: PlatformClient, ws: str) -> None:
    path = f"/v1/workspaces/{ws}/apps"
    for document in (b"[1, 2]", b'"a page"', b"null"):
        with pytest.raises(Refused) as refused:
            body = b'{"name": "x", "document": ' + document + b"}"
            await client.request("POST", path, body=body, headers={"Idempotency-Key": key()}, safe=True)
        assert [e.field for e in refused.value.errors] == ["document"]
    with pytest.raises(Refused) as missing:
        await client.request("POST", path, body=b'{"name": "x"}', safe=True)
    assert [e.field for e in missing.value.errors] == ["document"]
    made = await app(client, ws)
    big = b'{"document": {"text": "' + b"x" * (256 * 1024) + b'"}}'
    with pytest.raises(Refused) as too_big:
        await client.request("POST", f"{path}/{made.id}/versions", body=big, safe=False)
    assert [e.field for e in too_big.value.errors] == ["document"]
    assert len(await client.list_app_versions(ws, made.id)) == 1


async def test_an_app_holds_the_mcp_instances_it_uses(client: PlatformClient, ws: str) -> None:
    inst = await instance(client, ws, await url_server(client, ws))
    made = await app(client, ws, mcp_instance_ids=[inst.id])
    assert made.mcp_instance_ids == [inst.id]
    await assert_in_use(client, ws, kinds.MCP_INSTANCES, inst.id, [made.id])
    await client.update(ws, kinds.APPS, made.id, AppUpdate(mcp_instance_ids=[]), revision=1)
    await client.delete(ws, kinds.MCP_INSTANCES, inst.id)


async def test_an_app_naming_an_unknown_instance_is_refused(client: PlatformClient, ws: str) -> None:
    body = AppCreate(name="x", document={}, mcp_instance_ids=["mci_doesnotexist"])
    with pytest.raises(Refused) as refused:
        await create(client, ws, kinds.APPS, body)
    assert refused.value.code == "unknown_reference"
    assert refused.value.errors[0].field == "mcp_instance_ids.0"


async def test_a_create_is_found_by_its_idempotency_key(client: PlatformClient, ws: str) -> None:
    the_key = key()
    body = AppCreate(name="Dashboard", document={"title": "Dashboard"})
    first = await client.create(ws, kinds.APPS, body, idempotency_key=the_key)
    assert await client.create(ws, kinds.APPS, body, idempotency_key=the_key) == first
    record = await client.find_by_idempotency_key(ws, the_key)
    assert record is not None and (record.kind, record.id) == ("apps", first.id)
    assert len(await client.list_app_versions(ws, first.id)) == 1  # a replay adds no version


async def test_a_fault_can_fail_adding_a_version(client: PlatformClient, ws: str) -> None:
    made = await app(client, ws)
    spec = FaultSpec(method="POST", path="/v1/workspaces/*/apps/*/versions", status=500, when="after")
    await client.request("POST", "/_admin/faults", body=spec.model_dump_json().encode(), safe=False)
    with pytest.raises(PlatformError) as failed:  # not repeated: a repeat would add another version
        await client.add_app_version(ws, made.id, AppVersionCreate(document={"title": "v2"}))
    assert failed.value.status == 500
    # The version was added although its answer was lost.
    assert [v.version for v in await client.list_app_versions(ws, made.id)] == [1, 2]
