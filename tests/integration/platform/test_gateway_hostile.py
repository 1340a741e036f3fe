"""Hostile input at the gateway's door and in its OAuth checks, judged by what a client sees.

Odd JSON types in a token's header and claims or in the issuer's key set, keys an issuer withdraws
or an issuer that cannot be reached, a session named by someone other than its opener, HEAD on a
kept-alive connection, names, bodies and prompt arguments of any size: every answer is a 4xx of the
platform's usual shape (problem+json, or a JSON-RPC error where the MCP transport wants one), never
a 5xx, never larger than a bound, and never anything of another principal's.

Most tests run the platform as a subprocess (its log is read for tracebacks); those about key
refresh run it in this process with a verifier whose intervals are seconds instead of minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from platform_builders import key, rpc_answer
from platform_harness import TOKEN, PlatformProcess
from test_gateway_oauth import INITIALIZE, api_audit, gateway, oauth_endpoint, post
from tests.mcp_members import Members
from tests.oauth_issuer import StubIssuer, new_key

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Refused
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayPromptPut,
    GatewayToolCuration,
    PromptMessage,
)
from bundle_operator.reference_platform import app as platform_app
from bundle_operator.reference_platform.context import ServerConfig
from bundle_operator.reference_platform.gateway_oauth import TokenVerifier
from bundle_operator.reference_platform.server import start

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
JSON_TYPES = ("application/json", "application/problem+json")


@pytest.fixture
async def api(issuer_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(issuer_platform.url, token=TOKEN, timeout=10.0) as client:
        yield client


@contextlib.asynccontextmanager
async def quick_refresh_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, issuer: StubIssuer, members: Members, **intervals: float
) -> AsyncIterator[str]:
    """The URL of an OAuth endpoint of a platform in this process, whose token verifier is built
    with ``intervals`` (seconds instead of minutes)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(issuer.tls.ca_file))
    monkeypatch.setattr(platform_app, "TokenVerifier", functools.partial(TokenVerifier, **intervals))
    running = await start(
        ServerConfig(db_path=tmp_path / "p.db", allow_private_issuers=True, discovery_interval=2)
    )
    try:
        async with PlatformClient(running.url, timeout=10.0) as api:
            ws = f"ho-{key()[:8]}"
            bundle_id = await gateway(api, ws, members)
            _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
        yield url
    finally:
        await running.stop()


def connect(url: str, token: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), cache=None, **options)


def log_since(platform: PlatformProcess, offset: int) -> str:
    return platform.log.read_text()[offset:]


def headers(token: str, *, session: str | None = None, version: str | None = None) -> dict[str, str]:
    found = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if session is not None:
        found["Mcp-Session-Id"] = session
    if version is not None:
        found["MCP-Protocol-Version"] = version
    return found


def modern_call(name: str, request_id: int = 9) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 tools/call of ``name``: its body and its routing headers."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": ENVELOPE},
    }
    return body, {"Mcp-Method": "tools/call", "Mcp-Name": name}


def assert_invalid_token(answer: httpx.Response, what: str) -> None:
    assert answer.status_code == 401, (what, answer.status_code, answer.text[:300])
    assert answer.headers["Content-Type"] == "application/problem+json", what
    assert answer.json()["code"] == "invalid_token", what
    assert answer.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"'), what


# --- finding 6: odd JSON types in a token ----------------------------------------------------------


