"""The platform services' own rules: MCP specs and instances, skills, agents, channels, triggers,
policies, and what refers to what."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from platform_builders import (
    SKILL_MD,
    agent,
    assert_in_use,
    command_server,
    create,
    instance,
    secret,
    url_server,
)
from pydantic import SecretStr

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Conflict, Refused, Unavailable
from bundle_operator.platform.models import (
    AgentUpdate,
    ChannelCreate,
    ChannelUpdate,
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServerCreate,
    McpServerUpdate,
    PolicyCreate,
    PolicyUpdate,
    SecretRef,
    SkillCreate,
    SkillUpdate,
    TriggerCreate,
    TriggerUpdate,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CONTEXT_KEY = "c" * 48


# --- MCP server specs ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["npx", "uvx", "uv", "python", "python3", "node", "bunx", "deno"])
async def test_the_eight_runtimes_are_accepted(client: PlatformClient, ws: str, command: str) -> None:
    request_body = McpServerCreate(name="s", type="command", command=command)
    spec = await create(client, ws, kinds.MCP_SERVERS, request_body)
    assert spec.command == command


@pytest.mark.parametrize("command", ["bash", "./run.sh", "/usr/bin/node", "${CLAUDE_PLUGIN_ROOT}/server"])
async def test_other_commands_are_refused(client: PlatformClient, ws: str, command: str) -> None:
    with pytest.raises(Refused) as refused:
        request_body = McpServerCreate(name="s", type="command", command=command)
        await create(client, ws, kinds.MCP_SERVERS, request_body)
    assert refused.value.code == "unsupported_runtime"
    assert refused.value.errors[0].field == "command"


async def test_env_schema_secrecy_follows_the_declared_type(client: PlatformClient, ws: str) -> None:
    body = McpServerCreate.model_validate(
        {
            "name": "s",
            "type": "command",
            "command": "uvx",
            "env_schema": [
                {"name": "API_TOKEN", "type": "string"},  # looks secret, declared plain
                {"name": "DSN", "type": "secret"},  # looks plain, declared secret
                {"name": "PASSWORD"},  # nothing declared: the name decides
                {"name": "REGION"},
            ],
        }
    )
    spec = await create(client, ws, kinds.MCP_SERVERS, body)
    assert {f.name: f.secret for f in spec.env_schema} == {
        "API_TOKEN": False,
        "DSN": True,
        "PASSWORD": True,
        "REGION": False,
    }


async def test_a_spec_must_fit_its_type(client: PlatformClient, ws: str) -> None:
    cases = [
        ({"name": "s", "type": "docker"}, "image"),
        ({"name": "s", "type": "url"}, "endpoint_url"),
        ({"name": "s", "type": "url", "endpoint_url": "ftp://x"}, "endpoint_url"),
        ({"name": "s", "type": "command", "command": "npx", "image": "x"}, "image"),
        (
            {"name": "s", "type": "url", "endpoint_url": "https://x", "env_schema": [{"name": "A"}]},
            "env_schema",
        ),
        (
            {"name": "s", "type": "command", "command": "npx", "env_schema": [{"name": "A"}, {"name": "A"}]},
            "env_schema.1.name",
        ),
        (
            {
                "name": "s",
                "type": "command",
                "command": "npx",
                "env_schema": [{"name": "A", "type": "string", "secret": True}],
            },
            "env_schema.0.secret",
        ),
    ]
    for fields, field in cases:
        with pytest.raises(Refused) as refused:
            await create(client, ws, kinds.MCP_SERVERS, McpServerCreate.model_validate(fields))
        assert refused.value.errors[0].field == field, fields


async def test_a_spec_update_is_validated_like_a_create(client: PlatformClient, ws: str) -> None:
    spec = await command_server(client, ws)
    changed = await client.update(
        ws, kinds.MCP_SERVERS, spec.id, McpServerUpdate(args=["-y", "other"]), revision=1
    )
    assert changed.args == ["-y", "other"] and changed.command == "npx"
    with pytest.raises(Refused):
        await client.update(ws, kinds.MCP_SERVERS, spec.id, McpServerUpdate(command="sh"), revision=2)


# --- MCP instances ------------------------------------------------------------------------------


async def test_instance_secret_inputs_go_by_reference(client: PlatformClient, ws: str) -> None:
    spec = await command_server(client, ws)
    with pytest.raises(Refused) as plain:
        request_body = McpInstanceCreate(
            server_id=spec.id, name="gh", env={"GITHUB_TOKEN": "ghp_plaintext_value"}
        )
        await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert plain.value.code == "secret_required"
    assert plain.value.errors[0].field == "env.GITHUB_TOKEN"
    assert "ghp_plaintext_value" not in str(plain.value)

    stored = await secret(client, ws)
    request_body = McpInstanceCreate(
        server_id=spec.id,
        name="gh",
        env={"GITHUB_TOKEN": SecretRef(secret_id=stored.id), "GITHUB_ORG": "acme"},
    )
    made = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert made.env == {"GITHUB_TOKEN": SecretRef(secret_id=stored.id), "GITHUB_ORG": "acme"}
    assert made.context_signing is False


async def test_instance_values_must_be_declared_and_required_ones_given(
    client: PlatformClient, ws: str
) -> None:
    spec = await command_server(client, ws)
    with pytest.raises(Refused) as missing:
        await create(client, ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=spec.id, name="gh"))
    assert missing.value.errors[0].field == "env.GITHUB_TOKEN"
    with pytest.raises(Refused) as unknown:
        request_body = McpInstanceCreate(server_id=spec.id, name="gh", env={"OTHER": "x"})
        await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert unknown.value.errors[0].field == "env.OTHER"
    with pytest.raises(Refused) as dangling:
        request_body = McpInstanceCreate(
            server_id=spec.id, name="gh", env={"GITHUB_TOKEN": SecretRef(secret_id="sec_nope")}
        )
        await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert dangling.value.code == "unknown_reference"


async def test_a_context_secret_is_stored_and_shows_as_signing(client: PlatformClient, ws: str) -> None:
    spec = await url_server(client, ws)
    request_body = McpInstanceCreate(server_id=spec.id, name="w", context_secret=SecretStr(CONTEXT_KEY))
    made = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert made.context_signing is True
    assert made.context_secret_id is not None
    raw = await client.request("GET", f"/v1/workspaces/{ws}/mcp-instances/{made.id}", safe=True)
    assert CONTEXT_KEY not in raw.text
    # The stored secret belongs to the instance: it is listed, held, and goes with the instance.
    await assert_in_use(client, ws, kinds.SECRETS, made.context_secret_id, [made.id])
    await client.delete(ws, kinds.MCP_INSTANCES, made.id)
    assert await client.list_all(ws, kinds.SECRETS) == []


async def test_context_secrets_are_refused_off_url_servers_and_outside_the_length(
    client: PlatformClient, ws: str
) -> None:
    command = await command_server(client, ws)
    stored = await secret(client, ws)
    with pytest.raises(Refused) as not_url:
        request_body = McpInstanceCreate(
            server_id=command.id,
            name="gh",
            env={"GITHUB_TOKEN": SecretRef(secret_id=stored.id)},
            context_secret=SecretStr(CONTEXT_KEY),
        )
        await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert not_url.value.code == "context_secret_refused"
    assert not_url.value.errors[0].field == "context_secret"

    spec = await url_server(client, ws)
    short = await secret(client, ws, value="too-short")
    with pytest.raises(Refused) as too_short:
        request_body = McpInstanceCreate(server_id=spec.id, name="w", context_secret_id=short.id)
        await create(client, ws, kinds.MCP_INSTANCES, request_body)
    assert too_short.value.errors[0].field == "context_secret_id"
    assert "too-short" not in str(too_short.value)


async def test_turning_context_signing_off_drops_the_stored_key(client: PlatformClient, ws: str) -> None:
    spec = await url_server(client, ws)
    request_body = McpInstanceCreate(server_id=spec.id, name="w", context_secret=SecretStr(CONTEXT_KEY))
    made = await create(client, ws, kinds.MCP_INSTANCES, request_body)
    off = await client.update(
        ws, kinds.MCP_INSTANCES, made.id, McpInstanceUpdate(context_secret_id=None), revision=1
    )
    assert off.context_signing is False
    assert await client.list_all(ws, kinds.SECRETS) == []


async def test_specs_and_instances_in_use_cannot_be_deleted(client: PlatformClient, ws: str) -> None:
    spec = await command_server(client, ws)
    inst = await instance(client, ws, spec)
    bot = await agent(client, ws, mcp_instance_ids=[inst.id])
    await assert_in_use(client, ws, kinds.MCP_SERVERS, spec.id, [inst.id])
    await assert_in_use(client, ws, kinds.MCP_INSTANCES, inst.id, [bot.id])
    await client.delete(ws, kinds.AGENTS, bot.id)
    await client.delete(ws, kinds.MCP_INSTANCES, inst.id)
    await client.delete(ws, kinds.MCP_SERVERS, spec.id)


# --- skills -------------------------------------------------------------------------------------


async def test_inline_skills_take_their_name_from_skill_md(client: PlatformClient, ws: str) -> None:
    skill = await create(client, ws, kinds.SKILLS, SkillCreate(source_type="inline", content=SKILL_MD))
    assert (skill.name, skill.description) == ("triage", "Sort incoming issues by area and urgency.")
    assert skill.id.startswith("skl_")


async def test_bad_front_matter_is_refused_naming_the_line(client: PlatformClient, ws: str) -> None:
    content = "---\nname: triage\ndescription: Sort issues: by area\n---\nbody\n"
    with pytest.raises(Refused) as refused:
        await create(client, ws, kinds.SKILLS, SkillCreate(source_type="inline", content=content))
    assert refused.value.code == "invalid_skill_md"
    assert refused.value.errors[0].field == "content"
    assert refused.value.errors[0].line == 3


async def test_github_skills_are_fetched_from_the_configured_base(
    client: PlatformClient, ws: str, github: object
) -> None:
    files = github.files  # type: ignore[attr-defined]
    files["/acme/skills/main/triage/SKILL.md"] = SKILL_MD
    source = "https://github.com/acme/skills/tree/main/triage"
    skill = await create(client, ws, kinds.SKILLS, SkillCreate(source_type="github", source_url=source))
    assert (skill.name, skill.source_url, skill.content) == ("triage", source, SKILL_MD)

    files["/acme/skills/main/triage/SKILL.md"] = SKILL_MD.replace("name: triage", "name: triage-v2")
    refetched = await client.update(ws, kinds.SKILLS, skill.id, SkillUpdate(source_url=source), revision=1)
    assert refetched.name == "triage-v2"


async def test_github_skill_failures_are_told_apart(client: PlatformClient, ws: str, github: object) -> None:
    with pytest.raises(Refused) as missing:
        request_body = SkillCreate(
            source_type="github", source_url="https://github.com/acme/none/tree/main/x"
        )
        await create(client, ws, kinds.SKILLS, request_body)
    assert missing.value.code == "skill_source_not_found"
    with pytest.raises(Refused) as not_github:
        request_body = SkillCreate(source_type="github", source_url="https://gitlab.com/acme/x")
        await create(client, ws, kinds.SKILLS, request_body)
    assert not_github.value.errors[0].field == "source_url"
    github.fail_with = 500  # type: ignore[attr-defined]
    try:
        with pytest.raises(Unavailable) as down:
            request_body = SkillCreate(
                source_type="github", source_url="https://github.com/acme/skills/tree/main/triage"
            )
            await create(client, ws, kinds.SKILLS, request_body)
    finally:
        github.fail_with = None  # type: ignore[attr-defined]
    assert down.value.status == 502 and down.value.code == "skill_fetch_failed"


# --- agents, channels, triggers, policies -------------------------------------------------------


async def test_agents_can_be_archived_and_take_nothing_new_then(client: PlatformClient, ws: str) -> None:
    bot = await agent(client, ws)
    archived = await client.update(ws, kinds.AGENTS, bot.id, AgentUpdate(archived=True), revision=1)
    assert archived.archived is True
    with pytest.raises(Refused) as refused:
        await create(client, ws, kinds.POLICIES, PolicyCreate(type="spend_cap", agent_id=bot.id))
    assert refused.value.code == "agent_archived"


async def test_a_new_cron_trigger_is_scheduled_until_disabled(client: PlatformClient, ws: str) -> None:
    bot = await agent(client, ws)
    request_body = TriggerCreate(
        name="triage-kit:nightly",
        type="cron",
        agent_id=bot.id,
        schedule="30 2 * * 1-5",
        timezone="Europe/Berlin",
    )
    trigger = await create(client, ws, kinds.TRIGGERS, request_body)
    assert trigger.enabled is True
    assert trigger.next_run_at is not None and trigger.next_run_at > datetime.now(UTC)
    local = trigger.next_run_at.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute) == (2, 30) and local.isoweekday() <= 5

    disabled = await client.update(ws, kinds.TRIGGERS, trigger.id, TriggerUpdate(enabled=False), revision=1)
    assert disabled.enabled is False and disabled.next_run_at is None
    by_name = await client.list_all(ws, kinds.TRIGGERS, filters={"name": "triage-kit:nightly"})
    assert [t.id for t in by_name] == [trigger.id]


async def test_trigger_create_has_no_enabled_field(client: PlatformClient, ws: str) -> None:
    bot = await agent(client, ws)
    body = (
        f'{{"name": "t", "type": "cron", "agent_id": "{bot.id}", "schedule": "* * * * *", "enabled": false}}'
    )
    with pytest.raises(Refused) as refused:
        await client.request("POST", f"/v1/workspaces/{ws}/triggers", body=body.encode(), safe=True)
    assert refused.value.errors[0].field == "enabled"


@pytest.mark.parametrize(
    ("schedule", "timezone", "field"),
    [
        ("* * * *", "UTC", "schedule"),
        ("61 * * * *", "UTC", "schedule"),
        ("0 0 30 2 *", "UTC", "schedule"),  # 30 February never comes
        ("*/0 * * * *", "UTC", "schedule"),
        ("0 9 * * *", "Mars/Olympus", "timezone"),
    ],
)
async def test_schedules_and_time_zones_are_validated(
    client: PlatformClient, ws: str, schedule: str, timezone: str, field: str
) -> None:
    bot = await agent(client, ws)
    with pytest.raises(Refused) as refused:
        request_body = TriggerCreate(
            name="t", type="cron", agent_id=bot.id, schedule=schedule, timezone=timezone
        )
        await create(client, ws, kinds.TRIGGERS, request_body)
    assert refused.value.errors[0].field == field


async def test_a_channel_keeps_its_bot_token_in_the_secret_store(client: PlatformClient, ws: str) -> None:
    bot = await agent(client, ws)
    token = "123456:AAExampleOnlyToken_abc"
    request_body = ChannelCreate(type="telegram", name="support", agent_id=bot.id, bot_token=SecretStr(token))
    channel = await create(client, ws, kinds.CHANNELS, request_body)
    assert channel.enabled is False
    assert channel.bot_token_secret_id.startswith("sec_")
    for path in (f"channels/{channel.id}", "channels", "secrets"):
        assert token not in (await client.request("GET", f"/v1/workspaces/{ws}/{path}", safe=True)).text
    with pytest.raises(Conflict):
        await client.delete(ws, kinds.AGENTS, bot.id)
    enabled = await client.update(ws, kinds.CHANNELS, channel.id, ChannelUpdate(enabled=True), revision=1)
    assert enabled.enabled is True
    await client.delete(ws, kinds.CHANNELS, channel.id)
    assert await client.list_all(ws, kinds.SECRETS) == []


async def test_a_malformed_bot_token_is_refused_without_echoing_it(client: PlatformClient, ws: str) -> None:
    bot = await agent(client, ws)
    with pytest.raises(Refused) as refused:
        request_body = ChannelCreate(
            type="telegram", agent_id=bot.id, bot_token=SecretStr("not a token at all")
        )
        await create(client, ws, kinds.CHANNELS, request_body)
    assert refused.value.errors[0].field == "bot_token"
    assert "not a token at all" not in str(refused.value)


async def test_policies_bind_to_agents(client: PlatformClient, ws: str) -> None:
    bot = await agent(client, ws)
    request_body = PolicyCreate(type="answer_check", agent_id=bot.id, config={"rubric": "cite sources"})
    policy = await create(client, ws, kinds.POLICIES, request_body)
    changed = await client.update(
        ws, kinds.POLICIES, policy.id, PolicyUpdate(config={"rubric": "be brief"}), revision=1
    )
    assert changed.config == {"rubric": "be brief"} and changed.type == "answer_check"
    assert [p.id for p in await client.list_all(ws, kinds.POLICIES, filters={"agent_id": bot.id})] == [
        policy.id
    ]
    await assert_in_use(client, ws, kinds.AGENTS, bot.id, [policy.id])
