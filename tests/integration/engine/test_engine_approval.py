"""The plan a person approves: the same inputs give the same id, any change of what the run
depends on gives another, and the plan lists per entity what the run would do."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bundle_operator.engine.approval import correct_plan, run_plan
from bundle_operator.engine.drift import drift_from
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentUpdate
from tests.documents import TOKEN_SETUP, bundle_document, github_mcp
from tests.integration.engine.harness import install, parse

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DOC: dict[str, Any] = bundle_document(
    "gate-kit",
    setup=TOKEN_SETUP,
    mcps=[github_mcp()],
    agents=[
        {"key": "bot", "name": "Gate Bot", "model": "gpt-5", "instructions": "Be brief.", "mcps": ["gh"]}
    ],
    policies=[{"key": "cap", "type": "spend_cap", "agent": "bot", "config": {"limit_usd": 10}}],
)
SETUP = {"token": "ghp_first_value_0000"}
OPTIONS = Options()


def changed(mutate: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    mutate(doc)
    return doc


async def plan_of(
    client: PlatformClient, ws: str, doc: dict[str, Any], record: Record, setup: dict[str, str] = SETUP
) -> Any:
    planned = await plan(client, ws, parse(doc), setup, record, OPTIONS)
    return planned, run_plan(planned, record, OPTIONS)


async def test_a_first_install_is_an_install_plan_whose_id_is_stable(client: PlatformClient, ws: str) -> None:
    record = Record(installation="test/gate", workspace=ws)
    _, first = await plan_of(client, ws, DOC, record)
    _, again = await plan_of(client, ws, DOC, record)
    assert first.operation == "Install"
    assert first.id == again.id and first.id.startswith("sha256:") and len(first.id) == 71
    assert [(c.entity, c.action) for c in first.changes] == [
        ("mcp:gh", "create"),
        ("agent:bot", "create"),
        ("policy:cap", "create"),
    ]
    assert first.summary() == "Install: 3 create"


async def test_an_update_lists_the_paths_it_changes_and_keeps_the_rest(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(DOC), SETUP)
    doc = changed(lambda d: d["agents"][0].update(instructions="Be thorough."))
    _, update = await plan_of(client, ws, doc, record)
    assert update.operation == "Update"
    by_entity = {c.entity: c for c in update.changes}
    assert by_entity["agent:bot"].action == "update"
    assert by_entity["agent:bot"].paths == ("/instructions",)
    assert by_entity["mcp:gh"].action == by_entity["policy:cap"].action == "keep"
    assert update.counts() == {"update": 1, "keep": 2}


async def test_a_dropped_entity_is_a_delete(client: PlatformClient, ws: str) -> None:
    _, record = await install(client, ws, parse(DOC), SETUP)
    _, update = await plan_of(client, ws, changed(lambda d: d.pop("policies")), record)
    assert ("policy:cap", "delete") in [(c.entity, c.action) for c in update.changes]


async def test_any_input_of_the_run_changes_the_id(client: PlatformClient, ws: str) -> None:
    _, record = await install(client, ws, parse(DOC), SETUP)
    doc = changed(lambda d: d["agents"][0].update(instructions="Be thorough."))
    _, base = await plan_of(client, ws, doc, record)
    # Another bundle change, another setup value, a platform-side edit of a touched entity.
    _, other_doc = await plan_of(
        client, ws, changed(lambda d: d["agents"][0].update(instructions="Hi.")), record
    )
    _, other_setup = await plan_of(client, ws, doc, record, {"token": "ghp_second_value_000"})
    bot = record.find("agent:bot")
    assert bot is not None and bot.primary_id is not None
    await client.update(ws, kinds.AGENTS, bot.primary_id, AgentUpdate(description="edited"), revision=1)
    _, other_live = await plan_of(client, ws, doc, record)
    ids = {base.id, other_doc.id, other_setup.id, other_live.id}
    assert len(ids) == 4
    # Secret values enter only as HMACs under the record's key: the id never reveals them.
    assert "ghp_second_value_000" not in repr(other_setup)


async def test_drift_under_correct_is_a_correct_plan_of_the_drifted_paths(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(DOC), SETUP)
    bot = record.find("agent:bot")
    assert bot is not None and bot.primary_id is not None
    await client.update(ws, kinds.AGENTS, bot.primary_id, AgentUpdate(instructions="Ramble."), revision=1)
    planned, _ = await plan_of(client, ws, DOC, record)
    correct = correct_plan(planned, record, drift_from(record, planned.snapshot))
    again = correct_plan(planned, record, drift_from(record, planned.snapshot))
    assert correct.operation == "Correct" and correct.id == again.id
    assert [(c.entity, c.action, c.paths) for c in correct.changes] == [
        ("agent:bot", "update", ("/instructions",))
    ]