async def test_odd_types_in_a_token_are_invalid_tokens_never_a_500(
    api: PlatformClient, members: Members, issuer: StubIssuer, issuer_platform: PlatformProcess
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer, required_scopes=["mcp:tools"])
    signer = issuer.key("RS256")
    base_header = {"alg": "RS256", "typ": "JWT", "kid": signer.kid}
    base_claims = {
        "iss": issuer.url,
        "sub": "ann",
        "aud": url,
        "exp": int(time.time()) + 300,
        "scope": "mcp:tools",
    }

    def token(header: dict[str, Any] | None = None, claims: dict[str, Any] | None = None) -> str:
        return issuer.signed({**base_header, **(header or {})}, {**base_claims, **(claims or {})}, signer)

    assert (await post(url, token(), INITIALIZE)).status_code == 200
    # A NumericDate may have a fraction (RFC 7519 section 2): a float exp is a date like any other.
    assert (await post(url, token(claims={"exp": time.time() + 300.5}), INITIALIZE)).status_code == 200
    no_subject = {k: v for k, v in base_claims.items() if k != "sub"}
    cases: dict[str, str] = {
        "alg a list": token({"alg": ["RS256"]}),
        "alg an object": token({"alg": {"RS256": True}}),
        "alg a number": token({"alg": 256}),
        "alg with a line break": token({"alg": "RS256\r\nX-Injected: 1"}),
        "alg with a quote": token({"alg": 'RS256"'}),
        "kid a list": token({"kid": [signer.kid]}),
        "kid an object": token({"kid": {"id": signer.kid}}),
        "kid of 4,000 characters": token({"kid": "k" * 4_000}),
        "typ a list": token({"typ": ["JWT"]}),
        "crit a string": token({"crit": "exp"}),
        "crit an unknown extension": token({"crit": ["exp"]}),
        "header a list": issuer.signed(["RS256"], base_claims, signer),
        "claims a list": issuer.signed(base_header, [base_claims], signer),
        "scope a number": token(claims={"scope": 7}),
        "scope an object": token(claims={"scope": {"mcp:tools": True}}),
        "scp a list of lists": token(claims={"scp": [["mcp:tools"]]}),
        "sub a number": token(claims={"sub": 7}),
        "sub a list": token(claims={"sub": ["ann"]}),
        "sub an object": token(claims={"sub": {"name": "ann"}}),
        "sub of 300 characters": token(claims={"sub": "a" * 300}),
        "no sub, client_id a list": issuer.signed(base_header, {**no_subject, "client_id": ["c"]}, signer),
        "exp a string": token(claims={"exp": "tomorrow"}),
        "exp a string of digits": token(claims={"exp": str(int(time.time()) + 300)}),
        "exp an integer of 400 digits": token(claims={"exp": 10**400}),
        "exp a float past year 9999": token(claims={"exp": 1e300}),
        "exp true": token(claims={"exp": True}),
        "exp a list": token(claims={"exp": [1]}),
        "nbf a string": token(claims={"nbf": "now"}),
        "iat an object": token(claims={"iat": {}}),
        "aud a number": token(claims={"aud": 7}),
        "aud an object": token(claims={"aud": {"url": url}}),
        "aud a list of lists": token(claims={"aud": [[url]]}),
        "iss a number": token(claims={"iss": 7}),
        "iss a list": token(claims={"iss": [issuer.url]}),
    }
    offset = len(issuer_platform.log.read_text())
    for what, odd in cases.items():
        answer = await post(url, odd, INITIALIZE)
        assert_invalid_token(answer, what)
        assert "X-Injected" not in answer.headers, what
        # The challenge stays one header of quoted strings: nothing from the token ends one early.
        assert answer.headers["WWW-Authenticate"].count('"') % 2 == 0, what
    assert "Traceback" not in log_since(issuer_platform, offset)
    assert "unexpected error" not in log_since(issuer_platform, offset)


async def test_odd_entries_in_the_issuers_key_set_leave_its_other_keys_serving(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    members: Members,
    issuer: StubIssuer,
) -> None:
    good = issuer.key("RS256").public_jwk()
    issuer.odd_entries = [
        {**good, "kid": "odd-alg", "alg": ["RS256"]},
        {**good, "kid": "odd-kty", "kty": ["RSA"]},
        {**good, "kid": "odd-n", "n": 7},
        {**good, "kid": "odd-use", "use": ["sig"]},
        {**good, "kid": ["odd-kid"]},
        "not a key",
        None,
    ]
    try:
        async with quick_refresh_endpoint(tmp_path, monkeypatch, issuer, members) as url:
            for alg in ("RS256", "ES256", "EdDSA"):
                answer = await post(url, issuer.token(audience=url, key=issuer.key(alg)), INITIALIZE)
                assert answer.status_code == 200, (alg, answer.text)
            odd = issuer.token(audience=url, key=issuer.key("RS256"), headers={"kid": "odd-alg"})
            assert_invalid_token(await post(url, odd, INITIALIZE), "a key published with alg as a list")
    finally:
        issuer.odd_entries = []
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


