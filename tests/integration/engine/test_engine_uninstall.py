"""Uninstall refuses up front, deleting nothing, while a foreign entity still uses what it would delete."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.engine.uninstall import UninstallRefused, uninstall
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentCreate, GatewayBundleCreate, GatewayMemberPut
from tests.documents import bundle_document
from tests.integration.engine.conftest import TOKEN
from tests.integration.engine.harness import Store, install, parse, workspace_state
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))

DOC: dict[str, Any] = bundle_document(
    "held-kit",
    version=None,
    mcps=[
        {"key": "gh", "name": "GitHub", "type": "command", "command": "npx", "args": ["-y", "gh-mcp"]},
        {"key": "docs", "name": "Docs", "type": "url", "endpoint_url": "https://docs.example.com/mcp"},
    ],
    skills=[
        {"key": "triage", "source_type": "inline", "content": "---\nname: triage\ndescription: x\n---\nB\n"}
    ],
    agents=[
        {"key": "bot", "name": "Held Bot", "model": "gpt-5", "mcps": ["gh", "docs"], "skills": ["triage"]}
    ],
    policies=[{"key": "cap", "type": "spend_cap", "agent": "bot", "config": {"limit_usd": 1}}],
)


async def _foreign_agent(client: PlatformClient, ws: str, instance_id: str) -> str:
    agent = await client.create(
        ws,
        kinds.AGENTS,
        AgentCreate(name="Someone Else", model="gpt-5", mcp_instance_ids=[instance_id]),
        idempotency_key=f"foreign-{ws}",
    )
    return agent.id


async def test_a_foreign_agent_on_the_bundles_mcp_refuses_the_uninstall_before_any_delete(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(DOC), {})
    gh = record.find("mcp:gh")
    assert gh is not None and gh.primary_id is not None
    foreign = await _foreign_agent(client, ws, gh.primary_id)
    before = await workspace_state(client, ws)
    entities_before = [r.entity for r in record.entities]

    with pytest.raises(UninstallRefused) as refused:
        await uninstall(client, ws, record, Store(record).persist)

    assert list(refused.value.held) == ["mcp:gh"]
    assert refused.value.held["mcp:gh"] == [f"agents/{foreign} 'Someone Else'"]
    assert "mcp:gh" in str(refused.value) and foreign in str(refused.value)
    # Nothing went: not the agent, the policy or the skill that nobody else uses either.
    assert await workspace_state(client, ws) == before
    assert [r.entity for r in record.entities] == entities_before

    # Once the foreign agent lets go, the same record uninstalls completely.
    agent = await client.get(ws, kinds.AGENTS, foreign)
    await client.delete(ws, kinds.AGENTS, foreign, revision=agent.revision)
    done = await uninstall(client, ws, record, Store(record).persist)
    assert done.complete and sorted(done.deleted) == [
        "agent:bot",
        "mcp:docs",
        "mcp:gh",
        "policy:cap",
        "skill:triage",
    ]


async def test_a_foreign_gateway_member_holds_the_mcp_too(client: PlatformClient, ws: str) -> None:
    _, record = await install(client, ws, parse(DOC), {})
    docs = record.find("mcp:docs")
    assert docs is not None and docs.primary_id is not None
    gateway = await client.create(
        ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name="theirs"), idempotency_key=f"gw-{ws}"
    )
    await client.put_member(ws, gateway.id, "docs", GatewayMemberPut(mcp_instance_id=docs.primary_id))
    before = await workspace_state(client, ws)
    with pytest.raises(UninstallRefused) as refused:
        await uninstall(client, ws, record, Store(record).persist)
    assert list(refused.value.held) == ["mcp:docs"]
    assert refused.value.held["mcp:docs"][0].startswith(f"gateway-bundles/{gateway.id} 'theirs'")
    assert await workspace_state(client, ws) == before


def test_bundlectl_uninstall_names_the_holder_and_exits_1(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    import asyncio
    import json

    import yaml

    (tmp_path / "b.yaml").write_text(yaml.safe_dump(DOC))
    env = {**os.environ, "BUNDLE_PLATFORM_URL": engine_platform.url, "BUNDLE_PLATFORM_TOKEN": TOKEN}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BUNDLECTL, *args, "--workspace", ws], capture_output=True, text=True, cwd=tmp_path, env=env
        )

    done = run("install", "b.yaml", "-o", "json")
    assert done.returncode == 0, done.stderr
    gh_id = next(e["id"] for e in json.loads(done.stdout)["entities"] if e["key"] == "gh")

    async def hold() -> str:
        async with PlatformClient(engine_platform.url, token=TOKEN) as client:
            return await _foreign_agent(client, ws, gh_id)

    foreign = asyncio.run(hold())
    done = run("uninstall", "--bundle", "held-kit", "-o", "json")
    assert done.returncode == 1
    out = json.loads(done.stdout)
    assert out["deleted"] == [] and out["refused"][0]["entity"] == "mcp:gh"
    assert foreign in out["refused"][0]["held_by"][0]
    done = run("uninstall", "--bundle", "held-kit")
    assert done.returncode == 1 and "REFUSED" in done.stdout and foreign in done.stdout
    assert "nothing was deleted" in done.stdout
