"""Export: credentials screened out (seed 000), deterministic bytes, and a round trip that installs.

The workspace to export is built through the platform API (``seed_workspace``), with credentials
written in plain configuration the way a person may have configured it by hand."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.analyze import analyze_offline
from bundle_operator.engine.export import ExportRefused, build_document, export_workspace
from bundle_operator.engine.plan import Options
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    Agent,
    AgentCreate,
    ChannelCreate,
    McpInstanceCreate,
    McpServerCreate,
    PolicyCreate,
    SchemaFieldIn,
    SecretCreate,
    SecretRef,
    SkillCreate,
    TriggerCreate,
    TriggerUpdate,
)
from tests.documents import bundle_document
from tests.integration.engine.harness import install

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

LEAKS = [
    "s3cr3tPassw0rd",
    "hunter2hunter2",
    "literal-token-xyz",
    "abc123secret",
    "tok456secret",
    "pw-in-url",
    "Zq9x8c7v6b5n4m3l2k1j0h9g8f7",
    "bearer-value-1",
    "s3cr3t-query",
    "first-context-secret-of-forty-characters!",
    "setup-secret-value",
    "123:bot",
]

SOURCE: dict[str, Any] = bundle_document(
    "to-export",
    version=None,
    setup=[
        {"key": "gh", "label": "GitHub token", "type": "secret"},
        {"key": "signing", "label": "Signing key", "type": "secret"},
        {"key": "bot", "label": "Bot", "type": "secret"},
    ],
    mcps=[
        {
            "key": "tools",
            "name": "Tool Box",
            "type": "command",
            "command": "npx",
            "args": [
                "-y",
                "@acme/toolbox",
                "--api-key=abc123secret",
                "--token",
                "tok456secret",
                "postgresql://reader:pw-in-url@db.internal/app",
                "--region",
                "eu",
                "Authorization: Bearer x1",
                "--connection-string=postgresql://app:s3cr3tPassw0rd@db:5432/app",
                "--header=Authorization: Bearer s3cr3tPassw0rd",
            ],
            "env": {
                "API_TOKEN": "literal-token-xyz",
                "REGION": "eu-west-1",
                "PGPASSWORD": "hunter2hunter2",
                "GITHUB": "${setup.gh}",
                "CALLBACK": "https://hooks.example.com/services/Zq9x8c7v6b5n4m3l2k1j0h9g8f7",
            },
        },
        {
            "key": "remote",
            "name": "Remote Notes",
            "type": "url",
            "endpoint_url": "https://notes.example.com/mcp?api_key=s3cr3t-query",
            "headers": {"Authorization": "Bearer bearer-value-1", "X-Team": "blue"},
            "context_secret": "${setup.signing}",
        },
    ],
    skills=[
        {
            "key": "triage",
            "source_type": "inline",
            "content": "---\nname: triage\ndescription: Label\n---\nBody\n",
        },
    ],
    agents=[
        {
            "key": "bot",
            "name": "Helper Bot",
            "model": "gpt-5",
            "instructions": "Line one.\nLine two.\n",
            "mcps": ["tools", "remote"],
            "skills": ["triage"],
        }
    ],
    channels=[{"key": "chat", "type": "telegram", "agent": "bot", "bot_token": "${setup.bot}"}],
    automations=[{"key": "daily", "type": "cron", "agent": "bot", "schedule": "0 9 * * 1", "message": "Go"}],
    policies=[{"key": "cap", "type": "spend_cap", "agent": "bot", "config": {"limit_usd": 5}}],
)
SETUP = {"gh": "setup-secret-value", "signing": "first-context-secret-of-forty-characters!", "bot": "123:bot"}


async def seed_workspace(client: PlatformClient, ws: str) -> None:
    """The workspace SOURCE describes, built through the platform API the way a person configures
    one by hand: the credentials written in plain configuration (declared ``string`` in the server
    spec, which turns the platform's own check off) are what export screening is for. A bundle with
    them would not install: analyze blocks literal credentials."""

    async def make(kind: Any, body: Any) -> Any:
        return await client.create(ws, kind, body, idempotency_key=f"seed-{ws}-{uuid.uuid4().hex}")

    tools, remote = SOURCE["mcps"]
    gh = await make(kinds.SECRETS, SecretCreate(name="gh", value=SecretStr(SETUP["gh"])))
    tools_server = await make(
        kinds.MCP_SERVERS,
        McpServerCreate(
            name="Tool Box",
            type="command",
            command=tools["command"],
            env_schema=[
                SchemaFieldIn(name=n, type="secret" if n == "GITHUB" else "string") for n in tools["env"]
            ],
        ),
    )
    env: dict[str, str | SecretRef] = {**tools["env"], "GITHUB": SecretRef(secret_id=gh.id)}
    tools_instance = await make(
        kinds.MCP_INSTANCES,
        McpInstanceCreate(server_id=tools_server.id, name="Tool Box", env=env, args=tools["args"]),
    )
    remote_server = await make(
        kinds.MCP_SERVERS,
        McpServerCreate(
            name="Remote Notes",
            type="url",
            endpoint_url="https://notes.example.com/mcp",
            headers_schema=[SchemaFieldIn(name=n, type="string") for n in remote["headers"]],
        ),
    )
    remote_instance = await make(
        kinds.MCP_INSTANCES,
        McpInstanceCreate(
            server_id=remote_server.id,
            name="Remote Notes",
            endpoint_url=remote["endpoint_url"],
            headers=remote["headers"],
            context_secret=SecretStr(SETUP["signing"]),
        ),
    )
    skill = await make(
        kinds.SKILLS, SkillCreate(source_type="inline", content=SOURCE["skills"][0]["content"])
    )
    bot = SOURCE["agents"][0]
    agent = await make(
        kinds.AGENTS,
        AgentCreate(
            name=bot["name"],
            model=bot["model"],
            instructions=bot["instructions"],
            mcp_instance_ids=[tools_instance.id, remote_instance.id],
            skill_ids=[skill.id],
        ),
    )
    await make(
        kinds.CHANNELS, ChannelCreate(type="telegram", name="chat", agent_id=agent.id, bot_token=SETUP["bot"])
    )
    daily = SOURCE["automations"][0]
    trigger = await make(
        kinds.TRIGGERS,
        TriggerCreate(
            name="to-export:daily", type="cron", agent_id=agent.id, schedule=daily["schedule"], message="Go"
        ),
    )
    await client.update(
        ws, kinds.TRIGGERS, trigger.id, TriggerUpdate(enabled=False), revision=trigger.revision
    )
    cap = SOURCE["policies"][0]
    await make(kinds.POLICIES, PolicyCreate(type=cap["type"], agent_id=agent.id, config=cap["config"]))


async def exported(client: PlatformClient, ws: str) -> str:
    await seed_workspace(client, ws)
    return await export_workspace(client, ws, "exported", "1.0.0")


async def test_no_credential_travels(client: PlatformClient, ws: str) -> None:
    text = await exported(client, ws)
    for leak in LEAKS:
        assert leak not in text, leak
    doc = yaml.safe_load(text)
    secret_keys = {f["key"] for f in doc["setup"] if f["type"] == "secret"}
    tools = next(m for m in doc["mcps"] if m["name"] == "Tool Box")
    remote = next(m for m in doc["mcps"] if m["name"] == "Remote Notes")
    assert tools["args"] == [
        "-y",
        "@acme/toolbox",
        "--api-key=${setup.tool_box_arg_2}",
        "--token",
        "${setup.tool_box_arg_4}",
        "${setup.tool_box_arg_5}",
        "--region",
        "eu",
        "Authorization: Bearer ${setup.tool_box_arg_8}",
        "--connection-string=${setup.tool_box_arg_9}",
        "--header=Authorization: Bearer ${setup.tool_box_arg_10}",
    ]
    assert tools["env"]["REGION"] == "eu-west-1"  # plain configuration travels as written
    assert tools["env"]["API_TOKEN"].startswith("${setup.")  # a credential-like name
    assert tools["env"]["GITHUB"].startswith("${setup.")  # a secret-backed value is never read
    assert tools["env"]["CALLBACK"].startswith("${setup.")  # an opaque 24+ character path segment
    assert remote["endpoint_url"] == "${setup.remote_notes_url}"  # a credential query parameter
    assert remote["headers"] == {"Authorization": "Bearer ${setup.remote_notes_header_0}", "X-Team": "blue"}
    assert remote["context_secret"] == "${setup.remote_notes_context_secret}"
    chat = doc["channels"][0]
    assert chat["bot_token"] == "${setup.chat_bot_token}"
    refs = {r for m in doc["mcps"] for r in _refs(m)} | set(_refs(chat))
    assert refs == secret_keys


def _refs(value: Any) -> list[str]:
    out: list[str] = []
    if isinstance(value, dict):
        for v in value.values():
            out += _refs(v)
    elif isinstance(value, list):
        for v in value:
            out += _refs(v)
    elif isinstance(value, str) and "${setup." in value:
        out.append(value.split("${setup.", 1)[1].split("}", 1)[0])
    return out


async def test_two_exports_are_byte_identical_and_parse_clean(client: PlatformClient, ws: str) -> None:
    first = await exported(client, ws)
    second = await export_workspace(client, ws, "exported", "1.0.0")
    assert first == second
    parsed = parse_bundle_text(first)
    assert parsed.bundle is not None, [i.to_json() for i in parsed.issues]
    assert not parsed.blocking


async def test_export_then_install_in_a_fresh_workspace(client: PlatformClient, ws: str) -> None:
    text = await exported(client, ws)
    parsed = parse_bundle_text(text)
    assert parsed.bundle is not None
    samples = {"_url": "https://notes.example.com/mcp", "_bot_token": "123456:AbC-dEf"}
    values = {
        f.key: next((v for suffix, v in samples.items() if f.key.endswith(suffix)), "x" * 40)
        for f in parsed.bundle.setup
    }
    # The export requires its agents' model (substitute, seed 004): the installer names one.
    models = {"model:gpt-5": "gpt-5"}
    preview = analyze_offline(parsed, values)
    blockers = [i.to_json() for i in preview.issues if i.blocking]
    assert all(i["code"] == "substitution_required" for i in blockers), blockers
    result, _ = await install(client, ws + "-copy", parsed, values, options=Options(substitutions=models))
    assert sorted(e.split(":")[0] for e in result.created) == sorted(
        ["mcp", "mcp", "skill", "agent", "channel", "automation", "policy"]
    )
    again = await export_workspace(client, ws + "-copy", "exported", "1.0.0")
    assert yaml.safe_load(again)["agents"] == yaml.safe_load(text)["agents"]


def test_an_agent_referring_to_something_unrepresentable_refuses_the_export() -> None:
    now = datetime.now(UTC)
    agent = Agent(
        id="agt_1",
        revision=1,
        created_at=now,
        updated_at=now,
        name="Lonely",
        description="",
        instructions="",
        model="gpt-5",
        mcp_instance_ids=["mci_gone"],
        skill_ids=[],
        archived=False,
    )
    with pytest.raises(ExportRefused) as refused:
        build_document("x", "0.0.0", {kinds.AGENTS.path: [agent]})
    assert "Lonely" in refused.value.entity
    assert "mci_gone" in refused.value.message
