"""Export completes the round trip (seed 004): ``requires`` for the models and tools the agents use,
each agent's real model, and a report of every value replaced and everything dropped, by path only."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.export import export_with_report
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentCreate, AgentUpdate, ChannelCreate
from tests.documents import bundle_document
from tests.integration.engine.conftest import TOKEN
from tests.integration.engine.harness import install, parse
from tests.integration.engine.test_engine_export import LEAKS, seed_workspace
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))

NO_MODEL: dict[str, Any] = bundle_document(
    "no-model",
    version=None,
    mcps=[{"key": "docs", "name": "Docs", "type": "url", "endpoint_url": "https://docs.example.com/mcp"}],
    agents=[{"key": "plain", "name": "Plain Bot", "mcps": ["docs"]}],
)


async def test_requires_lists_the_models_and_tools_the_agents_use(client: PlatformClient, ws: str) -> None:
    await seed_workspace(client, ws)
    exported = await export_with_report(client, ws, "exported", "1.0.0")
    assert exported.document["requires"] == [
        {"kind": "model", "ref": "gpt-5", "policy": "substitute"},
        {"kind": "tool", "ref": "tool_box", "policy": "strip"},
        {"kind": "tool", "ref": "remote_notes", "policy": "strip"},
    ]
    parsed = parse_bundle_text(exported.text)
    assert parsed.bundle is not None and not parsed.blocking, [i.to_json() for i in parsed.issues]


async def test_an_agent_without_a_model_exports_the_model_it_really_has(
    client: PlatformClient, ws: str
) -> None:
    _, record = await install(client, ws, parse(NO_MODEL), {})
    plain = record.find("agent:plain")
    assert plain is not None and plain.primary_id is not None
    live = await client.get(ws, kinds.AGENTS, plain.primary_id)
    exported = await export_with_report(client, ws, "exported")
    (agent,) = exported.document["agents"]
    assert agent["model"] == live.model  # the platform's default, as the platform names it
    # Seed 004: every model is instance-specific, the default included; the installer names it.
    models = [r for r in exported.document["requires"] if r["kind"] == "model"]
    assert models == [{"kind": "model", "ref": live.model, "policy": "substitute"}]
    parsed = parse_bundle_text(exported.text)
    unmapped = await plan(
        client, ws + "-copy", parsed, {}, Record(installation="t/i", workspace=ws + "-copy")
    )
    assert [(i.code, i.path) for i in unmapped.preview.issues if i.blocking] == [
        ("substitution_required", "/requires/0")
    ]
    substitutions = {f"model:{live.model}": live.model}
    _, copy = await install(client, ws + "-copy", parsed, {}, options=Options(substitutions=substitutions))
    copied = copy.find("agent:plain_bot")
    assert copied is not None and copied.primary_id is not None
    assert (await client.get(ws + "-copy", kinds.AGENTS, copied.primary_id)).model == live.model


async def test_the_report_names_every_replaced_value_and_every_drop_by_path(
    client: PlatformClient, ws: str
) -> None:
    await seed_workspace(client, ws)
    # An archived agent with a channel of its own: both are left out, and reported.
    other = await client.create(
        ws, kinds.AGENTS, AgentCreate(name="Old Bot", model="gpt-5"), idempotency_key=f"old-{ws}"
    )
    channel = await client.create(
        ws,
        kinds.CHANNELS,
        ChannelCreate(type="telegram", agent_id=other.id, bot_token="999:old-token-value"),
        idempotency_key=f"old-chan-{ws}",
    )
    await client.update(ws, kinds.AGENTS, other.id, AgentUpdate(archived=True), revision=other.revision)

    exported = await export_with_report(client, ws, "exported", "1.0.0")
    report = exported.report
    replaced = {r.path: r for r in report.replaced}
    # Every setup reference in the document is reported at its path, and nothing else is.
    referenced = {path for path, value in _strings(exported.document) if "${setup." in value}
    assert set(replaced) == referenced
    assert {r.setup for r in report.replaced} == {f["key"] for f in exported.document["setup"]}
    assert replaced["/mcps/0/env/GITHUB"].reason == "secret-backed value, never read"
    assert replaced["/mcps/0/env/API_TOKEN"].reason == "credential-like name"
    assert replaced["/mcps/0/args/2"].reason == "credential argument"
    assert replaced["/mcps/1/endpoint_url"].reason == "credentialed URL"
    assert "/channels/0/bot_token" in replaced and "/mcps/1/context_secret" in replaced
    dropped = {d.path: d.reason for d in report.dropped}
    assert f"agents/{other.id}" in dropped and f"channels/{channel.id}" in dropped
    # By path, never by value: no credential, and none of the replaced values, is in the report.
    text = json.dumps(report.to_json()) + "\n".join(report.lines())
    for leak in [*LEAKS, "old-token-value"]:
        assert leak not in text, leak


def _strings(value: Any, path: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _strings(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _strings(v, f"{path}/{i}")]
    return [(path, value)] if isinstance(value, str) else []


def test_bundlectl_export_reports_on_stderr_and_under_report_in_json(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    async def seed() -> None:
        async with PlatformClient(engine_platform.url, token=TOKEN) as client:
            await seed_workspace(client, ws)

    asyncio.run(seed())
    env = {**os.environ, "BUNDLE_PLATFORM_URL": engine_platform.url, "BUNDLE_PLATFORM_TOKEN": TOKEN}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BUNDLECTL, *args, "--workspace", ws], capture_output=True, text=True, cwd=tmp_path, env=env
        )

    done = run("export", "--name", "exported")
    assert done.returncode == 0, done.stderr
    assert "replaced /mcps/0/env/API_TOKEN with ${setup.tool_box_env_0} (credential-like name)" in done.stderr
    assert "dropped /channels/0/enabled" not in done.stderr  # installed disabled: nothing lost
    assert yaml.safe_load(done.stdout)["name"] == "exported"
    done = run("export", "--name", "exported", "-o", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"document", "report"}
    assert out["document"]["requires"][0] == {"kind": "model", "ref": "gpt-5", "policy": "substitute"}
    paths = [r["path"] for r in out["report"]["replaced"]]
    assert "/mcps/0/env/API_TOKEN" in paths and out["report"]["dropped"] == []
    for leak in LEAKS:
        assert leak not in done.stdout + done.stderr, leak
