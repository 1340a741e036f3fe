"""OAuth endpoints (DESIGN.md §9.4): the gateway as a resource server, seen by the official MCP client.

The platform runs as a subprocess trusting the stub issuer's CA through SSL_CERT_FILE (with
``--allow-private-issuers``, since the issuer is on loopback); the members are the real MCP servers
of tests/mcp_members.py; tokens are JWTs the stub issuer signs with RSA and EC keys.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from platform_builders import key, member_gateway
from platform_harness import TOKEN, PlatformProcess, start_platform
from prometheus_client.parser import text_string_to_metric_families

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
    GatewayResourcePut,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members
from tests.oauth_issuer import StubIssuer, new_key

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
SCOPES = {"mcp:tools"}


@pytest.fixture
async def api(issuer_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(issuer_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


OVERVIEW = "Forecasts and notes for planning.\n\nIt reaches nothing you have not connected yourself."


async def gateway(api: PlatformClient, ws: str, members: Members) -> str:
    """A gateway bundle of both members, once both are discovered."""
    return await member_gateway(
        api, ws, members, GatewayBundleCreate(name=f"planner-{ws}", overview=OVERVIEW)
    )


async def oauth_endpoint(
    api: PlatformClient, ws: str, bundle_id: str, issuer: StubIssuer, **oauth: Any
) -> tuple[str, str]:
    """An OAuth endpoint of the bundle; its name and URL."""
    rate_limit = oauth.pop("rate_limit", None)
    body = EndpointCreate.model_validate(
        {
            "name": f"oa-{ws}",
            "gateway_bundle_id": bundle_id,
            "auth_mode": "OAuth",
            "oauth": {"issuer": issuer.url, **oauth},
            "rate_limit": rate_limit,
        }
    )
    created = await api.create(ws, kinds.ENDPOINTS, body, idempotency_key=key())
    assert created.api_key is None
    return created.name, created.url


def connect(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), cache=None)


def metadata_url(url: str) -> str:
    parts = httpx.URL(url)
    return f"{parts.scheme}://{parts.netloc.decode()}/.well-known/oauth-protected-resource{parts.path}"


async def post(url: str, token: str | None, body: dict[str, Any]) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, json=body, headers=headers)


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url)


def forged_hs256(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """A token "signed" with HMAC over the issuer's public key: the classic algorithm confusion."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    signing_input = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{part(claims)}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


