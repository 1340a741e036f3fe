"""The reference platform keeps its data across a restart of the process."""

from __future__ import annotations

from pathlib import Path

import pytest
from platform_builders import SKILL_MD, agent, bundle, create, instance, key, secret, url_server
from platform_harness import start_platform

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    AgentCreate,
    GatewayMemberPut,
    GatewayPromptPut,
    McpInstanceCreate,
    PromptMessage,
    SkillCreate,
    TriggerCreate,
    TriggerUpdate,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_entities_secrets_and_idempotency_keys_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "platform.db"
    ws = "acme"
    first = start_platform(db)
    try:
        async with PlatformClient(first.url) as client:
            stored = await secret(client, ws, value="k" * 40)
            request_body = SkillCreate(source_type="inline", content=SKILL_MD)
            skill = await create(client, ws, kinds.SKILLS, request_body)
            agent_key = key()
            bot = await client.create(
                ws,
                kinds.AGENTS,
                AgentCreate(name="bot", model="m", skill_ids=[skill.id]),
                idempotency_key=agent_key,
            )
            request_body = TriggerCreate(
                name="kit:nightly", type="cron", agent_id=bot.id, schedule="0 3 * * *"
            )
            trigger = await create(client, ws, kinds.TRIGGERS, request_body)
            await client.update(ws, kinds.TRIGGERS, trigger.id, TriggerUpdate(enabled=False), revision=1)
            spec = await url_server(client, ws)
            gw = await bundle(client, ws)
            inst = await instance(client, ws, spec)
            await client.put_member(ws, gw.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
            await client.put_prompt(
                ws, gw.id, GatewayPromptPut(name="p", messages=[PromptMessage(role="user", text="hi")])
            )
    finally:
        assert first.stop() == 0

    second = start_platform(db)
    try:
        async with PlatformClient(second.url) as client:
            assert (await client.get(ws, kinds.AGENTS, bot.id)).skill_ids == [skill.id]
            again = await client.get(ws, kinds.TRIGGERS, trigger.id)
            assert (again.enabled, again.revision) == (False, 2)
            assert [m.name for m in await client.list_members(ws, gw.id)] == ["weather"]
            assert [p.name for p in await client.list_prompts(ws, gw.id)] == ["p"]
            assert (await client.list_tools(ws, gw.id))[0].presented_name == "weather__forecast"
            # The idempotency record survived: a retry after the restart creates nothing new.
            replay = await client.create(
                ws,
                kinds.AGENTS,
                AgentCreate(name="bot", model="m", skill_ids=[skill.id]),
                idempotency_key=agent_key,
            )
            assert replay.id == bot.id
            # The secret's value survived: a context secret must be 32..512 characters, and this one is.
            request_body = McpInstanceCreate(server_id=spec.id, name="signed", context_secret_id=stored.id)
            signed = await create(client, ws, kinds.MCP_INSTANCES, request_body)
            assert signed.context_signing is True
            await agent(client, ws, name="new after restart")
            assert len(await client.list_all(ws, kinds.AGENTS)) == 2
    finally:
        assert second.stop() == 0
    assert (tmp_path / "platform.db").exists()
