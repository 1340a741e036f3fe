"""Knowledge sets and apps (schema 0.2.0) through the engine, against the reference platform.

Install order and wiring, tenant addresses substituted, credentials kept out of every answer,
all-or-nothing at each new create step, source-by-source updates that leave a user's own source
alone, drift, uninstall refusals, app versions and archiving, and a 0.1.0 installation that an
upgrade leaves exactly as it was.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from bundle_operator.engine.apply import InstallFailed, apply
from bundle_operator.engine.correct import correct_drift
from bundle_operator.engine.drift import drift
from bundle_operator.engine.export import export_with_report
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.engine.uninstall import UninstallRefused, uninstall
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    AgentCreate,
    AgentUpdate,
    App,
    AppUpdate,
    AppVersionCreate,
    KnowledgeSet,
    KnowledgeSetCreate,
    KnowledgeSourcePut,
)
from tests.integration.engine.harness import (
    Store,
    arm_fault,
    clear_faults,
    example,
    install,
    parse,
    workspace_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

MAPPED = Options(substitutions={"knowledge_source:s3:acme-bylaws": "s3:dormagen-bylaws"})
SETUP = {"bylaws_access_key": "AKIA-test-key-0001", "bylaws_secret_key": "test-secret-0123456789abcdef"}


def office() -> dict[str, Any]:
    """The building-office example as data, to vary per test."""
    parsed, _ = example("building-office")
    assert parsed.bundle is not None
    return parsed.bundle.model_dump(mode="json", exclude_none=True)


async def put_installed_s3(client: PlatformClient, ws: str, set_id: str, **changes: Any) -> None:
    """Put the example's s3-1 source, as installed with the bucket mapped, with ``changes``."""
    fields: dict[str, Any] = {
        "type": "s3",
        "bucket": "dormagen-bylaws",
        "prefix": "bylaws/",
        "region": "eu-central-1",
        "sync_schedule": "30 3 * * *",
    }
    await client.put_source(ws, set_id, "s3-1", KnowledgeSourcePut(**(fields | changes)))


@pytest.fixture
async def faults(client: PlatformClient) -> AsyncIterator[None]:
    yield
    await clear_faults(client)


async def live_set(client: PlatformClient, ws: str, record: Record) -> KnowledgeSet:
    recorded = record.find("knowledge_set:building_law")
    assert recorded is not None and recorded.primary_id is not None
    return await client.get(ws, kinds.KNOWLEDGE_SETS, recorded.primary_id)


async def live_app(client: PlatformClient, ws: str, record: Record) -> App:
    recorded = record.find("app:request_status")
    assert recorded is not None and recorded.primary_id is not None
    return await client.get(ws, kinds.APPS, recorded.primary_id)


async def test_install_wires_the_set_to_the_agent_substitutes_the_bucket_and_keeps_credentials_out(
    client: PlatformClient, ws: str
) -> None:
    parsed, _ = example("building-office")
    result, record = await install(client, ws, parsed, SETUP, options=MAPPED)
    assert result.created == [
        "mcp:permits",
        "knowledge_set:building_law",
        "agent:permit_assistant",
        "app:request_status",
    ]
    knowledge_set = await live_set(client, ws, record)
    sources = {s.key: s for s in knowledge_set.sources}
    assert set(sources) == {"statutes-1", "s3-1"}
    assert sources["statutes-1"].laws == ["baugb", "baunvo", "bauo-nrw"]
    s3 = sources["s3-1"]
    # Only the address is replaced; the rest travels as written.
    assert (s3.bucket, s3.prefix, s3.region, s3.sync_schedule) == (
        "dormagen-bylaws",
        "bylaws/",
        "eu-central-1",
        "30 3 * * *",
    )
    assert sorted(s3.credentials) == ["access_key_id", "secret_access_key"]
    agent_id = record.find("agent:permit_assistant")
    assert agent_id is not None and agent_id.primary_id is not None
    agent = await client.get(ws, kinds.AGENTS, agent_id.primary_id)
    assert agent.knowledge_set_ids == [knowledge_set.id]
    app = await live_app(client, ws, record)
    assert app.document == {
        "root": "r",
        "elements": {"r": {"type": "Card", "title": "Request status"}},
        "state": {},
    }
    mcp = record.find("mcp:permits")
    assert mcp is not None and app.mcp_instance_ids == [mcp.primary_id]
    # No secret value in any answer, nor in the record.
    raw = (await client.request("GET", f"/v1/workspaces/{ws}/knowledge-sets", safe=True)).text
    for value in SETUP.values():
        assert value not in raw
        assert value not in record.model_dump_json()
    # Right after the install nothing has drifted, and a second run reuses everything.
    assert not (await drift(client, ws, record)).drifted
    again, _ = await install(client, ws, parsed, SETUP, record, MAPPED)
    assert again.created == [] and again.updated == []


