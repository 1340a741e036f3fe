"""Update by three-way merge, removals, changed setup values, drift and uninstall."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bundle_operator.engine.apply import Blocked
from bundle_operator.engine.drift import drift
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.engine.uninstall import uninstall
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentUpdate
from tests.documents import bundle_document
from tests.integration.engine.harness import Store, install, parse, workspace_state

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DOC: dict[str, Any] = bundle_document(
    "ops-kit",
    setup=[
        {"key": "token", "label": "Token", "type": "secret"},
        {"key": "bot", "label": "Bot token", "type": "secret"},
    ],
    mcps=[
        {
            "key": "gh",
            "name": "GitHub",
            "type": "command",
            "command": "npx",
            "args": ["-y", "gh-mcp"],
            "env": {"GITHUB_TOKEN": "${setup.token}", "LOG": "info"},
        },
        {"key": "docs", "name": "Docs", "type": "url", "endpoint_url": "https://docs.example.com/mcp"},
    ],
    skills=[
        {
            "key": "triage",
            "source_type": "inline",
            "content": "---\nname: triage\ndescription: Label issues\n---\nBody\n",
        }
    ],
    agents=[
        {
            "key": "bot",
            "name": "Ops Bot",
            "model": "gpt-5",
            "instructions": "Be brief.",
            "description": "Helps ops",
            "mcps": ["gh", "docs"],
            "skills": ["triage"],
        }
    ],
    channels=[
        {"key": "chat", "type": "telegram", "agent": "bot", "bot_token": "${setup.bot}", "enabled": True}
    ],
    automations=[
        {
            "key": "daily",
            "type": "cron",
            "agent": "bot",
            "schedule": "0 8 * * *",
            "message": "Report",
            "enabled": True,
        }
    ],
    policies=[{"key": "cap", "type": "spend_cap", "agent": "bot", "config": {"limit_usd": 10}}],
)
SETUP = {"token": "ghp_first_value_0000", "bot": "123:first"}


def changed(mutate: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    mutate(doc)
    return doc


async def installed(client: PlatformClient, ws: str) -> Record:
    result, record = await install(client, ws, parse(DOC), SETUP)
    assert len(result.created) == 7
    return record


async def agent_of(client: PlatformClient, ws: str, record: Record) -> Any:
    found = record.find("agent:bot")
    assert found is not None and found.primary_id is not None
    return await client.get(ws, kinds.AGENTS, found.primary_id)


async def edit_agent(client: PlatformClient, ws: str, record: Record, **changes: Any) -> None:
    agent = await agent_of(client, ws, record)
    await client.update(ws, kinds.AGENTS, agent.id, AgentUpdate(**changes), revision=agent.revision)


async def test_untouched_entities_take_the_new_version(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    result, _ = await install(
        client, ws, parse(changed(lambda d: d["agents"][0].update(model="gpt-6"))), SETUP, record
    )
    assert result.updated == ["agent:bot"]
    assert result.created == []
    assert (await agent_of(client, ws, record)).model == "gpt-6"


async def test_local_edit_to_an_untouched_field_survives(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    await edit_agent(client, ws, record, description="Edited by a human")
    result, _ = await install(
        client, ws, parse(changed(lambda d: d["agents"][0].update(model="gpt-6"))), SETUP, record
    )
    assert result.updated == ["agent:bot"]
    agent = await agent_of(client, ws, record)
    assert (agent.model, agent.description) == ("gpt-6", "Edited by a human")
    # The edit stays a local edit: drift reports it, the same bundle again keeps it, uninstall keeps it.
    assert (await drift(client, ws, record)).changed == {"agent:bot": ["/description"]}
    again, _ = await install(
        client, ws, parse(changed(lambda d: d["agents"][0].update(model="gpt-6"))), SETUP, record
    )
    assert again.updated == [] and again.reused
    assert (await agent_of(client, ws, record)).description == "Edited by a human"
    assert (await uninstall(client, ws, record, Store(record).persist)).kept["agent:bot"] == ["/description"]


async def test_true_conflict_writes_nothing_and_names_the_path(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    await edit_agent(client, ws, record, instructions="Human version")
    before = await workspace_state(client, ws)
    saved = record.model_dump_json()
    new = parse(changed(lambda d: d["agents"][0].update(instructions="Bundle v2", model="gpt-6")))
    with pytest.raises(Blocked) as blocked:
        await install(client, ws, new, SETUP, record)
    conflicts = [i for i in blocked.value.preview.issues if i.code == "update_conflict"]
    assert [(i.entity, i.path) for i in conflicts] == [("agent:bot", "/instructions")]
    agent = await agent_of(client, ws, record)
    assert (agent.instructions, agent.model) == ("Human version", "gpt-5")
    assert await workspace_state(client, ws) == before
    assert record.model_dump_json() == saved


@pytest.mark.parametrize(
    ("mode", "expected"), [(OnConflict.KEEP_MINE, "Human version"), (OnConflict.TAKE_THEIRS, "Bundle v2")]
)
async def test_conflict_modes(client: PlatformClient, ws: str, mode: OnConflict, expected: str) -> None:
    record = await installed(client, ws)
    await edit_agent(client, ws, record, instructions="Human version")
    new = parse(changed(lambda d: d["agents"][0].update(instructions="Bundle v2", model="gpt-6")))
    result, _ = await install(client, ws, new, SETUP, record, Options(on_conflict=mode))
    assert result.conflicts == {"agent:bot": ["/instructions"]}
    agent = await agent_of(client, ws, record)
    assert (agent.instructions, agent.model) == (expected, "gpt-6")
    # The next run of the same bundle does not undo the resolution.
    again, _ = await install(client, ws, new, SETUP, record, Options(on_conflict=mode))
    assert again.updated == []
    assert (await agent_of(client, ws, record)).instructions == expected


async def test_removed_entities_go_when_unmodified_and_stay_when_edited(
    client: PlatformClient, ws: str
) -> None:
    record = await installed(client, ws)
    policy = record.find("policy:cap")
    assert policy is not None and policy.primary_id is not None

    def drop(d: dict[str, Any]) -> None:
        d["policies"] = []
        d["automations"] = []

    trigger = record.find("automation:daily")
    assert trigger is not None and trigger.primary_id is not None
    live_trigger = await client.get(ws, kinds.TRIGGERS, trigger.primary_id)
    from bundle_operator.platform.models import TriggerUpdate

    await client.update(
        ws, kinds.TRIGGERS, live_trigger.id, TriggerUpdate(message="Edited"), revision=live_trigger.revision
    )
    preview = (await plan(client, ws, parse(changed(drop)), SETUP, record)).preview
    codes = sorted((str(i.code), i.entity) for i in preview.issues)
    assert codes == [("entity_kept", "automation:daily"), ("entity_removed", "policy:cap")]
    result, _ = await install(client, ws, parse(changed(drop)), SETUP, record)
    assert result.deleted == ["policy:cap"]
    assert result.kept == ["automation:daily"]
    assert await client.list_all(ws, kinds.POLICIES) == []
    assert [t.message for t in await client.list_all(ws, kinds.TRIGGERS)] == ["Edited"]
    assert record.find("automation:daily") is None  # no longer owned


async def test_changed_setup_value_is_an_update(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    preview = (
        await plan(client, ws, parse(DOC), {**SETUP, "token": "ghp_second_value_1111"}, record)
    ).preview
    actions = {p.entity: p.action for p in preview.entities}
    assert actions["mcp:gh"] == "UPDATE"
    assert actions["mcp:docs"] == "REUSE"
    result, _ = await install(
        client, ws, parse(DOC), {**SETUP, "token": "ghp_second_value_1111", "bot": "9:x"}, record
    )
    assert sorted(result.updated) == ["channel:chat", "mcp:gh"]
    again, _ = await install(
        client, ws, parse(DOC), {**SETUP, "token": "ghp_second_value_1111", "bot": "9:x"}, record
    )
    assert again.updated == [] and again.created == []
    assert "ghp_second_value_1111" not in record.model_dump_json()


async def test_archived_agent_is_installed_again_and_dependents_follow(
    client: PlatformClient, ws: str
) -> None:
    record = await installed(client, ws)
    await edit_agent(client, ws, record, archived=True)
    result, _ = await install(client, ws, parse(DOC), SETUP, record)
    # The trigger is the install's own only while it runs the agent the install bound (seed 000):
    # a new one runs the new agent, the old one goes.
    assert result.created == ["agent:bot", "automation:daily"]
    assert sorted(result.updated) == ["channel:chat", "policy:cap"]
    agents = await client.list_all(ws, kinds.AGENTS)
    assert sorted(a.archived for a in agents) == [False, True]
    new_agent = next(a.id for a in agents if not a.archived)
    assert [t.agent_id for t in await client.list_all(ws, kinds.TRIGGERS)] == [new_agent]


async def test_activation_enables_channel_and_trigger(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    assert [t.enabled for t in await client.list_all(ws, kinds.TRIGGERS)] == [False]
    assert [c.enabled for c in await client.list_all(ws, kinds.CHANNELS)] == [False]
    result, _ = await install(client, ws, parse(DOC), SETUP, record, Options(activate=True))
    assert sorted(result.updated) == ["automation:daily", "channel:chat"]
    assert [t.enabled for t in await client.list_all(ws, kinds.TRIGGERS)] == [True]
    assert [c.enabled for c in await client.list_all(ws, kinds.CHANNELS)] == [True]


async def test_drift_paths_with_one_list_call_per_kind(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    assert not (await drift(client, ws, record)).drifted
    await edit_agent(client, ws, record, model="gpt-local", instructions="changed")
    report = await drift(client, ws, record)
    assert report.changed == {"agent:bot": ["/instructions", "/model"]}
    # One list call per kind the installation wrote (secrets are write-only and never listed).
    kinds_recorded = {part.path for r in record.entities for part in r.parts} - {"secrets"}
    assert report.calls == len(kinds_recorded)


async def test_uninstall_keeps_an_edited_agent_and_what_it_uses(client: PlatformClient, ws: str) -> None:
    record = await installed(client, ws)
    await edit_agent(client, ws, record, instructions="Mine now")
    store = Store(record)
    result = await uninstall(client, ws, record, store.persist)
    assert result.kept["agent:bot"] == ["/instructions"]
    assert sorted(result.kept) == ["agent:bot", "mcp:docs", "mcp:gh", "skill:triage"]
    assert sorted(result.deleted) == ["automation:daily", "channel:chat", "policy:cap"]
    assert result.complete
    state = await workspace_state(client, ws)
    assert len(state["agents"]) == 1 and state["triggers"] == [] and state["policies"] == []


async def test_uninstall_of_an_unmodified_installation_leaves_an_empty_workspace(
    client: PlatformClient, ws: str
) -> None:
    before = await workspace_state(client, ws)
    record = await installed(client, ws)
    result = await uninstall(client, ws, record, Store(record).persist)
    assert len(result.deleted) == 7 and result.kept == {}
    assert await workspace_state(client, ws) == before
    assert record.entities == []
