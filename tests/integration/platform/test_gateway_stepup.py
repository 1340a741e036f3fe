"""Tool scopes step up (DESIGN.md §9.6): a call of a tool the token lacks scopes for is a 403 challenge.

Through real HTTP on both wires, against a platform that trusts the stub issuer; the challenge is
read with the official SDK's own parser, as its OAuth client reads it before re-authorizing.
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess
from pydantic import AnyUrl

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


async def scoped_endpoint(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> tuple[str, str, str, str]:
    """An OAuth endpoint that requires ``mcp:tools``, and ``notes:write`` for the notes tools: its
    workspace, its bundle's id, its URL, and a token that has only ``mcp:tools``."""
    ws = f"su-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(
        api, ws, bundle_id, issuer, required_scopes=["mcp:tools"], tool_scopes={"notes__*": ["notes:write"]}
    )
    return ws, bundle_id, url, issuer.token("ann", audience=url, scopes="mcp:tools")


async def test_a_tool_call_without_the_tools_scopes_is_a_403_scope_challenge_on_every_wire(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws, bundle_id, url, reader = await scoped_endpoint(api, members, issuer)
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


class HeldTokens:
    """The SDK's token storage holding one token already granted, and no registration."""

    def __init__(self, token: OAuthToken) -> None:
        self.tokens: OAuthToken | None = token
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdks_oauth_client_re_authorizes_for_the_tools_scopes(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    """The official client's auth flow, fed the platform's real answers, asks for the tool's scope."""
    _, _, url, reader = await scoped_endpoint(api, members, issuer)

    async def nowhere(*_: Any) -> Any:
        raise AssertionError("the flow stops before it sends anyone to authorize")

    provider = OAuthClientProvider(
        url,
        OAuthClientMetadata(redirect_uris=[AnyUrl("http://localhost:3030/callback")], scope="mcp:tools"),
        HeldTokens(OAuthToken(access_token=reader, token_type="Bearer", scope="mcp:tools")),
        redirect_handler=nowhere,
        callback_handler=nowhere,
    )
    body, headers = add_note(9, modern=True)
    flow = provider.async_auth_flow(httpx2.Request("POST", url, json=body, headers=headers))
    asked: list[str] = []
    async with httpx2.AsyncClient(verify=ssl.create_default_context(cafile=str(issuer.tls.ca_file))) as http:
        sent = await flow.__anext__()
        assert sent.headers["Authorization"] == f"Bearer {reader}"
        # Follow the flow through discovery; it registers (a POST) once it has chosen the scopes.
        while sent.method != "POST" or not asked:
            answered = await http.send(sent)
            await answered.aread()
            if not asked:
                assert answered.status_code == 403
            sent = await flow.asend(answered)
            asked.append(str(sent.url))
        await flow.aclose()
    assert asked[0] == metadata_url(url)  # the challenge's resource_metadata, read first
    assert provider.context.client_metadata.scope == "mcp:tools notes:write"
    assert members.tool_calls("notes", "add_note") == 0