async def test_an_unmapped_tenant_address_blocks_and_a_strip_policy_drops_its_source(
    client: PlatformClient, ws: str
) -> None:
    parsed, _ = example("building-office")
    planned = await plan(client, ws, parsed, SETUP, Record(installation="t/i", workspace=ws))
    assert "substitution_required" in {i.code for i in planned.preview.issues if i.blocking}
    doc = office()
    doc["requires"][0]["policy"] = "strip"
    result, record = await install(client, ws, parse(doc), SETUP)
    assert "knowledge_set:building_law" in result.created
    assert [s.key for s in (await live_set(client, ws, record)).sources] == ["statutes-1"]
    assert any(i.code == "requirement_stripped" for i in result.preview.issues)


# Creates the example makes: MCP server and instance, the set, the agent, the app (POSTs), and
# the two sources (PUTs). A failure at any of them leaves the workspace as it was.
STEPS = [("POST", "*", n) for n in range(5)] + [("PUT", "knowledge-sets/*/sources/*", n) for n in range(2)]


@pytest.mark.parametrize(("method", "path", "after"), STEPS)
async def test_a_failure_at_each_new_create_step_rolls_back_to_nothing(
    client: PlatformClient, ws: str, faults: None, method: str, path: str, after: int
) -> None:
    parsed, _ = example("building-office")
    before = await workspace_state(client, ws)
    await arm_fault(
        client, method=method, path=f"/v1/workspaces/{ws}/{path}", after=after, times=1, status=422
    )
    record = Record(installation="test/inst", workspace=ws)
    with pytest.raises(InstallFailed) as failed:
        await install(client, ws, parsed, SETUP, record, MAPPED)
    assert failed.value.rollback_failures == []
    assert await workspace_state(client, ws) == before
    assert record.entities == [] and record.journal == []
    await clear_faults(client)
    result, _ = await install(client, ws, parsed, SETUP, record, MAPPED)
    assert len(result.created) == 4


async def test_an_update_merges_source_by_source_and_leaves_a_users_own_source_alone(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    # Locally: the s3 region edited, and a source of the user's own added (no key).
    await put_installed_s3(client, ws, knowledge_set.id, region="eu-west-1")
    own = await client.add_source(
        ws, knowledge_set.id, KnowledgeSourcePut(type="ris", host="ris.dormagen.example")
    )
    report = await drift(client, ws, record)
    assert report.changed == {
        "knowledge_set:building_law": ["/sources/s3-1/region"]
    }  # the own source is not drift
    # Version 2: the statutes gain a law, the s3 prefix changes, a website source is added.
    doc = office()
    sources = doc["knowledge_sets"][0]["sources"]
    sources["statutes-1"]["laws"].append("bauvorlv")
    sources["s3-1"]["prefix"] = "satzungen/"
    sources["web-1"] = {"type": "website", "urls": ["https://dormagen.example/bauen"]}
    result, record = await install(client, ws, parse(doc), SETUP, record, MAPPED)
    assert result.updated == ["knowledge_set:building_law"] and result.conflicts == {}
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}
    assert set(live) == {"statutes-1", "s3-1", "web-1", None}
    assert live["statutes-1"].laws == ["baugb", "baunvo", "bauo-nrw", "bauvorlv"]
    assert (live["s3-1"].prefix, live["s3-1"].region) == (
        "satzungen/",
        "eu-west-1",
    )  # the local edit survives
    assert sorted(live["s3-1"].credentials) == ["access_key_id", "secret_access_key"]  # kept, not resent
    assert live[None].id == own.id and live[None].host == "ris.dormagen.example"
    # Version 3 drops the website source again: unmodified, it goes; the own source still stays.
    del sources["web-1"]
    await install(client, ws, parse(doc), SETUP, record, MAPPED)
    assert {s.key for s in (await live_set(client, ws, record)).sources} == {"statutes-1", "s3-1", None}


