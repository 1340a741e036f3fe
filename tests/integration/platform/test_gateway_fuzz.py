"""Fuzzing the gateway's routes (issue 45): any method, credentials, MCP headers and body, sent to an
ApiKey endpoint, an OAuth endpoint, the catalogue, the protected-resource metadata and a name that is
no endpoint. Every answer is below 500, framed so the next request on the connection is read whole,
of a JSON (or event-stream) type, and bounded in size; the platform logs no traceback and stays
healthy. The platform runs as a subprocess; hypothesis runs in a thread so that the members, served
by the test's own event loop, keep answering the tool calls it sends."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from platform_builders import key
from platform_harness import TOKEN, PlatformProcess
from test_gateway_mcp import endpoint
from test_gateway_oauth import INITIALIZE, gateway, metadata_url, oauth_endpoint
from tests.mcp_members import Members
from tests.oauth_issuer import StubIssuer

from bundle_operator.platform.client import PlatformClient

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

EXAMPLES = 300
# What an answer may weigh beyond twice the request: listings of a two-member bundle, an error.
ANSWER_ALLOWANCE = 64 * 1024
ANSWER_TYPES = ("application/json", "application/problem+json", "text/event-stream")
METHODS = ("GET", "POST", "DELETE", "HEAD", "PUT", "PATCH", "OPTIONS")
MCP_METHODS = (
    "initialize",
    "notifications/initialized",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "no/such/method",
)
# Header values are printable ASCII with no space at either end: what h11 puts on the wire at all.
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=15,
)


@dataclass(frozen=True)
class Targets:
    """Where requests go, and the credentials that pass each door."""

    key_url: str
    api_key: str
    oauth_url: str
    token: str
    base: str

    def urls(self) -> list[str]:
        return [
            self.key_url,
            self.oauth_url,
            self.oauth_url.removesuffix("/mcp") + "/catalog",
            metadata_url(self.oauth_url),
            f"{self.base}/mcp/no-such-endpoint/mcp",
        ]


def messages(targets: Targets) -> st.SearchStrategy[Any]:
    """JSON-RPC requests and notifications with any params, ids of any type, and batches of them."""
    tool_names = st.sampled_from(["weather__forecast", "notes__list_notes", "x" * 100_000]) | st.text(
        max_size=20
    )
    params = st.one_of(
        json_values,
        st.fixed_dictionaries({"name": tool_names, "arguments": json_values}),
        st.fixed_dictionaries(
            {
                "protocolVersion": st.sampled_from(["2025-06-18", "2026-07-28", "1999-01-01"]) | HEADER_TEXT,
                "capabilities": json_values,
                "clientInfo": json_values,
            }
        ),
        st.fixed_dictionaries({"uri": st.text(max_size=50), "name": st.text(max_size=20)}),
    )
    one = st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values, "method": st.sampled_from(MCP_METHODS)},
        optional={"id": json_values, "params": params},
    )
    return one | st.lists(one, max_size=3) | json_values


def _b64(data: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def forged_tokens() -> st.SearchStrategy[str]:
    """JWTs whose header and claims hold any JSON: what a token is before its signature verifies."""
    header = st.dictionaries(
        st.sampled_from(["alg", "kid", "typ", "crit", "jku", "x5u"]),
        json_values | st.just("RS256"),
        max_size=4,
    )
    claims = st.dictionaries(
        st.sampled_from(["iss", "aud", "sub", "exp", "nbf", "iat", "scope", "scp"]), json_values, max_size=6
    )
    return st.builds(lambda h, c: f"Bearer {_b64(h)}.{_b64(c)}.c2ln", header, claims)


@st.composite
def hostile_requests(draw: st.DrawFn, targets: Targets) -> tuple[str, str, dict[str, str], bytes]:
    url = draw(st.sampled_from(targets.urls()))
    method = draw(st.sampled_from(METHODS))
    auth = draw(
        st.sampled_from(
            [
                None,
                f"Bearer {targets.api_key}",
                f"Bearer {targets.token}",
                "Bearer",
                "Basic dXNlcjpwYXNz",
                "Bearer " + "A" * 8_000,
                "Bearer e30.e30.e30",
            ]
        )
        | HEADER_TEXT
        | forged_tokens()
    )
    headers: dict[str, str] = {}
    if auth is not None:
        headers["Authorization"] = auth
    for name, values in (
        ("Accept", ["application/json, text/event-stream", "application/json", "text/html", "*/*"]),
        ("Content-Type", ["application/json", "text/plain", "application/json; charset=latin-1"]),
        ("MCP-Protocol-Version", ["2025-06-18", "2026-07-28", "2025-03-26"]),
        ("Mcp-Session-Id", ["0" * 32, "x" * 4_000]),
        ("Origin", ["http://evil.example.com", "null"]),
    ):
        value = draw(st.none() | st.sampled_from(values) | HEADER_TEXT)
        if value is not None:
            headers[name] = value
    body = draw(
        st.just(b"")
        | st.binary(max_size=200)
        | messages(targets).map(lambda m: json.dumps(m).encode())
        | st.just(b"[" * 5_000 + b"]" * 5_000)
    )
    return method, url, headers, body


def _check(client: httpx.Client, request: tuple[str, str, dict[str, str], bytes]) -> None:
    method, url, headers, body = request
    with client.stream(method, url, headers=headers, content=body or None) as answer:
        content_type = answer.headers.get("content-type", "").split(";")[0].strip().lower()
        assert answer.status_code < 500, (
            method,
            url,
            headers.get("Authorization", "")[:20],
            answer.status_code,
        )
        if method == "HEAD" or answer.status_code in (204, 304):
            assert answer.read() == b""
            return
        if content_type == "text/event-stream":
            return  # a stream the client asked for: it stays open, and is left unread
        payload = b""
        for chunk in answer.iter_bytes():
            payload += chunk
            assert len(payload) <= ANSWER_ALLOWANCE + 2 * len(body), (method, url, len(payload))
        if payload or answer.status_code >= 400:
            assert content_type in ANSWER_TYPES, (method, url, answer.status_code, content_type)


def _fuzz(targets: Targets) -> None:
    # One kept-alive connection for every request: a badly framed answer would corrupt the next.
    with httpx.Client(
        timeout=httpx.Timeout(20.0, read=5.0), limits=httpx.Limits(max_connections=1)
    ) as client:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            database=None,
        )
        @given(request=hostile_requests(targets))
        # What the campaign of issue 45 found, kept as examples the fuzzing starts from.
        @example(request=("HEAD", targets.key_url, {"Authorization": f"Bearer {targets.api_key}"}, b""))
        @example(request=("HEAD", targets.oauth_url, {"Authorization": f"Bearer {targets.token}"}, b""))
        @example(
            request=(
                "POST",
                targets.oauth_url,
                {"Authorization": f"Bearer {_b64({'alg': ['RS256'], 'kid': 'k'})}.{_b64({})}.c2ln"},
                json.dumps(INITIALIZE).encode(),
            )
        )
        def run(request: tuple[str, str, dict[str, str], bytes]) -> None:
            _check(client, request)

        run()


async def test_the_gateways_routes_hold_against_hostile_requests(
    issuer_platform: PlatformProcess, members: Members, issuer: StubIssuer
) -> None:
    async with PlatformClient(issuer_platform.url, token=TOKEN, timeout=10.0) as api:
        ws = f"fz-{key()[:8]}"
        bundle_id = await gateway(api, ws, members)
        _, key_url, api_key = await endpoint(api, ws, bundle_id)
        _, oauth_url = await oauth_endpoint(api, ws, bundle_id, issuer)
    targets = Targets(
        key_url, api_key, oauth_url, issuer.token("ann", audience=oauth_url), issuer_platform.url
    )
    offset = len(issuer_platform.log.read_text())
    await asyncio.to_thread(_fuzz, targets)
    log = issuer_platform.log.read_text()[offset:]
    assert "Traceback" not in log, log[-3000:]
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(f"{issuer_platform.url}/healthz")).status_code == 200
