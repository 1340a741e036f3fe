"""The gateway bundle: members in order, curation, own prompts and resources; update and uninstall."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest
import yaml

from bundle_operator.document.issues import Code
from bundle_operator.engine.drift import drift
from bundle_operator.engine.kinds.gateway import shadowed_tool_issues
from bundle_operator.engine.live import read_snapshot
from bundle_operator.engine.uninstall import uninstall
from bundle_operator.k8s.endpoint.status import ready_conditions, served_view
from bundle_operator.k8s.resources import EndpointSpec
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import GatewayToolCuration
from tests.documents import bundle_document
from tests.integration.engine.harness import ROOT, Store, example, install, parse, workspace_state
from tests.mcp_members import running_members

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def gateway_doc() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "gateway-curated.yaml").read_text())
    return data


async def test_gateway_example_installs_reuses_updates_and_uninstalls(
    client: PlatformClient, ws: str
) -> None:
    before = await workspace_state(client, ws)
    parsed, setup = example("gateway-curated")
    result, record = await install(client, ws, parsed, setup)
    assert sorted(result.created) == ["gateway:gateway", "mcp:notes", "mcp:weather"]
    bundle_id = record.find("gateway:gateway").primary_id  # type: ignore[union-attr]
    assert bundle_id is not None
    members = await client.list_members(ws, bundle_id)
    assert [m.name for m in members] == ["weather", "notes"]
    tools = {t.id: t for t in await client.list_tools(ws, bundle_id)}
    assert tools["weather__forecast"].presented_name == "get_forecast"
    assert tools["weather__radar_raw"].enabled is False
    prompts = await client.list_prompts(ws, bundle_id)
    assert [p.name for p in prompts] == ["plan_day"]
    resources = await client.list_resources(ws, bundle_id)
    assert [r.name for r in resources] == ["guides/planning-style"]
    notes = next(i for i in await client.list_all(ws, kinds.MCP_INSTANCES) if i.name == "Notes")
    assert notes.context_signing is True

    again, _ = await install(client, ws, parsed, setup, record)
    assert again.created == [] and again.updated == []
    assert not (await drift(client, ws, record)).drifted

    changed = gateway_doc()
    changed["gateway"]["tools"][0]["override_name"] = "forecast_7d"
    changed["gateway"]["members"] = ["notes", "weather"]
    changed["gateway"]["resources"][0]["content"] += "\n- Evenings are free.\n"
    updated, _ = await install(client, ws, parse(changed), setup, record)
    assert updated.updated == ["gateway:gateway"]
    assert [m.name for m in await client.list_members(ws, bundle_id)] == ["notes", "weather"]
    tools = {t.id: t for t in await client.list_tools(ws, bundle_id)}
    assert tools["weather__forecast"].presented_name == "forecast_7d"
    resource = (await client.list_resources(ws, bundle_id))[0]
    assert resource.content.endswith("Evenings are free.\n")

    result_uninstall = await uninstall(client, ws, record, Store(record).persist)
    assert result_uninstall.complete and result_uninstall.kept == {}
    assert await workspace_state(client, ws) == before


async def test_gateway_curation_edited_on_the_platform_is_drift_and_survives_an_update(
    client: PlatformClient, ws: str
) -> None:
    parsed, setup = example("gateway-curated")
    _, record = await install(client, ws, parsed, setup)
    bundle_id = record.find("gateway:gateway").primary_id  # type: ignore[union-attr]
    assert bundle_id is not None
    await client.put_tool(ws, bundle_id, "notes__delete_note", GatewayToolCuration(enabled=False))
    report = await drift(client, ws, record)
    assert report.changed == {
        "gateway:gateway": [
            "/tools/notes__delete_note/enabled",
            "/tools/notes__delete_note/override_annotations",
            "/tools/notes__delete_note/override_title",
        ]
    }
    changed = copy.deepcopy(gateway_doc())
    changed["gateway"]["description"] = "New description for the model"
    result, _ = await install(client, ws, parse(changed), setup, record)
    assert result.updated == ["gateway:gateway"]
    tools = {t.id: t for t in await client.list_tools(ws, bundle_id)}
    assert tools["notes__delete_note"].enabled is False  # the local edit survived
    bundle = await client.get(ws, kinds.GATEWAY_BUNDLES, bundle_id)
    assert bundle.description == "New description for the model"


async def test_tools_discovery_adds_are_not_drift(client: PlatformClient, ws: str) -> None:
    from bundle_operator.platform.models import Catalog, CatalogTool, McpServerUpdate

    parsed, setup = example("gateway-curated")
    _, record = await install(client, ws, parsed, setup)
    weather = record.find("mcp:weather")
    assert weather is not None
    server_id = next(p.id for p in weather.parts if p.role == "server")
    server = await client.get(ws, kinds.MCP_SERVERS, server_id)
    catalog = Catalog(tools=[CatalogTool(name="forecast"), CatalogTool(name="current_conditions")])
    await client.update(
        ws, kinds.MCP_SERVERS, server_id, McpServerUpdate(catalog=catalog), revision=server.revision
    )
    assert not (await drift(client, ws, record)).drifted
    result = await uninstall(client, ws, record, Store(record).persist)
    assert result.kept == {} and result.complete


async def test_a_gateway_name_another_bundle_holds_blocks_the_plan_and_nothing_is_written(
    client: PlatformClient, ws: str
) -> None:
    from bundle_operator.engine.apply import Blocked
    from bundle_operator.engine.plan import plan
    from bundle_operator.engine.record import Record
    from bundle_operator.platform.models import GatewayBundleCreate

    taken = await client.create(
        ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name="planning-assistant"), idempotency_key=f"gw-{ws}"
    )
    before = await workspace_state(client, ws)
    parsed, setup = example("gateway-curated")
    record = Record(installation="test/inst", workspace=ws)
    planned = await plan(client, ws, parsed, setup, record)
    blocking = [i for i in planned.preview.issues if i.blocking]
    assert [(i.code, i.path, i.entity) for i in blocking] == [("name_taken", "/name", "gateway:gateway")]
    assert "planning-assistant" in blocking[0].message and taken.id in blocking[0].message
    with pytest.raises(Blocked, match="name_taken"):
        await install(client, ws, parsed, setup, record)
    assert await workspace_state(client, ws) == before  # nothing was written
    assert record.entities == [] and record.journal == []

    # Once that bundle is gone, the same plan is ready.
    await client.delete(ws, kinds.GATEWAY_BUNDLES, taken.id)
    planned = await plan(client, ws, parsed, setup, record)
    assert not planned.preview.blocking


async def test_an_override_that_discovery_finds_holding_a_member_tools_name_is_reported(
    client: PlatformClient, ws: str
) -> None:
    """Issue 42: the override keeps the name (seed 002); the tool it hides is reported where users look."""
    async with running_members() as members:
        document = bundle_document(
            "shadowing",
            mcps=[
                {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": members.url("weather")},
                {"key": "notes", "name": "Notes", "type": "url", "endpoint_url": members.url("notes")},
            ],
            gateway={
                "members": ["weather", "notes"],
                "tools": [{"member": "notes", "tool": "add_note", "override_name": "weather__storm"}],
            },
        )
        parsed = parse(document)
        _, record = await install(client, ws, parsed, {})
        bundle_id = record.find("gateway:gateway").primary_id  # type: ignore[union-attr]
        assert bundle_id is not None
        await members.add_tool("weather", "storm", "Storm warnings")
        deadline = time.monotonic() + 15
        while not {"weather__storm", "notes__add_note"} <= {
            t.id for t in await client.list_tools(ws, bundle_id) if not t.stale
        }:
            assert time.monotonic() < deadline, "discovery did not find the new tool"
            await asyncio.sleep(0.1)

        # The tool list says why the member's tool is not served, and what to do.
        tools = await client.list_tools(ws, bundle_id)
        storm = next(t for t in tools if t.id == "weather__storm")
        assert (storm.served, storm.shadowed_by) == (False, "notes__add_note")
        assert storm.withheld_reason is not None and "override_name holds its name" in storm.withheld_reason

        # The installation's status: a warning at the override, and no drift.
        snapshot = await read_snapshot(client, ws, record)
        [issue] = shadowed_tool_issues(parsed.bundle, snapshot)  # type: ignore[arg-type]
        assert (issue.severity, issue.code) == ("warning", Code.GATEWAY_TOOL_SHADOWED)
        assert issue.path == "/gateway/tools/0/override_name" and issue.entity == "gateway:gateway"
        assert "weather__storm is not served" in issue.message and "notes__add_note" in issue.message
        assert not (await drift(client, ws, record)).drifted

        # The Endpoint's status lists it beside the served tools, and Ready points there.
        view = served_view(None, tools, await client.list_members(ws, bundle_id))
        assert "weather__storm" in view["presentedTools"]  # the holder's name
        assert [w["name"] for w in view["withheldTools"]] == ["weather__storm"]
        assert "notes__add_note" in view["withheldTools"][0]["reason"]
        spec = EndpointSpec.model_validate({"installationRef": {"name": "shadowing"}})
        ready = next(c for c in ready_conditions(spec, view) if c.type == "Ready")
        assert "1 tools are not served (see status.withheldTools)" in ready.message