# --- finding 7: withdrawn keys and an issuer that cannot be reached ----------------------------------


async def test_a_withdrawn_key_stops_verifying_within_the_key_refresh_cached_tokens_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: Members, issuer: StubIssuer
) -> None:
    max_age = 3.0
    async with quick_refresh_endpoint(
        tmp_path, monkeypatch, issuer, members, keys_max_age=max_age, refetch_seconds=0.5
    ) as url:
        doomed = new_key("RS256")
        issuer.publish(doomed)
        try:
            early = issuer.token("ann", audience=url, key=doomed)
            assert (await post(url, early, INITIALIZE)).status_code == 200  # the keys are fetched now
            await asyncio.sleep(max_age - 1)
            # Checked a second before the keys are due: kept as checked for a minute at most, but never
            # past the keys' next fetch.
            late = issuer.token("bob", audience=url, key=doomed)
            assert (await post(url, late, INITIALIZE)).status_code == 200
            issuer.withdraw(doomed)
            withdrawn = time.monotonic()
            while (await post(url, late, INITIALIZE)).status_code == 200:
                assert time.monotonic() - withdrawn < max_age + 1, "the withdrawn key still verifies"
                await asyncio.sleep(0.2)
            assert_invalid_token(await post(url, late, INITIALIZE), "the cached token of a withdrawn key")
            assert_invalid_token(await post(url, early, INITIALIZE), "a token of a withdrawn key")
            # Other keys go on verifying.
            assert (await post(url, issuer.token("cy", audience=url), INITIALIZE)).status_code == 200
        finally:
            issuer.withdraw(doomed)


async def test_the_issuers_cache_headers_shorten_how_long_a_withdrawn_key_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: Members, issuer: StubIssuer
) -> None:
    # A ceiling far above the test's length: only the issuer's Cache-Control can make it this quick.
    async with quick_refresh_endpoint(
        tmp_path, monkeypatch, issuer, members, keys_max_age=300.0, refetch_seconds=0.5
    ) as url:
        doomed = new_key("RS256")
        issuer.publish(doomed)
        issuer.keys_headers = {"Cache-Control": "public, max-age=1"}
        try:
            token = issuer.token("ann", audience=url, key=doomed)
            assert (await post(url, token, INITIALIZE)).status_code == 200
            issuer.withdraw(doomed)
            withdrawn = time.monotonic()
            while (await post(url, token, INITIALIZE)).status_code == 200:
                assert time.monotonic() - withdrawn < 10, "the key verifies past the issuer's max-age"
                await asyncio.sleep(0.2)
            assert_invalid_token(await post(url, token, INITIALIZE), "a token of a key withdrawn")
        finally:
            issuer.keys_headers = {}
            issuer.withdraw(doomed)


async def test_keys_moved_by_the_issuer_are_found_through_its_metadata_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: Members, issuer: StubIssuer
) -> None:
    intervals = {"keys_max_age": 1.0, "keys_grace": 60.0, "refetch_seconds": 0.5}
    async with quick_refresh_endpoint(tmp_path, monkeypatch, issuer, members, **intervals) as url:
        assert (await post(url, issuer.token("ann", audience=url), INITIALIZE)).status_code == 200
        issuer.keys_path = "/keys/v2"  # the old address answers 404 from now on
        fresh = new_key("RS256")
        issuer.publish(fresh)
        try:
            moved = time.monotonic()
            token = issuer.token("bob", audience=url, key=fresh)
            while (await post(url, token, INITIALIZE)).status_code != 200:
                assert time.monotonic() - moved < 10, "the key set's new address is never read"
                await asyncio.sleep(0.3)
        finally:
            issuer.keys_path = "/jwks"
            issuer.withdraw(fresh)


