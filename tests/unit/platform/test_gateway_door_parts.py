"""Parts of the gateway's door on their own: the ASGI bridge, session owners, the rate limiter.

The integration tests (tests/integration/platform/test_gateway_hostile.py) see them through the
platform; here each is held to its contract with a small ASGI app, whatever the SDK happens to send.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bundle_operator.reference_platform import gateway_limits
from bundle_operator.reference_platform.asgi_bridge import Receive, Send, serve_asgi
from bundle_operator.reference_platform.gateway_audit import bounded
from bundle_operator.reference_platform.gateway_endpoint import SessionOwners
from bundle_operator.reference_platform.gateway_limits import RateLimiter
from bundle_operator.reference_platform.gateway_oauth import TokenRefused, _cacheable_for, _who
from tests.unit.platform.conftest import Clock

pytestmark = pytest.mark.anyio

# What the app answers, by path: status, headers and body (sent in two chunks).
ANSWERS: dict[str, tuple[int, list[tuple[bytes, bytes]], bytes]] = {
    "/plain-error": (413, [(b"allow", b"POST")], b"Request body too large"),
    "/json-error": (400, [(b"content-type", b"application/json")], b'{"jsonrpc":"2.0","id":null}'),
    "/ok": (200, [(b"content-type", b"application/json")], b'{"ok":true}'),
    "/empty-405": (405, [(b"allow", b"POST")], b""),
}


async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    status, headers, body = ANSWERS[scope["path"]]
    headers = [*headers, (b"x-user", str(scope.get("user")).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    half = len(body) // 2
    await send({"type": "http.response.body", "body": body[:half], "more_body": True})
    await send({"type": "http.response.body", "body": body[half:], "more_body": False})


async def bridged(request: web.Request) -> web.StreamResponse:
    return await serve_asgi(app, request, user="user-7")


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    application = web.Application()
    application.router.add_route("*", "/{path:.*}", bridged)
    async with TestClient(TestServer(application)) as running:
        yield running


async def test_an_error_that_is_not_json_becomes_a_problem_keeping_allow(
    client: TestClient[web.Request, web.Application],
) -> None:
    for path, status in (("/plain-error", 413), ("/empty-405", 405)):
        answer = await client.post(path)
        assert answer.status == status
        assert answer.headers["Content-Type"] == "application/problem+json"
        assert answer.headers["Allow"] == "POST"
        problem = await answer.json(content_type=None)
        assert (problem["status"], problem["type"]) == (status, "about:blank")
        assert "Request body too large" not in problem["detail"]  # the app's text is not repeated


async def test_json_answers_pass_as_sent_and_the_user_reaches_the_scope(
    client: TestClient[web.Request, web.Application],
) -> None:
    error = await client.post("/json-error")
    assert (error.status, await error.read()) == (400, b'{"jsonrpc":"2.0","id":null}')
    ok = await client.get("/ok")
    assert (ok.status, await ok.read(), ok.headers["x-user"]) == (200, b'{"ok":true}', "user-7")


async def test_head_gets_no_body_and_the_next_answer_on_the_connection_is_whole(
    client: TestClient[web.Request, web.Application],
) -> None:
    server = client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(b"HEAD /ok HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\n\r\n")
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    finally:
        writer.close()
    assert first.startswith(b"HTTP/1.1 200 OK") and b"Transfer-Encoding" not in first
    assert second.startswith(b"HTTP/1.1 200 OK"), second


def test_session_owners_answer_for_known_sessions_only_and_stay_bounded() -> None:
    owners = SessionOwners(limit=3)
    for n in range(1, 4):
        owners.claim(f"s{n}", f"sub:user-{n}")
    assert owners.allows("s1", "sub:user-1") and not owners.allows("s1", "sub:bob")
    assert owners.allows("unknown", "sub:bob")  # left to the SDK, which answers 404 for it
    # A fourth claim forgets the least recently used: s2 (s1 was just used).
    owners.claim("s4", "sub:user-4")
    assert owners.allows("s2", "sub:bob") and not owners.allows("s1", "sub:bob")
    owners.forget("s4")
    assert owners.allows("s4", "sub:bob")


def test_bounded_text_keeps_a_prefix_and_says_it_was_cut() -> None:
    assert bounded(None, 3) is None and bounded("abc", 3) == "abc"
    assert bounded("abcdef", 3) == "abc…"


def test_a_prune_judges_each_bucket_by_its_own_endpoints_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_limits, "MAX_BUCKETS", 10)
    monkeypatch.setattr(gateway_limits, "PRUNED_TO", 8)
    clock = Clock()
    limiter = RateLimiter(clock)
    assert limiter.take(("slow", "ann"), 1, 1) is None  # one call a minute: her next in 60 s
    for n in range(9):
        assert limiter.take(("fast", f"client-{n}"), 6000, 2) is None
    clock.now += 1.0  # the fast buckets are full again; hers is not
    assert limiter.take(("fast", "newcomer"), 6000, 2) is None  # past the bound: a prune
    assert limiter.take(("slow", "ann"), 1, 1) is not None  # still limited, not forgotten


def test_a_prune_leaves_room_so_new_clients_do_not_each_scan_every_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gateway_limits, "MAX_BUCKETS", 10)
    monkeypatch.setattr(gateway_limits, "PRUNED_TO", 8)
    limiter = RateLimiter(Clock())
    scans = 0
    prune = limiter._prune

    def counted(now: float) -> None:
        nonlocal scans
        scans += 1
        prune(now)

    monkeypatch.setattr(limiter, "_prune", counted)
    for n in range(40):
        limiter.take(("slow", f"client-{n}"), 1, 1)  # none ever refills: nothing is full
    # 10 fill the bound; each prune makes room for two more clients, not one.
    assert scans == 15


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, 300.0),
        ({"Cache-Control": "public, max-age=60"}, 60.0),
        ({"Cache-Control": 'max-age="45"'}, 45.0),
        ({"Cache-Control": "no-store"}, 0.0),
        ({"Cache-Control": "max-age=60, no-cache"}, 0.0),
        ({"Cache-Control": "max-age=" + "9" * 400}, 300.0),
        ({"Cache-Control": "max-age=-5"}, 300.0),
        ({"Expires": "Sun, 06 Dec 2026 10:01:00 GMT", "Date": "Sun, 06 Dec 2026 10:00:00 GMT"}, 60.0),
        ({"Expires": "0"}, 0.0),
        ({"Expires": "Sun, 06 Dec 2026 09:00:00 GMT", "Date": "Sun, 06 Dec 2026 10:00:00 GMT"}, 0.0),
    ],
)
def test_how_long_an_issuers_keys_may_be_reused(headers: dict[str, str], seconds: float) -> None:
    assert _cacheable_for(httpx.Headers(headers), 300.0) == seconds


def test_a_client_token_is_never_the_user_its_id_spells() -> None:
    assert _who({"sub": "ann", "client_id": "app"}) == "sub:ann"
    # Without a subject, the client the token was issued to: in its own namespace, so a client
    # registered as "ann" cannot open or use ann's sessions.
    assert _who({"client_id": "ann"}) == "client:ann"
    assert _who({"sub": "", "azp": "ann"}) == "client:ann"
    for odd in ({"sub": 7}, {"client_id": ["ann"]}, {"sub": "x" * 256}, {}):
        with pytest.raises(TokenRefused) as refused:
            _who(odd)
        assert refused.value.status == 401
