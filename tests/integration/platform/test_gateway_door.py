"""DNS-rebinding protection at the endpoint routes (DESIGN.md §9.6 "Origin and Host").

A page of another site that reaches the platform through a rebound name sends that name as Host
and its origin as Origin: both are refused with 403 before anything reaches a member.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess, start_platform

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import EndpointUpdate

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.integration.platform.test_gateway_mcp import assistant, endpoint
from tests.mcp_members import Members

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {
        "name": "get_forecast",
        "arguments": {"city": "Oslo"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}


@pytest.fixture(scope="module")
def door_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    """A platform with no public URL (the bound address is it) and one more Host it is reached by."""
    db = tmp_path_factory.mktemp("door") / "platform.db"
    running = start_platform(db, "--token", TOKEN, "--allowed-host", "gw.internal")
    yield running
    running.stop()


@pytest.fixture
async def api(door_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(door_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


async def call(url: str, api_key: str, **headers: str) -> httpx.Response:
    """The modern ``tools/call`` of get_forecast with a valid key and ``headers`` on top."""
    sent = {
        "Authorization": f"Bearer {api_key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_forecast",
    }
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, json=CALL, headers=sent | headers)


def problem(response: httpx.Response) -> Any:
    assert response.headers["Content-Type"].startswith("application/problem+json"), response.text
    return response.json()["code"]


async def test_a_foreign_host_or_origin_is_refused_and_nothing_reaches_the_member(
    api: PlatformClient, members: Members
) -> None:
    ws = f"door-{key()[:8]}"
    bundle_id = await assistant(api, ws, members)
    endpoint_id, url, api_key = await endpoint(api, ws, bundle_id)
    public_origin = str(httpx.URL(url).copy_with(path="/"))[:-1]

    assert (await call(url, api_key)).status_code == 200  # no Origin: a non-browser client
    assert (await call(url, api_key, Origin=public_origin)).status_code == 200
    assert (await call(url, api_key, Host="gw.internal:8080")).status_code == 200  # --allowed-host
    reached = members.tool_calls("weather", "forecast")

    hostile_host = await call(url, api_key, Host="evil.example.com")
    assert hostile_host.status_code == 403
    assert problem(hostile_host) == "host_not_allowed"
    for method in ("GET", "DELETE", "HEAD", "PUT"):
        async with httpx.AsyncClient(timeout=10) as http:
            answered = await http.request(method, url, headers={"Host": "evil.example.com"})
        assert answered.status_code == 403, method
    async with httpx.AsyncClient(timeout=10) as http:
        catalogue = await http.get(
            url.removesuffix("/mcp") + "/catalog", headers={"Host": "evil.example.com"}
        )
    assert catalogue.status_code == 403 and problem(catalogue) == "host_not_allowed"
    foreign = await call(url, api_key, Origin="http://evil.example.com")
    assert foreign.status_code == 403
    assert problem(foreign) == "origin_not_allowed"
    assert members.tool_calls("weather", "forecast") == reached  # nothing was forwarded
    audit = await api.list_audit(ws, bundle_id)
    assert [e.outcome for e in audit] == ["ok", "ok", "ok"]  # and nothing counted as a call

    current = await api.get(ws, kinds.ENDPOINTS, endpoint_id)
    changed = await api.update(
        ws,
        kinds.ENDPOINTS,
        endpoint_id,
        EndpointUpdate(allowed_origins=["https://app.example"]),
        revision=current.revision,
    )
    assert changed.allowed_origins == ["https://app.example"]
    allowed = await call(url, api_key, Origin="https://app.example")
    assert allowed.status_code == 200 and "sunny" in allowed.text
    assert (await call(url, api_key, Origin="https://app.example:443")).status_code == 200
    assert (await call(url, api_key, Origin="https://other.example")).status_code == 403


async def test_an_allowed_origin_must_be_an_origin(api: PlatformClient, members: Members) -> None:
    ws = f"door-{key()[:8]}"
    bundle_id = await assistant(api, ws, members)
    endpoint_id, _, _ = await endpoint(api, ws, bundle_id)
    current = await api.get(ws, kinds.ENDPOINTS, endpoint_id)
    async with httpx.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for origin in ("https://app.example/path", "ftp://app.example", "app.example", "https://"):
            refused = await http.patch(
                f"{api.base_url}/v1/workspaces/{ws}/endpoints/{endpoint_id}",
                json={"allowed_origins": [origin]},
                headers={"If-Match": f'"{current.revision}"'},
            )
            assert refused.status_code == 422, origin
        taken = await http.patch(
            f"{api.base_url}/v1/workspaces/{ws}/endpoints/{endpoint_id}",
            json={"allowed_origins": ["http://[::1]:3000", "https://app.example"]},
            headers={"If-Match": f'"{current.revision}"'},
        )
        assert taken.status_code == 200, taken.text
        assert taken.json()["allowed_origins"] == ["http://[::1]:3000", "https://app.example"]
