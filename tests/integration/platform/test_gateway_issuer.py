"""An OAuth issuer with a path, and one that is down for a while (DESIGN.md §9.6 "Issuer metadata").

The issuer here is ``https://127.0.0.1:<port>/tenants/x`` and publishes its metadata only where
RFC 8414 §3.1 puts it (``/.well-known/oauth-authorization-server/tenants/x``), as the issue's issuer
did; the platform is a subprocess trusting its CA, reached through real HTTP.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
    GatewayMemberPut,
    McpInstanceCreate,
    McpServerCreate,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.integration.platform.test_gateway_oauth import INITIALIZE
from tests.mcp_members import Members
from tests.oauth_issuer import StubIssuer, stub_issuer

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubIssuer]:
    """The module's issuer: one with a path (overrides conftest's root issuer)."""
    with stub_issuer(tmp_path_factory.mktemp("issuer"), path="/tenants/x") as running:
        yield running


@pytest.fixture
async def api(issuer_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(issuer_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


async def oauth_endpoint(api: PlatformClient, members: Members, issuer: StubIssuer) -> str:
    """The URL of an OAuth endpoint of a one-member bundle, once the member is discovered."""
    ws = f"is-{key()[:8]}"
    bundle = await api.create(
        ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name=f"b-{ws}"), idempotency_key=key()
    )
    server = await api.create(
        ws,
        kinds.MCP_SERVERS,
        McpServerCreate(name="weather", type="url", endpoint_url=members.url("weather")),
        idempotency_key=key(),
    )
    inst = await api.create(
        ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name="weather"), idempotency_key=key()
    )
    await api.put_member(ws, bundle.id, "weather", GatewayMemberPut(mcp_instance_id=inst.id))
    deadline = time.monotonic() + 15
    while not all(m.healthy for m in await api.list_members(ws, bundle.id)):
        assert time.monotonic() < deadline, "the member was not discovered"
        await asyncio.sleep(0.1)
    body = EndpointCreate.model_validate(
        {
            "name": f"oa-{ws}",
            "gateway_bundle_id": bundle.id,
            "auth_mode": "OAuth",
            "oauth": {"issuer": issuer.url},
        }
    )
    return (await api.create(ws, kinds.ENDPOINTS, body, idempotency_key=key())).url


async def post(url: str, token: str) -> httpx.Response:
    headers: dict[str, Any] = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
    }
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, json=INITIALIZE, headers=headers)


# Runs first: the platform must not have this issuer's keys yet.
async def test_an_issuer_that_is_down_is_unavailable_and_trusted_again_soon_after(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    url = await oauth_endpoint(api, members, issuer)
    issuer.down = True
    try:
        refused = await post(url, issuer.token("ann", audience=url))
        assert refused.status_code == 401
        assert refused.json()["code"] == "issuer_unavailable"
        assert refused.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
    finally:
        issuer.down = False
    # Retried on a backoff from 1 s, not held for the 30 s that bound refetches for unknown keys.
    back = time.monotonic()
    while (answer := await post(url, issuer.token("ann", audience=url))).status_code != 200:
        assert answer.json()["code"] == "issuer_unavailable", answer.text
        assert time.monotonic() - back < 5, "the issuer is not tried again within 5 s"
        await asyncio.sleep(0.2)


async def test_an_issuer_with_a_path_is_found_where_rfc_8414_puts_its_metadata(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    url = await oauth_endpoint(api, members, issuer)
    answer = await post(url, issuer.token("bob", audience=url))
    assert answer.status_code == 200, answer.text
    assert issuer.hits["/.well-known/oauth-authorization-server/tenants/x"] >= 1
