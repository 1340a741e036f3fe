"""Requirements as seed 004 has them: block, strip and substitute, for models, tools and
knowledge sources, offline and against the reference platform's catalog."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bundle_operator.engine.analyze import analyze_offline
from bundle_operator.engine.apply import Blocked
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from tests.documents import bundle_document
from tests.integration.engine.harness import install, parse, workspace_state
from tests.integration.platform.platform_builders import instance, url_server

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DOC: dict[str, Any] = bundle_document(
    "req-kit",
    mcps=[
        {"key": "docs", "name": "Docs", "type": "url", "endpoint_url": "https://docs.example.com/mcp"},
        {"key": "search", "name": "Search", "type": "url", "endpoint_url": "https://search.example.com/mcp"},
    ],
    agents=[{"key": "bot", "name": "Req Bot", "model": "gpt-4.1", "mcps": ["docs", "search"]}],
    gateway={"members": ["docs", "search"]},
)


def with_requires(*requires: dict[str, str]) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["requires"] = list(requires)
    return doc


def codes(issues: Any, severity: str | None = None) -> list[str]:
    return [str(i.code) for i in issues if severity is None or i.severity == severity]


def fresh(ws: str) -> Record:
    return Record(installation="test/inst", workspace=ws)


async def agent_of(client: PlatformClient, ws: str) -> Any:
    agents = await client.list_all(ws, kinds.AGENTS)
    assert len(agents) == 1
    return agents[0]


# --- substitute -------------------------------------------------------------------------------


def test_offline_analyze_blocks_a_substitute_requirement_without_a_mapping() -> None:
    parsed = parse(with_requires({"kind": "model", "ref": "gpt-4.1", "policy": "substitute"}))
    preview = analyze_offline(parsed, {})
    assert preview.blocking
    assert codes(preview.issues, "blocking") == ["substitution_required"]
    assert preview.issues[0].path == "/requires/0"
    mapped = analyze_offline(parsed, {}, {"model:gpt-4.1": "gpt-5"})
    assert not mapped.blocking
    assert codes(mapped.issues) == ["requirement_not_checked"]


def test_a_substitution_that_maps_no_requirement_is_reported() -> None:
    parsed = parse(with_requires({"kind": "model", "ref": "gpt-4.1", "policy": "block"}))
    preview = analyze_offline(parsed, {}, {"tool:nothing": "x", "model:gpt-4.1": "gpt-5"})
    unused = [i for i in preview.issues if i.code == "substitution_unused"]
    assert [(i.severity, i.entity) for i in unused] == [("warning", "substitution:tool:nothing")]


def test_a_knowledge_source_mapping_must_keep_its_type_and_name_an_address() -> None:
    parsed = parse(with_requires({"kind": "knowledge_source", "ref": "s3:acme-docs", "policy": "substitute"}))
    assert not analyze_offline(parsed, {}, {"knowledge_source:s3:acme-docs": "s3:our-docs"}).blocking
    for bad in ("sftp:our-host", "s3:", "our-docs"):
        preview = analyze_offline(parsed, {}, {"knowledge_source:s3:acme-docs": bad})
        assert codes(preview.issues, "blocking") == ["substitution_invalid"], bad


async def test_a_model_substitution_must_name_a_model_the_platform_offers(
    client: PlatformClient, ws: str
) -> None:
    parsed = parse(with_requires({"kind": "model", "ref": "gpt-4.1", "policy": "substitute"}))
    options = Options(substitutions={"model:gpt-4.1": "no-such-model"})
    planned = await plan(client, ws, parsed, {}, fresh(ws), options)
    assert codes(planned.preview.issues, "blocking") == ["substitution_invalid"]
    assert "no-such-model" in planned.preview.issues[0].message
    ok = await plan(client, ws, parsed, {}, fresh(ws), Options(substitutions={"model:gpt-4.1": "gpt-5"}))
    assert not ok.preview.blocking


async def test_a_tool_substitution_wires_the_agent_and_gateway_to_the_platforms_instance(
    client: PlatformClient, ws: str
) -> None:
    server = await url_server(client, ws, "their-search")
    theirs = await instance(client, ws, server, "their-search")
    parsed = parse(with_requires({"kind": "tool", "ref": "search", "policy": "substitute"}))
    options = Options(substitutions={"tool:search": "their-search"})
    planned = await plan(client, ws, parsed, {}, fresh(ws), options)
    assert not planned.preview.blocking, [i.to_json() for i in planned.preview.issues]
    replaced = next(e for e in planned.preview.entities if e.entity == "mcp:search")
    assert replaced.action == "SKIPPED" and "their-search" not in (replaced.reason or "")
    assert theirs.id in (replaced.reason or "")
    result, record = await install(client, ws, parsed, {}, options=options)
    assert "mcp:search" not in result.created
    docs = record.find("mcp:docs")
    assert docs is not None
    agent = await agent_of(client, ws)
    assert agent.mcp_instance_ids == [docs.primary_id, theirs.id]
    gateway = record.find("gateway:gateway")
    assert gateway is not None and gateway.primary_id is not None
    members = await client.list_members(ws, gateway.primary_id)
    assert [(m.name, m.mcp_instance_id) for m in members] == [
        ("docs", docs.primary_id),
        ("search", theirs.id),
    ]
    # The same install again changes nothing, and the platform's instance is never the bundle's.
    again, _ = await install(client, ws, parsed, {}, record, options)
    assert again.created == [] and again.updated == []
    assert record.find("mcp:search") is None


async def test_a_tool_substitution_to_another_mcp_of_the_bundle_takes_effect(
    client: PlatformClient, ws: str
) -> None:
    parsed = parse(with_requires({"kind": "tool", "ref": "search", "policy": "substitute"}))
    options = Options(substitutions={"tool:search": "docs"})
    result, record = await install(client, ws, parsed, {}, options=options)
    assert sorted(result.created) == ["agent:bot", "gateway:gateway", "mcp:docs"]
    docs = record.find("mcp:docs")
    assert docs is not None
    assert (await agent_of(client, ws)).mcp_instance_ids == [docs.primary_id, docs.primary_id]


async def test_a_tool_substitution_that_cannot_take_effect_is_refused(
    client: PlatformClient, ws: str
) -> None:
    parsed = parse(with_requires({"kind": "tool", "ref": "search", "policy": "substitute"}))
    before = await workspace_state(client, ws)
    with pytest.raises(Blocked) as blocked:
        await install(client, ws, parsed, {}, options=Options(substitutions={"tool:search": "nowhere"}))
    issues = blocked.value.preview.issues
    assert codes(issues, "blocking") == ["substitution_invalid"]
    assert "nowhere" in issues[0].message and issues[0].path == "/requires/0"
    assert await workspace_state(client, ws) == before
    server = await url_server(client, ws, "twin")
    await instance(client, ws, server, "twin")
    await instance(client, ws, server, "twin")
    planned = await plan(client, ws, parsed, {}, fresh(ws), Options(substitutions={"tool:search": "twin"}))
    assert codes(planned.preview.issues, "blocking") == ["substitution_invalid"]
    assert "several" in planned.preview.issues[0].message


# --- block ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requirement",
    [
        {"kind": "model", "ref": "no-such-model", "policy": "block"},
        {"kind": "tool", "ref": "not-installed", "policy": "block"},
        {"kind": "knowledge_source", "ref": "s3:acme-docs", "policy": "block"},
    ],
    ids=lambda r: r["kind"],
)
async def test_block_blocks_for_every_kind_the_platform_lacks(
    client: PlatformClient, ws: str, requirement: dict[str, str]
) -> None:
    parsed = parse(with_requires(requirement))
    before = await workspace_state(client, ws)
    with pytest.raises(Blocked) as blocked:
        await install(client, ws, parsed, {})
    issues = blocked.value.preview.issues
    assert codes(issues, "blocking") == ["requirement_missing"]
    assert issues[0].path == "/requires/0" and issues[0].line is not None
    assert await workspace_state(client, ws) == before


async def test_block_passes_when_the_platform_has_it(client: PlatformClient, ws: str) -> None:
    server = await url_server(client, ws, "shared-tool")
    await instance(client, ws, server, "shared-tool")
    parsed = parse(
        with_requires(
            {"kind": "model", "ref": "gpt-4.1", "policy": "block"},
            {"kind": "tool", "ref": "shared-tool", "policy": "block"},
            {"kind": "tool", "ref": "docs", "policy": "block"},  # the bundle brings it
        )
    )
    planned = await plan(client, ws, parsed, {}, fresh(ws))
    assert codes(planned.preview.issues) == []


async def test_a_tool_the_bundle_brings_but_skips_is_missing_even_when_a_namesake_exists(
    client: PlatformClient, ws: str
) -> None:
    doc = with_requires({"kind": "tool", "ref": "local", "policy": "block"})
    doc["mcps"].append({"key": "local", "name": "Local", "type": "command", "command": "./server"})
    server = await url_server(client, ws, "local")
    await instance(client, ws, server, "local")  # someone else's: never used by name
    planned = await plan(client, ws, parse(doc), {}, fresh(ws))
    assert "requirement_missing" in codes(planned.preview.issues, "blocking")


# --- strip ------------------------------------------------------------------------------------


async def test_strip_drops_a_missing_model_and_the_agent_runs_on_the_default(
    client: PlatformClient, ws: str
) -> None:
    doc = with_requires({"kind": "model", "ref": "house-model", "policy": "strip"})
    doc["agents"][0]["model"] = "house-model"
    result, _ = await install(client, ws, parse(doc), {})
    stripped = [i for i in result.preview.issues if i.code == "requirement_stripped"]
    assert len(stripped) == 1 and stripped[0].severity == "warning"
    assert "agent:bot" in stripped[0].message
    assert (await agent_of(client, ws)).model == "default"


async def test_strip_of_a_missing_knowledge_source_warns(client: PlatformClient, ws: str) -> None:
    parsed = parse(with_requires({"kind": "knowledge_source", "ref": "s3:acme-docs", "policy": "strip"}))
    result, _ = await install(client, ws, parsed, {})
    assert codes(result.preview.issues) == ["requirement_stripped"]
    assert result.preview.blocking is False
