"""Tool scopes step up (DESIGN.md §9.6): a call of a tool the token lacks scopes for is a 403 challenge.

Through real HTTP on both wires, against a platform that trusts the stub issuer; the challenge is
read with the official SDK's own parser, as its OAuth client reads it before re-authorizing.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess

from bundle_operator.platform.client import PlatformClient

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.integration.platform.test_gateway_oauth import (
    INITIALIZE,
    api_audit,
    gateway,
    metadata_url,
    oauth_endpoint,
)
from tests.mcp_members import Members
from tests.oauth_issuer import StubIssuer

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

MODERN = "2026-07-28"


@pytest.fixture
async def api(issuer_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(issuer_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


def add_note(request_id: int, *, modern: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """A ``tools/call`` of notes__add_note on the 2025 wire or the 2026-07-28 one."""
    params: dict[str, Any] = {"name": "notes__add_note", "arguments": {"text": "do-not-record-this"}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "notes__add_note"}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}, headers


async def test_a_tool_call_without_the_tools_scopes_is_a_403_scope_challenge_on_every_wire(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"su-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(
        api, ws, bundle_id, issuer, required_scopes=["mcp:tools"], tool_scopes={"notes__*": ["notes:write"]}
    )
    reader = issuer.token("ann", audience=url, scopes="mcp:tools")
    bearer = {"Authorization": f"Bearer {reader}"}
    expected = (
        f'Bearer error="insufficient_scope", scope="mcp:tools notes:write", '
        f'resource_metadata="{metadata_url(url)}"'
    )
    async with httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(
            url, json=INITIALIZE, headers=bearer | {"Accept": "application/json, text/event-stream"}
        )
        assert opened.status_code == 200
        session = {"Mcp-Session-Id": opened.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}
        legacy_body, legacy_headers = add_note(2, modern=False)
        modern_body, modern_headers = add_note(3, modern=True)
        for body, headers in ((legacy_body, legacy_headers | session), (modern_body, modern_headers)):
            refused = await http.post(url, json=body, headers=headers | bearer)
            assert refused.status_code == 403, refused.text
            assert refused.headers["WWW-Authenticate"] == expected
            assert refused.headers["Content-Type"].startswith("application/problem+json")
            assert refused.json()["code"] == "insufficient_scope"
            # What the SDK's OAuth client tests before it re-authorizes with the scopes named.
            assert extract_field_from_www_auth(refused, "error") == "insufficient_scope"  # type: ignore[arg-type]
            assert extract_scope_from_www_auth(refused) == "mcp:tools notes:write"  # type: ignore[arg-type]
        # A tool the token covers is still answered on the same session.
        allowed = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "weather__forecast", "arguments": {"city": "Oslo"}},
        }
        answered = await http.post(url, json=allowed, headers=legacy_headers | session | bearer)
        assert answered.status_code == 200 and "sunny" in answered.text

        # With the scope the same call goes through.
        writer = issuer.token("bob", audience=url, scopes="mcp:tools notes:write")
        stepped = await http.post(
            url, json=modern_body, headers=modern_headers | {"Authorization": f"Bearer {writer}"}
        )
        assert stepped.status_code == 200, stepped.text
    assert members.tool_calls("notes", "add_note") == 1  # only the stepped-up call reached the member
    audit = await api_audit(api, ws, bundle_id)
    forbidden = [e for e in audit if e["outcome"] == "forbidden"]
    assert [(e["who"], e["presented_name"]) for e in forbidden] == [("sub:ann", "notes__add_note")] * 2
    assert "do-not-record-this" not in str(audit)
