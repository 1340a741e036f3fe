"""Trigger reuse checks its binding (seed 000): a recorded trigger is the install's own only while
it carries the name ``{bundle}:{key}`` and runs the agent the install bound it to."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bundle_operator.engine.apply import Blocked
from bundle_operator.engine.drift import drift
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentCreate, AgentUpdate, Trigger, TriggerUpdate
from tests.documents import bundle_document
from tests.integration.engine.harness import install, parse, workspace_state

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DOC: dict[str, Any] = bundle_document(
    "cron-kit",
    agents=[{"key": "bot", "name": "Cron Bot", "model": "gpt-5"}],
    automations=[
        {"key": "daily", "type": "cron", "agent": "bot", "schedule": "0 8 * * *", "message": "Report"}
    ],
)


async def installed(client: PlatformClient, ws: str) -> tuple[Record, Trigger, str]:
    result, record = await install(client, ws, parse(copy.deepcopy(DOC)), {})
    assert sorted(result.created) == ["agent:bot", "automation:daily"]
    trigger = (await client.list_all(ws, kinds.TRIGGERS))[0]
    agent = record.find("agent:bot")
    assert agent is not None and agent.primary_id == trigger.agent_id
    return record, trigger, trigger.agent_id


async def rebind(client: PlatformClient, ws: str, trigger: Trigger, **changes: Any) -> Trigger:
    return await client.update(
        ws, kinds.TRIGGERS, trigger.id, TriggerUpdate(**changes), revision=trigger.revision
    )


async def foreign_agent(client: PlatformClient, ws: str) -> str:
    body = AgentCreate(name="Cron Bot", model="gpt-5")  # same name as the bundle's: still not ours
    return (await client.create(ws, kinds.AGENTS, body, idempotency_key=f"foreign-{ws}")).id


async def test_a_trigger_moved_to_a_foreign_agent_is_drift_and_blocks_a_silent_reuse(
    client: PlatformClient, ws: str
) -> None:
    record, trigger, _ = await installed(client, ws)
    foreign = await foreign_agent(client, ws)
    await rebind(client, ws, trigger, agent_id=foreign)
    report = await drift(client, ws, record)
    assert report.changed == {"automation:daily": ["/agent_id"]}
    assert report.rebound == {"automation:daily": ["/agent_id"]}
    assert report.to_json()["rebound"] == [{"entity": "automation:daily", "paths": ["/agent_id"]}]
    planned = await plan(client, ws, parse(DOC), {}, record)
    conflicts = [i for i in planned.preview.issues if i.blocking]
    assert [(str(i.code), i.entity, i.path) for i in conflicts] == [
        ("update_conflict", "automation:daily", "/agent_id")
    ]
    assert "another agent" in conflicts[0].message
    daily = next(e for e in planned.preview.entities if e.entity == "automation:daily")
    assert daily.action == "UPDATE"
    before = await workspace_state(client, ws)
    with pytest.raises(Blocked):
        await install(client, ws, parse(DOC), {}, record)
    assert await workspace_state(client, ws) == before
    assert (await client.get(ws, kinds.TRIGGERS, trigger.id)).agent_id == foreign


async def test_take_theirs_binds_the_trigger_back_to_the_bundles_agent(
    client: PlatformClient, ws: str
) -> None:
    record, trigger, ours = await installed(client, ws)
    await rebind(client, ws, trigger, agent_id=await foreign_agent(client, ws), name="someone-else:job")
    result, _ = await install(client, ws, parse(DOC), {}, record, Options(on_conflict=OnConflict.TAKE_THEIRS))
    assert result.updated == ["automation:daily"]
    live = await client.get(ws, kinds.TRIGGERS, trigger.id)
    assert (live.name, live.agent_id, live.enabled) == ("cron-kit:daily", ours, False)
    assert not (await drift(client, ws, record)).drifted


async def test_keep_mine_leaves_the_binding_and_says_so(client: PlatformClient, ws: str) -> None:
    record, trigger, _ = await installed(client, ws)
    await rebind(client, ws, trigger, name="renamed-by-hand")
    result, _ = await install(client, ws, parse(DOC), {}, record, Options(on_conflict=OnConflict.KEEP_MINE))
    warned = [i for i in result.preview.issues if i.code == "update_conflict"]
    assert [(i.severity, i.path) for i in warned] == [("warning", "/name")]
    assert "KeepMine" in warned[0].message
    assert (await client.get(ws, kinds.TRIGGERS, trigger.id)).name == "renamed-by-hand"


async def test_an_untouched_trigger_is_still_reused(client: PlatformClient, ws: str) -> None:
    record, trigger, _ = await installed(client, ws)
    await rebind(client, ws, trigger, message="Edited by hand")  # not part of the binding
    again, _ = await install(client, ws, parse(DOC), {}, record)
    assert "automation:daily" in again.reused and again.updated == []
    report = await drift(client, ws, record)
    assert report.changed == {"automation:daily": ["/message"]} and report.rebound == {}


async def archive(client: PlatformClient, ws: str, agent_id: str) -> None:
    agent = await client.get(ws, kinds.AGENTS, agent_id)
    await client.update(ws, kinds.AGENTS, agent_id, AgentUpdate(archived=True), revision=agent.revision)


async def test_a_trigger_of_an_archived_agent_is_replaced_not_rebound(
    client: PlatformClient, ws: str
) -> None:
    record, trigger, old_agent = await installed(client, ws)
    await archive(client, ws, old_agent)
    planned = await plan(client, ws, parse(DOC), {}, record)
    daily = next(e for e in planned.preview.entities if e.entity == "automation:daily")
    assert daily.action == "CREATE" and "deleted" in (daily.reason or "")
    result, _ = await install(client, ws, parse(DOC), {}, record)
    assert sorted(result.created) == ["agent:bot", "automation:daily"]
    assert result.updated == [] and result.kept == []
    new_agent = record.find("agent:bot").primary_id  # type: ignore[union-attr]
    assert new_agent != old_agent
    # The install's own trigger runs the new agent; the old one, unedited and owned, is gone.
    [live] = await client.list_all(ws, kinds.TRIGGERS)
    assert live.id != trigger.id
    assert (live.name, live.agent_id, live.enabled) == ("cron-kit:daily", new_agent, False)
    assert record.find("automation:daily").primary_id == live.id  # type: ignore[union-attr]
    again, _ = await install(client, ws, parse(DOC), {}, record)
    assert again.created == [] and again.updated == [] and "automation:daily" in again.reused


async def test_an_edited_trigger_of_an_archived_agent_is_kept_and_reported(
    client: PlatformClient, ws: str
) -> None:
    record, trigger, old_agent = await installed(client, ws)
    await rebind(client, ws, trigger, message="Edited by hand")
    await archive(client, ws, old_agent)
    result, _ = await install(client, ws, parse(DOC), {}, record)
    assert sorted(result.created) == ["agent:bot", "automation:daily"] and result.updated == []
    assert result.kept == ["automation:daily"]
    [kept] = [i for i in result.preview.issues if i.code == "entity_kept"]
    assert (kept.severity, kept.entity) == ("warning", "automation:daily")
    assert trigger.id in kept.message and "/message" in kept.message
    new_agent = record.find("agent:bot").primary_id  # type: ignore[union-attr]
    triggers = {t.id: t for t in await client.list_all(ws, kinds.TRIGGERS)}
    assert sorted(triggers) == sorted([trigger.id, record.find("automation:daily").primary_id])  # type: ignore[union-attr]
    old = triggers.pop(trigger.id)
    [new] = triggers.values()
    assert (old.agent_id, old.message) == (old_agent, "Edited by hand")
    assert (new.name, new.agent_id, new.message, new.enabled) == (
        "cron-kit:daily",
        new_agent,
        "Report",
        False,
    )
    # The kept trigger is no longer the install's: the next run neither reports nor touches it.
    again, _ = await install(client, ws, parse(DOC), {}, record)
    assert again.created == [] and again.updated == [] and again.kept == []
    assert (await client.get(ws, kinds.TRIGGERS, trigger.id)).message == "Edited by hand"