async def test_a_conflicting_source_edit_writes_nothing_unless_a_mode_settles_it(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    await client.put_source(
        ws, knowledge_set.id, "statutes-1", KnowledgeSourcePut(type="statutes", laws=["baugb"])
    )
    doc = office()
    doc["knowledge_sets"][0]["sources"]["statutes-1"]["laws"] = ["baugb", "bauo-nrw"]
    planned = await plan(client, ws, parse(doc), SETUP, record, MAPPED)
    conflict = [i for i in planned.preview.issues if i.code == "update_conflict"]
    assert conflict and conflict[0].blocking and "/sources/statutes-1/laws" in conflict[0].message
    taken = Options(substitutions=MAPPED.substitutions, on_conflict=OnConflict.TAKE_THEIRS)
    await install(client, ws, parse(doc), SETUP, record, taken)
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}
    assert live["statutes-1"].laws == ["baugb", "bauo-nrw"]


async def test_a_changed_credential_value_is_sent_again_and_nothing_else_is_written(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    before = {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"]
    changed = {**SETUP, "bylaws_secret_key": "rotated-secret-0123456789abcdef"}
    result, record = await install(client, ws, parse(office()), changed, record, MAPPED)
    assert result.updated == ["knowledge_set:building_law"]
    after = {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"]
    assert after.credentials.keys() == before.credentials.keys()
    assert after.revision > before.revision
    assert not (await drift(client, ws, record)).drifted


async def test_an_apps_new_document_is_its_next_version_and_uninstall_archives_it(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    app = await live_app(client, ws, record)
    assert app.latest_version == 1
    doc = office()
    doc["apps"][0]["document"]["state"] = {"status": "open"}
    result, record = await install(client, ws, parse(doc), SETUP, record, MAPPED)
    assert result.updated == ["app:request_status"]
    app = await live_app(client, ws, record)
    assert (
        app.latest_version == 2 and app.document is not None and app.document["state"] == {"status": "open"}
    )
    versions = await client.list_app_versions(ws, app.id)
    assert [v.version for v in versions] == [1, 2]
    # Someone publishes a version of their own: that is drift of the document, path by path.
    await client.add_app_version(ws, app.id, AppVersionCreate(document={"root": "x"}))
    assert (await drift(client, ws, record)).changed == {
        "app:request_status": ["/document/elements", "/document/root", "/document/state"]
    }
    await client.set_app_version_archived(ws, app.id, 3, True)  # back to the installed version
    assert not (await drift(client, ws, record)).drifted
    mcp = record.find("mcp:permits")
    assert mcp is not None
    store = Store(record)
    done = await uninstall(client, ws, record, store.persist)
    assert "app:request_status" in done.deleted and done.complete
    archived = await client.get(ws, kinds.APPS, app.id)  # still there, so running instances keep working
    assert archived.archived is True
    # ... and so is the MCP its tools come from, kept and reported.
    assert done.kept == {
        "mcp:permits": [
            f"(in use by apps/{app.id} 'Request status' (archived; its running instances use it))"
        ]
    }
    state = await workspace_state(client, ws)
    assert state[kinds.APPS.path] == [app.id]
    assert state[kinds.MCP_INSTANCES.path] == [mcp.primary_id]
    assert state[kinds.AGENTS.path] == state[kinds.KNOWLEDGE_SETS.path] == []


async def test_uninstall_is_refused_while_a_users_own_source_or_a_foreign_agent_holds_the_set(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    own = await client.add_source(
        ws, knowledge_set.id, KnowledgeSourcePut(type="website", urls=["https://x.example"])
    )
    before = await workspace_state(client, ws)
    with pytest.raises(UninstallRefused) as refused:
        await uninstall(client, ws, record, Store(record).persist)
    assert refused.value.held == {
        "knowledge_set:building_law": [
            f"knowledge-sets/{knowledge_set.id}/sources/{own.id} (a website source added on the platform)"
        ]
    }
    assert await workspace_state(client, ws) == before
    await client.delete_source(ws, knowledge_set.id, own.id)
    foreign = await client.create(
        ws,
        kinds.AGENTS,
        AgentCreate(name="Other desk", model="gpt-5", knowledge_set_ids=[knowledge_set.id]),
        idempotency_key=f"foreign-{ws}",
    )
    with pytest.raises(UninstallRefused) as refused:
        await uninstall(client, ws, record, Store(record).persist)
    assert list(refused.value.held) == ["knowledge_set:building_law"]
    assert foreign.id in refused.value.held["knowledge_set:building_law"][0]
    await client.update(
        ws, kinds.AGENTS, foreign.id, AgentUpdate(knowledge_set_ids=[]), revision=foreign.revision
    )
    done = await uninstall(client, ws, record, Store(record).persist)
    assert "knowledge_set:building_law" in done.deleted and done.complete
    assert (await client.list_all(ws, kinds.KNOWLEDGE_SETS)) == []
    assert list(done.kept) == ["mcp:permits"]  # the archived app still uses it


async def test_a_010_installation_is_reused_unchanged_by_this_version(
    client: PlatformClient, ws: str
) -> None:
    parsed, setup = example("github-triage")
    options = Options(substitutions={"model:gpt-4.1": "gpt-5"})
    _, record = await install(client, ws, parsed, setup, options=options)
    specs = {r.entity: copy.deepcopy(r.spec) for r in record.entities}
    assert all("knowledge_set_ids" not in spec for spec in specs.values())
    again, record = await install(client, ws, parsed, setup, record, options)
    assert again.created == [] and again.updated == [] and again.deleted == []
    assert {r.entity: r.spec for r in record.entities} == specs


async def test_export_screens_organisation_fields_and_round_trips_with_a_substitution(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    await client.add_source(
        ws,
        knowledge_set.id,
        KnowledgeSourcePut(
            type="smb", server="fs01.dormagen.local", share="bauamt", domain="DORMAGEN", username="svc-ki"
        ),
    )
    await put_installed_s3(client, ws, knowledge_set.id, endpoint="https://s3.dormagen.example")
    exported = await export_with_report(client, ws, "dormagen-office", "1.0.0")
    document = exported.document
    assert document["schema_version"] == "0.2.0"
    [exported_set] = document["knowledge_sets"]
    sources = exported_set["sources"]
    smb_key = next(k for k in sources if k.startswith("smb-"))
    assert len(smb_key) == len("smb-") + 8  # <type>-<short hash>
    assert sources[smb_key] == {"type": "smb", "server": "fs01.dormagen.local", "share": "bauamt"}
    assert "endpoint" not in sources["s3-1"] and sources["s3-1"]["bucket"] == "dormagen-bylaws"
    assert set(sources["s3-1"]["credentials"]) == {"access_key_id", "secret_access_key"}
    dropped = {d.path for d in exported.report.dropped}
    base = "/knowledge_sets/0/sources"
    assert {f"{base}/s3-1/endpoint", f"{base}/{smb_key}/domain", f"{base}/{smb_key}/username"} <= dropped
    requires = [r for r in document["requires"] if r["kind"] == "knowledge_source"]
    assert requires == [
        {"kind": "knowledge_source", "ref": "s3:dormagen-bylaws", "policy": "substitute"},
        {"kind": "knowledge_source", "ref": "smb:fs01.dormagen.local", "policy": "substitute"},
    ]
    assert document["agents"][0]["knowledge_sets"] == [exported_set["key"]]
    assert document["apps"][0]["document"]["root"] == "r"
    assert exported.text == (await export_with_report(client, ws, "dormagen-office", "1.0.0")).text
    for value in SETUP.values():
        assert value not in exported.text
    # Installed elsewhere with the tenant addresses mapped: the same sources, the new addresses.
    target = f"{ws}-target"
    setup = {f["key"]: "value-0123456789" for f in document["setup"]}
    mapped = Options(
        substitutions={
            "knowledge_source:s3:dormagen-bylaws": "s3:zons-bylaws",
            "knowledge_source:smb:fs01.dormagen.local": "smb:fs.zons.local",
            "model:default": "default",  # every model is the installer's to map, the default too
        }
    )
    _, other = await install(client, target, parse(document), setup, options=mapped)
    installed = {s.key: s for s in (await client.list_all(target, kinds.KNOWLEDGE_SETS))[0].sources}
    assert installed["s3-1"].bucket == "zons-bylaws" and installed["s3-1"].endpoint is None
    assert installed[smb_key].server == "fs.zons.local" and installed[smb_key].share == "bauamt"
    assert other.find("app:request_status") is not None


async def test_an_export_with_long_names_still_analyzes_clean(client: PlatformClient, ws: str) -> None:
    knowledge_set = await client.create(
        ws, kinds.KNOWLEDGE_SETS, KnowledgeSetCreate(name="Bylaws " * 20), idempotency_key=f"long-{ws}"
    )
    key, credential = "s" * 63, "c" * 64
    body = KnowledgeSourcePut(
        type="sftp", host="files.example", credentials={credential: SecretStr("pw-long-1")}
    )
    await client.put_source(ws, knowledge_set.id, key, body)
    exported = await export_with_report(client, ws, "long-names")
    [setup_field] = exported.document["setup"]
    assert len(setup_field["key"]) == 128
    source = exported.document["knowledge_sets"][0]["sources"][key]
    assert source["credentials"] == {credential: f"${{setup.{setup_field['key']}}}"}
    parsed = parse(exported.document)
    assert [i for i in parsed.issues if i.blocking] == []


# --- what a review of the first version found ------------------------------------------------


async def test_an_update_that_drops_a_set_keeps_it_while_it_holds_a_users_own_source(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    own = await client.add_source(ws, knowledge_set.id, KnowledgeSourcePut(type="ris", host="ris.example"))
    doc = office()
    del doc["knowledge_sets"]
    doc["agents"][0].pop("knowledge_sets")
    doc["requires"] = []
    doc["setup"] = []
    result, record = await install(client, ws, parse(doc), {}, record, Options())
    assert result.kept == ["knowledge_set:building_law"] and result.deleted == []
    kept = [i for i in result.preview.issues if i.code == "entity_kept"]
    assert kept and own.id in kept[0].message
    assert [s.id for s in (await client.get(ws, kinds.KNOWLEDGE_SETS, knowledge_set.id)).sources][
        -1
    ] == own.id


async def test_an_app_dropped_by_an_update_is_archived_and_uninstall_then_completes(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    app = await live_app(client, ws, record)
    doc = office()
    del doc["apps"]
    result, record = await install(client, ws, parse(doc), SETUP, record, MAPPED)
    assert result.deleted == ["app:request_status"]
    assert (await client.get(ws, kinds.APPS, app.id)).archived is True
    assert [p.id for p in record.archived] == [app.id]
    # The archived app is the installation's own: it holds the MCP, it does not refuse the uninstall.
    done = await uninstall(client, ws, record, Store(record).persist)
    assert done.complete and list(done.kept) == ["mcp:permits"]
    assert "knowledge_set:building_law" in done.deleted


async def test_an_app_archived_on_the_platform_is_installed_again_and_both_stay_owned(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    old = await live_app(client, ws, record)
    await client.update(ws, kinds.APPS, old.id, AppUpdate(archived=True), revision=old.revision)
    assert (await drift(client, ws, record)).missing == ["app:request_status"]
    result, record = await install(client, ws, parse(office()), SETUP, record, MAPPED)
    assert result.created == ["app:request_status"]
    assert [p.id for p in record.archived] == [old.id]
    done = await uninstall(client, ws, record, Store(record).persist)
    assert done.complete and done.failed == {}
    assert {a.id: a.archived for a in await client.list_all(ws, kinds.APPS)} == {
        old.id: True,
        (await client.list_all(ws, kinds.APPS))[1].id: True,
    }


async def test_an_app_whose_every_version_was_archived_gets_a_new_version_not_a_second_app(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    app = await live_app(client, ws, record)
    await client.set_app_version_archived(ws, app.id, 1, True)
    assert (await drift(client, ws, record)).changed == {"app:request_status": ["/document"]}
    # A local edit like any other: an install keeps it (no second app), drift correction undoes it.
    result, record = await install(client, ws, parse(office()), SETUP, record, MAPPED)
    assert result.created == [] and [a.id for a in await client.list_all(ws, kinds.APPS)] == [app.id]
    planned = await plan(client, ws, parse(office()), SETUP, record, MAPPED)
    corrected = await correct_drift(client, record, Store(record).persist, planned)
    assert corrected.corrected == {"app:request_status": ["/document"]}
    assert (await live_app(client, ws, record)).latest_version == 2
    assert not (await drift(client, ws, record)).drifted


async def test_a_failed_update_archives_the_app_version_it_added(
    client: PlatformClient, ws: str, faults: None
) -> None:
    doc = office()
    doc["policies"] = [
        {"key": "check", "type": "answer_check", "agent": "permit_assistant", "config": {"n": 1}}
    ]
    _, record = await install(client, ws, parse(doc), SETUP, options=MAPPED)
    app = await live_app(client, ws, record)
    doc["apps"][0]["document"]["state"] = {"v": 2}
    doc["policies"][0]["config"]["n"] = 2
    for _ in range(2):  # the policy (a later level) fails: the app's update is undone
        await arm_fault(
            client, method="PATCH", path=f"/v1/workspaces/{ws}/policies/*", after=0, times=1, status=422
        )
        with pytest.raises(InstallFailed):
            await install(client, ws, parse(doc), SETUP, record, MAPPED)
        await clear_faults(client)
    versions = await client.list_app_versions(ws, app.id)
    assert [(v.version, v.archived) for v in versions] == [(1, False), (2, True), (3, True)]
    assert (await live_app(client, ws, record)).document == office()["apps"][0]["document"]
    assert not (await drift(client, ws, record)).drifted


async def test_a_source_whose_removal_is_rolled_back_keeps_its_credentials(
    client: PlatformClient, ws: str, faults: None
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    doc = office()
    del doc["knowledge_sets"][0]["sources"]["s3-1"]
    doc["requires"], doc["setup"] = [], []
    doc["apps"][0]["document"]["state"] = {"x": 1}  # the app, a later level, fails
    await arm_fault(
        client, method="POST", path=f"/v1/workspaces/{ws}/apps/*/versions", after=0, times=1, status=422
    )
    with pytest.raises(InstallFailed):
        await install(client, ws, parse(doc), {}, record, Options())
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}
    assert sorted(live["s3-1"].credentials) == ["access_key_id", "secret_access_key"]
    assert not (await drift(client, ws, record)).drifted
    await clear_faults(client)
    result, record = await install(client, ws, parse(doc), {}, record, Options())
    assert result.updated == ["knowledge_set:building_law", "app:request_status"]
    assert [s.key for s in (await live_set(client, ws, record)).sources] == ["statutes-1"]
    state = await workspace_state(client, ws)
    assert state[kinds.SECRETS.path] == []  # the dropped source's stored credentials went with it


async def test_a_bundle_that_drops_a_sources_credentials_removes_them(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    doc = office()
    del doc["knowledge_sets"][0]["sources"]["s3-1"]["credentials"]
    doc["setup"] = []
    result, record = await install(client, ws, parse(doc), {}, record, MAPPED)
    assert result.updated == ["knowledge_set:building_law"]
    assert {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"].credentials == {}
    assert not (await drift(client, ws, record)).drifted


async def test_a_credential_lost_on_the_platform_is_sent_again(client: PlatformClient, ws: str) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    await put_installed_s3(
        client, ws, knowledge_set.id, credentials={"access_key_id": SecretStr("someone-else-typed-this")}
    )
    assert (await drift(client, ws, record)).changed == {
        "knowledge_set:building_law": ["/sources/s3-1/credentials"]
    }
    result, record = await install(client, ws, parse(office()), SETUP, record, MAPPED)
    assert result.updated == ["knowledge_set:building_law"]
    assert not (await drift(client, ws, record)).drifted


async def test_a_users_own_credential_on_a_bundle_source_is_a_conflict_when_a_value_must_be_sent(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    credentials = {
        "access_key_id": SecretStr(SETUP["bylaws_access_key"]),
        "secret_access_key": SecretStr(SETUP["bylaws_secret_key"]),
        "session_token": SecretStr("users-own-session-token"),
    }
    await put_installed_s3(client, ws, knowledge_set.id, credentials=credentials)
    # Nothing to send: the user's credential stays, the bundle's other changes go through.
    doc = office()
    doc["knowledge_sets"][0]["sources"]["s3-1"]["prefix"] = "satzungen/"
    await install(client, ws, parse(doc), SETUP, record, MAPPED)
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"]
    assert sorted(live.credentials) == ["access_key_id", "secret_access_key", "session_token"]
    # A rotated value must be sent, and sending replaces every credential: a conflict.
    rotated = {**SETUP, "bylaws_secret_key": "rotated-secret-0123456789abcdef"}
    planned = await plan(client, ws, parse(doc), rotated, record, MAPPED)
    conflicts = [i for i in planned.preview.issues if i.code == "update_conflict" and i.blocking]
    assert conflicts and "/sources/s3-1/credentials" in conflicts[0].message
    keep = Options(substitutions=MAPPED.substitutions, on_conflict=OnConflict.KEEP_MINE)
    planned = await plan(client, ws, parse(doc), rotated, record, keep)
    assert any(i.blocking and "session_token" in i.message for i in planned.preview.issues)
    take = Options(substitutions=MAPPED.substitutions, on_conflict=OnConflict.TAKE_THEIRS)
    await install(client, ws, parse(doc), rotated, record, take)
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"]
    assert sorted(live.credentials) == ["access_key_id", "secret_access_key"]


async def test_a_source_retyped_on_the_platform_meets_a_bundle_change_as_one_conflict(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    await client.put_source(
        ws, knowledge_set.id, "s3-1", KnowledgeSourcePut(type="sftp", host="files.example")
    )
    doc = office()
    doc["knowledge_sets"][0]["sources"]["s3-1"]["prefix"] = "satzungen/"
    planned = await plan(client, ws, parse(doc), SETUP, record, MAPPED)
    conflicts = [i for i in planned.preview.issues if i.code == "update_conflict"]
    assert len(conflicts) == 1 and "/sources/s3-1 " in conflicts[0].message
    take = Options(substitutions=MAPPED.substitutions, on_conflict=OnConflict.TAKE_THEIRS)
    await install(client, ws, parse(doc), SETUP, record, take)
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"]
    assert (live.type, live.bucket, live.prefix, live.host) == ("s3", "dormagen-bylaws", "satzungen/", None)


async def test_an_optional_secret_left_empty_installs_the_source_without_that_credential(
    client: PlatformClient, ws: str
) -> None:
    doc = office()
    doc["setup"][1]["required"] = False
    _, record = await install(client, ws, parse(doc), {"bylaws_access_key": "AKIA-1"}, options=MAPPED)
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}["s3-1"]
    assert sorted(live.credentials) == ["access_key_id"]


async def test_export_leaves_out_urls_that_carry_credentials_and_keeps_setup_keys_unique(
    client: PlatformClient, ws: str
) -> None:
    knowledge_set = await client.create(
        ws, kinds.KNOWLEDGE_SETS, KnowledgeSetCreate(name="Law"), idempotency_key=f"law-{ws}"
    )
    put = client.put_source
    await put(
        ws,
        knowledge_set.id,
        "s3",
        KnowledgeSourcePut(type="s3", bucket="a", credentials={"secret_key": SecretStr("v1-a")}),
    )
    await put(
        ws,
        knowledge_set.id,
        "s3-secret",
        KnowledgeSourcePut(type="s3", bucket="b", credentials={"key": SecretStr("v2-b")}),
    )
    await put(
        ws,
        knowledge_set.id,
        "dav-1",
        KnowledgeSourcePut(type="webdav", base_url="https://svc:Hunter2-pw@dav.example/x"),
    )
    urls = ["https://example.org/a", "https://example.org/feed?access_token=tok-SECRET-123"]
    await put(ws, knowledge_set.id, "web-1", KnowledgeSourcePut(type="website", urls=urls))
    exported = await export_with_report(client, ws, "law")
    assert "Hunter2" not in exported.text and "tok-SECRET" not in exported.text
    sources = exported.document["knowledge_sets"][0]["sources"]
    assert "dav-1" not in sources and sources["web-1"]["urls"] == ["https://example.org/a"]
    dropped = {d.path for d in exported.report.dropped}
    assert {"/knowledge_sets/0/sources/dav-1", "/knowledge_sets/0/sources/web-1/urls/1"} <= dropped
    keys = [f["key"] for f in exported.document["setup"]]
    assert len(set(keys)) == len(keys) == 2
    assert [i for i in parse(exported.document).issues if i.blocking] == []


async def test_a_source_edited_between_the_plan_and_the_write_fails_the_run_instead_of_being_overwritten(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(office()), SETUP, options=MAPPED)
    knowledge_set = await live_set(client, ws, record)
    doc = office()
    doc["knowledge_sets"][0]["sources"]["statutes-1"]["laws"].append("bauvorlv")
    planned = await plan(client, ws, parse(doc), SETUP, record, MAPPED)
    # Someone edits the source after the plan read it.
    await client.put_source(
        ws, knowledge_set.id, "statutes-1", KnowledgeSourcePut(type="statutes", laws=["x"])
    )
    with pytest.raises(InstallFailed) as failed:
        await apply(client, planned, record, Store(record).persist)
    assert failed.value.code == "bundle_install_failed"
    live = {s.key: s for s in (await live_set(client, ws, record)).sources}
    assert live["statutes-1"].laws == ["x"]  # their edit stands; the next run merges against it
