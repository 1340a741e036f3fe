"""All-or-nothing across updates, re-creation, removals in use, replacement, concurrent edits and
interrupted runs: nothing orphaned, nothing lost."""

from __future__ import annotations

from typing import Any

import pytest

from bundle_operator.engine.apply import Blocked, InstallFailed
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import PreconditionFailed
from bundle_operator.platform.models import AgentUpdate
from tests.documents import bundle_document
from tests.integration.engine.harness import (
    Store,
    arm_fault,
    clear_faults,
    install,
    parse,
    plan_and_apply,
    workspace_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def doc(
    *,
    with_b: bool = False,
    policy: str | None = None,
    model: str = "gpt-5",
    x_agent: bool = False,
    b_in_agent: bool = True,
) -> Any:
    mcps: list[dict[str, Any]] = [
        {
            "key": "a",
            "name": "A",
            "type": "command",
            "command": "npx",
            "args": ["a"],
            "env": {"LEVEL": "info"},
        }
    ]
    agents: list[dict[str, Any]] = [
        {"key": "bot", "name": "Bot", "model": model, "mcps": ["a", "b"] if with_b and b_in_agent else ["a"]}
    ]
    if with_b:
        mcps.append(
            {
                "key": "b",
                "name": "B",
                "type": "command",
                "command": "npx",
                "args": ["b"],
                "env": {"TOKEN": "${setup.tok}"},
            }
        )
    if x_agent:
        mcps.append({"key": "m", "name": "M", "type": "command", "command": "npx", "args": ["m"]})
        agents.append({"key": "x", "name": "X", "mcps": ["m"]})
    document: dict[str, Any] = bundle_document(
        "recovery",
        version=None,
        setup=[{"key": "tok", "label": "Token", "type": "secret", "required": False}],
        mcps=mcps,
        agents=agents,
    )
    if policy:
        document["policies"] = [{"key": "cap", "type": policy, "agent": "bot", "config": {"limit_usd": 5}}]
    return parse(document)


SETUP = {"tok": "value-of-b"}


async def owned_exactly(client: PlatformClient, ws: str, record: Record) -> None:
    """The workspace holds exactly what the record owns (platform-kept channel secrets aside)."""
    state = await workspace_state(client, ws)
    owned = {p.id for e in record.entities for p in e.parts} | {p.id for p in record.leftovers}
    assert {i for ids in state.values() for i in ids} == owned


async def test_a_failed_update_run_puts_back_updates_and_deletes_its_creates(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, doc(), SETUP)
    before = await workspace_state(client, ws)
    saved = record.model_dump()
    agent_id = record.find("agent:bot").primary_id  # type: ignore[union-attr]
    # The agent update (wiring in the new MCP b) fails after MCP a's update went through.
    await arm_fault(client, method="PATCH", path=f"/v1/workspaces/{ws}/agents/*", status=422)
    try:
        with pytest.raises(InstallFailed):
            new = doc(with_b=True, model="gpt-6")
            await install(client, ws, new, SETUP, record)
    finally:
        await clear_faults(client)
    assert await workspace_state(client, ws) == before
    assert record.model_dump()["entities"] == saved["entities"]
    agent = await client.get(ws, kinds.AGENTS, agent_id)  # type: ignore[arg-type]
    assert (agent.model, len(agent.mcp_instance_ids)) == ("gpt-5", 1)


async def test_a_failed_create_after_updates_touches_nothing(client: PlatformClient, ws: str) -> None:
    _, record = await install(client, ws, doc(), SETUP)
    before = await workspace_state(client, ws)
    await arm_fault(client, method="POST", path=f"/v1/workspaces/{ws}/policies", status=422)
    try:
        with pytest.raises(InstallFailed):
            await install(client, ws, doc(with_b=True, policy="spend_cap", model="gpt-6"), SETUP, record)
    finally:
        await clear_faults(client)
    assert await workspace_state(client, ws) == before
    await owned_exactly(client, ws, record)


async def test_recreating_a_deleted_mcp_instance_retires_its_old_server(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, doc(with_b=True, b_in_agent=False), SETUP)
    b = record.find("mcp:b")
    assert b is not None and b.primary_id is not None
    await client.delete(ws, kinds.MCP_INSTANCES, b.primary_id)  # someone deletes the instance
    result, _ = await install(client, ws, doc(with_b=True, b_in_agent=False), SETUP, record)
    assert result.created == ["mcp:b"]
    await owned_exactly(client, ws, record)


async def test_removed_entity_still_in_use_stays_owned_until_it_can_go(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, doc(x_agent=True), SETUP)
    x = record.find("agent:x")
    assert x is not None and x.primary_id is not None
    live_x = await client.get(ws, kinds.AGENTS, x.primary_id)
    await client.update(
        ws, kinds.AGENTS, x.primary_id, AgentUpdate(instructions="mine"), revision=live_x.revision
    )
    result, _ = await install(client, ws, doc(), SETUP, record)
    assert sorted(result.kept) == ["agent:x", "mcp:m"]  # x was edited; m is what x still uses
    assert record.find("mcp:m") is not None  # unmodified and ours: still owned
    await client.delete(ws, kinds.AGENTS, x.primary_id)  # the user lets go of x
    again, _ = await install(client, ws, doc(), SETUP, record)
    assert again.deleted == ["mcp:m"]
    await owned_exactly(client, ws, record)


async def test_a_field_the_platform_cannot_change_replaces_the_entity(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, doc(policy="spend_cap"), SETUP)
    old = record.find("policy:cap").primary_id  # type: ignore[union-attr]
    result, _ = await install(client, ws, doc(policy="answer_check"), SETUP, record)
    assert result.created == ["policy:cap"]
    policies = await client.list_all(ws, kinds.POLICIES)
    assert [(p.type, p.id != old) for p in policies] == [("answer_check", True)]
    await owned_exactly(client, ws, record)


async def test_an_edited_entity_whose_immutable_field_changes_blocks(client: PlatformClient, ws: str) -> None:
    from bundle_operator.platform.models import PolicyUpdate

    _, record = await install(client, ws, doc(policy="spend_cap"), SETUP)
    policy = await client.get(ws, kinds.POLICIES, record.find("policy:cap").primary_id)  # type: ignore[arg-type,union-attr]
    await client.update(
        ws, kinds.POLICIES, policy.id, PolicyUpdate(config={"limit_usd": 9}), revision=policy.revision
    )
    with pytest.raises(Blocked) as blocked:
        await install(client, ws, doc(policy="answer_check"), SETUP, record)
    assert [i.entity for i in blocked.value.preview.issues if i.blocking] == ["policy:cap"]


class EditsBeforeUpdating:
    """A platform proxy: someone edits the agent just before the engine's update of it lands."""

    def __init__(self, client: PlatformClient, ws: str) -> None:
        self.client = client
        self.ws = ws

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def update(self, workspace: str, kind: Any, entity_id: str, body: Any, *, revision: int) -> Any:
        if kind is kinds.AGENTS:
            current = await self.client.get(workspace, kind, entity_id)
            await self.client.update(
                workspace,
                kind,
                entity_id,
                AgentUpdate(instructions="edited meanwhile"),
                revision=current.revision,
            )
        return await self.client.update(workspace, kind, entity_id, body, revision=revision)


async def test_an_edit_made_during_a_run_is_not_overwritten(client: PlatformClient, ws: str) -> None:
    _, record = await install(client, ws, doc(), SETUP)
    with pytest.raises(InstallFailed) as failed:
        await plan_and_apply(
            EditsBeforeUpdating(client, ws),  # type: ignore[arg-type]
            ws,
            doc(model="gpt-6"),
            SETUP,
            record,
            Store(record).persist,
        )
    assert isinstance(failed.value.cause, PreconditionFailed)
    agent = await client.get(ws, kinds.AGENTS, record.find("agent:bot").primary_id)  # type: ignore[arg-type,union-attr]
    assert (agent.instructions, agent.model) == ("edited meanwhile", "gpt-5")