async def test_an_unreachable_issuers_last_keys_serve_for_the_grace_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: Members, issuer: StubIssuer
) -> None:
    max_age, grace, floor = 2.0, 3.0, 0.5
    intervals = {
        "keys_max_age": max_age,
        "keys_grace": grace,
        "refetch_seconds": floor,
        "retry_first": floor,
        "retry_max": floor,
    }
    async with quick_refresh_endpoint(tmp_path, monkeypatch, issuer, members, **intervals) as url:
        serial = iter(range(10_000))

        async def fresh_token() -> httpx.Response:
            """A token the platform has not seen, so it is checked against the keys it holds now."""
            return await post(url, issuer.token(f"user-{next(serial)}", audience=url), INITIALIZE)

        assert (await fresh_token()).status_code == 200
        fetched = time.monotonic()
        issuer.down = True
        try:
            hits = issuer.hits["/jwks"]
            await asyncio.sleep(max_age + 0.5)
            # The keys are due and the issuer is down: they serve on through the grace.
            while time.monotonic() < fetched + max_age + grace - 0.5:
                assert (await fresh_token()).status_code == 200
                await asyncio.sleep(0.1)
            # One fetch per floor interval at most, however many tokens come meanwhile.
            assert issuer.hits["/jwks"] - hits <= (grace + 1) / floor + 1
            await asyncio.sleep(1.0)
            refused = await fresh_token()
            assert refused.status_code == 401 and refused.json()["code"] == "issuer_unavailable"
            assert "cannot be read" in refused.json()["detail"]
        finally:
            issuer.down = False
        await asyncio.sleep(floor)
        assert (await fresh_token()).status_code == 200  # back as soon as the issuer answers


# --- finding 8: a session belongs to its opener ------------------------------------------------------


async def read_event(stream: httpx.Response, method: str, within: float) -> None:
    """Wait for an SSE event carrying a notification of ``method`` on ``stream``."""
    lines = stream.aiter_lines()

    async def seek() -> None:
        async for line in lines:
            if line.startswith("data:") and json.loads(line[5:]).get("method") == method:
                return
        raise AssertionError(f"the stream ended without {method}")

    await asyncio.wait_for(seek(), timeout=within)


async def test_a_session_answers_only_the_principal_that_opened_it(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
    alice, bob = issuer.token("alice", audience=url), issuer.token("bob", audience=url)
    not_found = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
    async with httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(url, json=INITIALIZE, headers=headers(alice))
        assert opened.status_code == 200
        session = opened.headers["Mcp-Session-Id"]
        hers = headers(alice, session=session, version=LEGACY)
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=hers)).status_code == 202
        her_stream = headers(alice, session=session, version=LEGACY) | {"Accept": "text/event-stream"}
        async with http.stream("GET", url, headers=her_stream) as stream:
            assert stream.status_code == 200
            his = headers(bob, session=session, version=LEGACY)
            listed = await http.post(
                url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=his
            )
            assert (listed.status_code, listed.json()) == (404, not_found)
            assert listed.headers["Content-Type"].startswith("application/json")
            async with http.stream("GET", url, headers=his | {"Accept": "text/event-stream"}) as listening:
                assert listening.status_code == 404
                assert json.loads(await listening.aread()) == not_found
            deleted = await http.delete(url, headers=his)
            assert (deleted.status_code, deleted.json()) == (404, not_found)
            # On the 2026-07-28 wire too (the door's short way for tools/call): her id is not his.
            body, routing = modern_call("weather__forecast")
            modern = headers(bob, session=session, version=MODERN) | routing
            called = await http.post(url, json=body, headers=modern)
            assert (called.status_code, called.json()) == (404, not_found)
            # Her session is whole: it answers her, and its stream still carries her notifications.
            mine = await http.post(
                url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=hers
            )
            assert mine.status_code == 200 and rpc_answer(mine)["result"]["tools"]
            await api.put_tool(ws, bundle_id, "weather__echo", GatewayToolCuration(enabled=False))
            await read_event(stream, "notifications/tools/list_changed", within=10)
        assert (await http.delete(url, headers=hers)).status_code == 200
        gone = await http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=hers)
        assert gone.status_code == 404


