"""What the platform offers an agent: the model catalog, and MCP instances as the tools."""

from __future__ import annotations

import pytest
from platform_builders import instance, url_server

from bundle_operator.platform import kinds
from bundle_operator.platform.catalog import ModelInfo
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Refused
from bundle_operator.platform.models import Page

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_the_model_catalog_lists_the_default_and_the_known_models(
    client: PlatformClient, ws: str
) -> None:
    models = await client.list_models(ws)
    ids = [m.id for m in models]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {"default", "gpt-4.1", "gpt-5"} <= set(ids)
    assert [m.id for m in models if m.default] == ["default"]


async def test_the_model_catalog_pages_and_checks_its_parameters(client: PlatformClient, ws: str) -> None:
    path = f"/v1/workspaces/{ws}/models"
    first = Page[ModelInfo].model_validate(
        (await client.request("GET", path, params={"limit": "2"}, safe=True)).json()
    )
    assert len(first.items) == 2 and first.next_cursor is not None
    rest = Page[ModelInfo].model_validate(
        (await client.request("GET", path, params={"cursor": first.next_cursor}, safe=True)).json()
    )
    assert [m.id for m in first.items + rest.items] == [m.id for m in await client.list_models(ws)]
    with pytest.raises(Refused):
        await client.request("GET", path, params={"limit": "0"}, safe=True)


async def test_the_tools_an_agent_can_use_are_the_workspaces_mcp_instances_by_name(
    client: PlatformClient, ws: str
) -> None:
    server = await url_server(client, ws, "weather")
    made = await instance(client, ws, server, "weather-eu")
    found = await client.list_all(ws, kinds.MCP_INSTANCES, filters={"name": "weather-eu"})
    assert [i.id for i in found] == [made.id]
    assert await client.list_all(ws, kinds.MCP_INSTANCES, filters={"name": "nothing"}) == []