async def test_protected_resource_metadata_and_the_401_challenge(
    api: PlatformClient, members: Members, issuer: StubIssuer, issuer_platform: PlatformProcess
) -> None:
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(
        api, ws, bundle_id, issuer, required_scopes=["mcp:tools"], tool_scopes={"notes__*": ["notes:write"]}
    )
    found = await get(metadata_url(url))
    assert found.status_code == 200
    assert found.json() == {
        "resource": url,
        "authorization_servers": [issuer.url],
        "scopes_supported": ["mcp:tools", "notes:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": f"planner-{ws}",
    }
    # No platform token needed for it, and an ApiKey endpoint has none.
    api_key_endpoint = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate(name=f"ak-{ws}", gateway_bundle_id=bundle_id),
        idempotency_key=key(),
    )
    assert (await get(metadata_url(api_key_endpoint.url))).status_code == 404

    refused = await post(url, None, INITIALIZE)
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata_url(url)}"'


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
async def test_a_valid_token_lists_and_calls_tools_within_its_scopes(
    api: PlatformClient, members: Members, issuer: StubIssuer, alg: str
) -> None:
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(
        api, ws, bundle_id, issuer, required_scopes=["mcp:tools"], tool_scopes={"notes__*": ["notes:write"]}
    )
    reader = issuer.token("ann", audience=url, scopes="mcp:tools", key=issuer.key(alg))
    async with connect(url, reader) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert "notes__add_note" not in tools and "weather__forecast" in tools
        result = await client.call_tool("weather__forecast", {"city": "Oslo"})
        assert result.content[0].text == "forecast for Oslo: sunny"  # type: ignore[union-attr]
        # The gateway answers with a 403 scope challenge (test_gateway_stepup.py); this client,
        # having no OAuth provider to re-authorize with, reports it as an error.
        with pytest.raises(MCPError):
            await client.call_tool("notes__add_note", {"text": "do-not-record-this"})
    assert members.tool_calls("notes", "add_note") == 0  # the member was never called
    writer = issuer.token("bob", audience=url, scopes="mcp:tools notes:write", key=issuer.key(alg))
    async with connect(url, writer) as client:
        assert "notes__add_note" in {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("notes__add_note", {"text": "milk"})
    assert members.tool_calls("notes", "add_note") == 1

    audit = await api_audit(api, ws, bundle_id)
    by_outcome = {(e["who"], e["presented_name"], e["outcome"]) for e in audit}
    assert ("sub:ann", "notes__add_note", "forbidden") in by_outcome
    assert ("sub:ann", "weather__forecast", "ok") in by_outcome
    assert ("sub:bob", "notes__add_note", "ok") in by_outcome
    assert "do-not-record-this" not in json.dumps(audit)


async def metric(platform_url: str, name: str, **labels: str) -> float:
    """One sample of the platform's /metrics (0 when the series does not exist)."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        text = (await http.get(f"{platform_url}/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def api_audit(api: PlatformClient, ws: str, bundle_id: str, **params: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        page = await http.get(
            f"{api.base_url}/v1/workspaces/{ws}/gateway-bundles/{bundle_id}/audit", params=params
        )
    assert page.status_code == 200, page.text
    items: list[dict[str, Any]] = page.json()["items"]
    return items


async def test_tokens_that_must_not_pass(api: PlatformClient, members: Members, issuer: StubIssuer) -> None:
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer, required_scopes=["mcp:tools"])
    good = issuer.token(audience=url, scopes="mcp:tools")
    assert (await post(url, good, INITIALIZE)).status_code == 200
    rsa_key = issuer.key("RS256")
    public_pem = rsa_key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    forged_hmac = forged_hs256(
        {"iss": issuer.url, "sub": "eve", "aud": url, "exp": int(time.time()) + 300, "scope": "mcp:tools"},
        public_pem,
        rsa_key.kid,
    )
    unsigned = jwt.encode(
        {"iss": issuer.url, "sub": "eve", "aud": url, "scope": "mcp:tools"}, None, algorithm="none"
    )
    stranger = new_key("RS256")
    cases = {
        "expired": issuer.token(audience=url, scopes="mcp:tools", lifetime=-120),
        "not yet valid": issuer.token(audience=url, scopes="mcp:tools", not_before=time.time() + 600),
        "another audience": issuer.token(audience="https://elsewhere.example/mcp", scopes="mcp:tools"),
        "another issuer": issuer.token(audience=url, scopes="mcp:tools", issuer="https://evil.example"),
        "hmac with the public key": forged_hmac,
        "alg none": unsigned,
        "a key the issuer does not publish": issuer.token(audience=url, scopes="mcp:tools", key=stranger),
        "not a jwt": "not-a-token",
        "tampered": good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB"),
    }
    for what, token in cases.items():
        answer = await post(url, token, INITIALIZE)
        assert answer.status_code == 401, what
        challenge = answer.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer error="invalid_token"'), (what, challenge)
        assert f'resource_metadata="{metadata_url(url)}"' in challenge
    # Within the leeway of 60 s, a just-expired token still passes.
    assert (
        await post(url, issuer.token(audience=url, scopes="mcp:tools", lifetime=-30), INITIALIZE)
    ).status_code == 200
    # A list of audiences that holds the endpoint's passes; scp as a list counts like scope.
    listed = issuer.token(audience=["other", url], extra={"scp": ["mcp:tools"]}, scopes="")
    assert (await post(url, listed, INITIALIZE)).status_code == 200

    lacking = await post(url, issuer.token(audience=url, scopes="profile"), INITIALIZE)
    assert lacking.status_code == 403
    refusals = {
        reason: await metric(
            api.base_url, "bundle_platform_gateway_token_refusals_total", endpoint=f"oa-{ws}", reason=reason
        )
        for reason in ("expired", "audience", "issuer", "algorithm", "unknown_key", "insufficient_scope")
    }
    # HS256 over the public key and alg none are both refused for their algorithm.
    assert refusals == {r: 2.0 if r == "algorithm" else 1.0 for r in refusals}
    assert lacking.headers["WWW-Authenticate"].startswith(
        'Bearer error="insufficient_scope", scope="mcp:tools"'
    )


async def test_a_rotated_key_is_fetched_once_without_a_restart(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer, audience="planner-api")
    assert (await post(url, issuer.token(audience="planner-api"), INITIALIZE)).status_code == 200
    fetched = issuer.hits["/jwks"]
    rotated = issuer.rotate("RS256")
    deadline = time.monotonic() + 35
    while (await post(url, issuer.token(audience="planner-api", key=rotated), INITIALIZE)).status_code != 200:
        assert time.monotonic() < deadline, "the rotated key was never fetched"
        await asyncio.sleep(1)
    assert issuer.hits["/jwks"] == fetched + 1
    # Made-up key ids do not make the platform fetch again and again.
    for _ in range(5):
        assert (
            await post(url, issuer.token(audience="planner-api", key=new_key("RS256")), INITIALIZE)
        ).status_code == 401
    assert issuer.hits["/jwks"] <= fetched + 2


async def test_a_client_past_its_rate_limit_gets_429_and_others_do_not(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(
        api, ws, bundle_id, issuer, rate_limit={"requests_per_minute": 6, "burst": 2}
    )
    ann = issuer.token("ann", audience=url)
    async with connect(url, ann) as client:
        for _ in range(2):
            await client.call_tool("weather__forecast", {"city": "Oslo"})
        await client.list_tools()  # lists do not count
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "weather__forecast", "arguments": {}},
    }
    limited = await post(url, ann, call)
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["Retry-After"]) <= 10
    async with connect(url, issuer.token("bob", audience=url)) as client:
        await client.call_tool("weather__forecast", {"city": "Bergen"})
    audit = await api_audit(api, ws, bundle_id)
    assert [e["outcome"] for e in audit if e["who"] == "sub:ann"].count("rate_limited") == 1
    endpoint = f"oa-{ws}"
    assert (
        await metric(api.base_url, "bundle_platform_gateway_rate_limited_requests_total", endpoint=endpoint)
        == 1
    )
    ok = await metric(
        api.base_url,
        "bundle_platform_gateway_tool_calls_total",
        endpoint=endpoint,
        tool="weather__forecast",
        outcome="ok",
    )
    assert ok == 3
    assert (
        await metric(api.base_url, "bundle_platform_gateway_tool_call_seconds_count", endpoint=endpoint) == 4
    )


async def test_the_audit_survives_a_restart_and_pages(
    tmp_path: Path, members: Members, issuer: StubIssuer
) -> None:
    db = tmp_path / "platform.db"
    extra = (
        "--token",
        TOKEN,
        "--discovery-interval",
        "2",
        "--allow-private-issuers",
        "--audit-max-entries",
        "5",
    )
    env = {"SSL_CERT_FILE": str(issuer.tls.ca_file)}
    running = start_platform(db, *extra, env=env)
    try:
        async with PlatformClient(running.url, token=TOKEN, timeout=10.0) as api:
            ws = f"oa-{key()[:8]}"
            bundle_id = await gateway(api, ws, members)
            _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
            async with connect(url, issuer.token("ann", audience=url)) as client:
                for n in range(7):
                    await client.call_tool("weather__forecast", {"city": f"city-{n}"})
    finally:
        running.stop()
    running = start_platform(db, *extra, env=env)
    try:
        async with PlatformClient(running.url, token=TOKEN, timeout=10.0) as api:
            first = await api_audit(api, ws, bundle_id, limit="3")
            assert len(first) == 3 and all(e["who"] == "sub:ann" and e["outcome"] == "ok" for e in first)
            every = await api_audit(api, ws, bundle_id, limit="100")
            assert len(every) == 5  # --audit-max-entries
            assert [e["at"] for e in every] == sorted((e["at"] for e in every), reverse=True)
    finally:
        running.stop()


async def test_the_catalogue_lists_the_bundles_and_the_members_resources_by_title_and_description(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    """Seed 002: the catalogue lists prompts and resources by title and description."""
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    style = GatewayResourcePut(name="guides/style", title="House chart style", content="# House style")
    await api.put_resource(ws, bundle_id, style)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
    async with httpx.AsyncClient(timeout=10) as http:
        shown = await http.get(
            url.removesuffix("/mcp") + "/catalog",
            headers={"Authorization": f"Bearer {issuer.token(audience=url)}"},
        )
    assert shown.status_code == 200
    resources = shown.json()["resources"]
    # The bundle's own document, then the member's resource; never the member's bundle: one.
    assert resources == [
        {"title": "House chart style", "description": ""},
        {"title": "Today's notes", "description": ""},
    ]


async def test_the_catalogue_is_read_only_through_an_oauth_endpoint_the_reader_can_use(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"oa-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    api_key_endpoint = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate(name=f"ak-{ws}", gateway_bundle_id=bundle_id),
        idempotency_key=key(),
    )
    key_catalog = api_key_endpoint.url.removesuffix("/mcp") + "/catalog"
    # No OAuth endpoint: not found, even with the platform's own token.
    assert (await get(key_catalog)).status_code == 404
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer, tool_scopes={"notes__*": ["notes:write"]})
    catalog = url.removesuffix("/mcp") + "/catalog"
    unsigned = await get(catalog)
    assert unsigned.status_code == 401 and "resource_metadata" in unsigned.headers["WWW-Authenticate"]
    async with httpx.AsyncClient(timeout=10) as http:
        shown = await http.get(catalog, headers={"Authorization": f"Bearer {issuer.token(audience=url)}"})
    assert shown.status_code == 200
    body = shown.json()
    assert (body["bundle"], body["overview"], body["endpoint"]) == (f"planner-{ws}", OVERVIEW, url)
    assert all(set(t) == {"title", "description"} for t in body["tools"])
    titles = {t["title"] for t in body["tools"]}
    assert titles and not any("__" in t for t in titles)  # by title, not by the prefixed name
    assert "add_note" not in titles and "Add a note." not in {t["description"] for t in body["tools"]}