# --- finding 9: HEAD on a kept-alive connection ------------------------------------------------------


async def head_then_health(base: str, path: str, authorization: str | None) -> tuple[bytes, bytes]:
    """HEAD ``path`` then GET /healthz on one connection: both status lines, once framed as sent."""
    parts = httpx.URL(base)
    reader, writer = await asyncio.open_connection(parts.host, parts.port)
    try:
        auth = f"Authorization: Bearer {authorization}\r\n" if authorization else ""
        writer.write(
            # The platform's own host: endpoint routes refuse any other (DNS-rebinding protection).
            f"HEAD {path} HTTP/1.1\r\nHost: {parts.netloc.decode()}\r\n{auth}\r\n"
            "GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n".encode()
        )
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = next(
            int(line.split(b":", 1)[1])
            for line in second.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        assert await asyncio.wait_for(reader.readexactly(length), 10) == b'{"status": "ok"}'
        return first, second
    finally:
        writer.close()


async def test_head_on_every_gateway_route_answers_without_a_body(
    api: PlatformClient, members: Members, issuer: StubIssuer, issuer_platform: PlatformProcess
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
    keyed = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate(name=f"ak-{ws}", gateway_bundle_id=bundle_id),
        idempotency_key=key(),
    )
    assert keyed.api_key is not None
    token = issuer.token(audience=url)
    oauth_path = httpx.URL(url).path
    routes: dict[str, tuple[str, str | None, bytes]] = {
        "an ApiKey endpoint": (httpx.URL(keyed.url).path, keyed.api_key.get_secret_value(), b"405"),
        "an OAuth endpoint": (oauth_path, token, b"405"),
        "an endpoint without a key": (oauth_path, None, b"405"),
        "an endpoint that does not exist": ("/mcp/nowhere/mcp", None, b"405"),
        "the RFC 9728 metadata": (f"/.well-known/oauth-protected-resource{oauth_path}", None, b"200"),
        "the catalogue": (oauth_path.removesuffix("/mcp") + "/catalog", token, b"200"),
        "the catalogue without a token": (oauth_path.removesuffix("/mcp") + "/catalog", None, b"401"),
    }
    for what, (path, authorization, status) in routes.items():
        first, second = await head_then_health(issuer_platform.url, path, authorization)
        assert first.startswith(b"HTTP/1.1 " + status), (what, first)
        assert second.startswith(b"HTTP/1.1 200 OK"), (what, second)
        if status == b"405":
            assert b"\r\nAllow: GET, POST, DELETE\r\n" in first, (what, first)


# --- finding 10: sizes that follow the request -------------------------------------------------------


async def test_an_oversized_tool_name_is_refused_and_its_audit_row_stays_small(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
    token = issuer.token("ann", audience=url)
    async with connect(url, token, mode="legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("n" * 1_000_000, {})
    assert "at most 258 characters" in str(refused.value) and len(str(refused.value)) < 400
    # The door's short way on the 2026-07-28 wire (the name also rides in a header: 5,000 fits one).
    body, routing = modern_call("m" * 5_000)
    async with httpx.AsyncClient(timeout=10) as raw:
        answer = await raw.post(url, json=body, headers=headers(token, version=MODERN) | routing)
    assert answer.status_code == 400 and len(answer.content) < 400
    assert answer.json()["error"]["code"] == -32602
    # A call refused by the rate limit is audited with the name as sent, before any tool is looked up.
    limited = await api.create(
        ws,
        kinds.ENDPOINTS,
        EndpointCreate.model_validate(
            {
                "name": f"rl-{ws}",
                "gateway_bundle_id": bundle_id,
                "rate_limit": {"requests_per_minute": 1, "burst": 1},
            }
        ),
        idempotency_key=key(),
    )
    assert limited.api_key is not None
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "r" * 1_000_000}}
    async with httpx.AsyncClient(timeout=10) as raw:
        for _ in range(2):
            last = await raw.post(limited.url, json=call, headers=headers(limited.api_key.get_secret_value()))
    assert last.status_code == 429 and len(last.content) < 1024
    rows = [e for e in await api_audit(api, ws, bundle_id) if e["outcome"] in ("refused", "rate_limited")]
    assert sorted(e["outcome"] for e in rows) == ["rate_limited", "refused", "refused"]
    for row in rows:
        assert len(row["presented_name"]) <= 259 and len(row["error"]) <= 1025
        assert len(json.dumps(row)) < 2048


async def test_prompt_arguments_cannot_multiply_a_prompt_past_its_bound(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    # 10,000 placeholders in 50,000 characters: within the 64 KiB a prompt's text may have.
    echo = GatewayPromptPut.model_validate(
        {
            "name": "echo",
            "arguments": [{"name": "a"}],
            "messages": [{"role": "user", "text": "{{a}}" * 10_000}],
        }
    )
    await api.put_prompt(ws, bundle_id, echo)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
    async with connect(url, issuer.token(audience=url)) as client:
        small = await client.get_prompt("echo", {"a": "x"})
        assert small.messages[0].content.text == "x" * 10_000  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="longer than 1048576 characters"):
            await client.get_prompt("echo", {"a": "y" * 1_000})  # 10 MB once rendered


async def test_a_prompt_over_64_kib_of_text_is_refused_naming_its_messages(
    api: PlatformClient, members: Members
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    # Seed 002: 64 KiB of message text per prompt, all messages together (as analyze counts it).
    halves = [PromptMessage(role="user", text="t" * (40 * 1024)) for _ in range(2)]
    with pytest.raises(Refused) as refused:
        await api.put_prompt(ws, bundle_id, GatewayPromptPut(name="long", messages=halves))
    assert refused.value.status == 422 and refused.value.code == "limit_exceeded"
    assert [e.field for e in refused.value.errors] == ["messages"]
    await api.put_prompt(ws, bundle_id, GatewayPromptPut(name="long", messages=halves[:1]))


async def test_every_error_of_the_door_is_json_or_a_problem(
    api: PlatformClient, members: Members, issuer: StubIssuer
) -> None:
    ws = f"ho-{key()[:8]}"
    bundle_id = await gateway(api, ws, members)
    _, url = await oauth_endpoint(api, ws, bundle_id, issuer)
    token = issuer.token(audience=url)
    plain = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    modern = headers(token, version=MODERN)
    async with httpx.AsyncClient(timeout=30) as http:
        answers = {
            "a body over 4 MiB": (
                await http.post(url, content=b"[" + b" " * (4 * 1024 * 1024) + b"]", headers=headers(token)),
                413,
            ),
            "malformed JSON": (await http.post(url, content=b"{", headers=headers(token)), 400),
            "no Content-Type": (await http.post(url, content=json.dumps(INITIALIZE), headers=plain), 400),
            "GET on the 2026-07-28 wire": (await http.get(url, headers=modern), 405),
            "Accept without JSON": (
                await http.post(url, json=INITIALIZE, headers=modern | {"Accept": "text/html"}),
                406,
            ),
            "PUT": (await http.put(url, json=INITIALIZE, headers=headers(token)), 405),
        }
    for what, (answer, status) in answers.items():
        assert answer.status_code == status, (what, answer.status_code, answer.text[:200])
        content_type = answer.headers["Content-Type"].split(";")[0]
        assert content_type in JSON_TYPES, (what, content_type)
        body = answer.json()
        if content_type == "application/problem+json":
            assert body["status"] == status and body["code"], what
        else:
            assert body["jsonrpc"] == "2.0" and body["error"]["code"] < 0, what
    assert answers["malformed JSON"][0].json()["error"]["code"] == -32700  # a JSON-RPC parse error
    assert answers["GET on the 2026-07-28 wire"][0].headers["Allow"] == "POST"
