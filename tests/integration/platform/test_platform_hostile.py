"""Hostile requests over real HTTP (issue 15): every error the reference platform sends is
problem+json with a ``code`` that never repeats a header or body value, bodies over the limit get
413 however many arrive at once, and the platform stays healthy.

Raw sockets, because the interesting requests are the ones an HTTP client refuses to send. All
traffic goes to the platform on 127.0.0.1; counts and timeouts are bounded.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest
from platform_harness import TOKEN, PlatformProcess

from bundle_operator.reference_platform.app import MAX_BODY

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PROBLEM_JSON = "application/problem+json"
BIG = MAX_BODY + 1024 * 1024  # ~9 MiB


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def problem(self) -> dict[str, object]:
        assert self.headers.get("content-type", "").startswith(PROBLEM_JSON), (self.status, self.headers)
        data = json.loads(self.body)
        assert isinstance(data, dict) and isinstance(data.get("code"), str) and data["code"]
        assert data["status"] == self.status
        return data


def address(platform: PlatformProcess) -> tuple[str, int]:
    parts = urlsplit(platform.url)
    assert parts.hostname == "127.0.0.1" and parts.port is not None
    return parts.hostname, parts.port


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """The first final answer on the connection (an interim 100 Continue is skipped)."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        status, headers = parse_head(head[:-4])
        if status != 100:
            break
    length = headers.get("content-length")
    body = await reader.readexactly(int(length)) if length is not None else await reader.read()
    return Answer(status, headers, body)


async def exchange(platform: PlatformProcess, head: bytes, body: bytes = b"", limit: float = 15.0) -> Answer:
    """Send one request on a fresh connection and read its answer, while the body is still sent."""
    host, port = address(platform)
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    try:

        async def send() -> None:
            writer.write(head)
            for start in range(0, len(body), 1 << 18):
                writer.write(body[start : start + (1 << 18)])
                await writer.drain()

        sending = asyncio.create_task(send())
        try:
            async with asyncio.timeout(limit):
                answer = await read_answer(reader)
                # A client that sends its whole body before reading must still get the answer.
                await sending
        finally:
            sending.cancel()
        return answer
    finally:
        writer.close()


def request_head(method: str, path: str, headers: dict[str, str] | list[tuple[str, str]]) -> bytes:
    items = headers.items() if isinstance(headers, dict) else headers
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in items]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENTS = "/v1/workspaces/hostile/agents"


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Idempotency-Key", "K" * 10_000),
        ("Authorization", "Bearer " + "S" * 10_000),
        ("If-Match", '"' + "9" * 20_000 + '"'),
        ("X-Anything", "V" * 70_000),
    ],
)
async def test_an_oversized_header_is_a_problem_that_never_echoes_it(
    platform: PlatformProcess, header: str, value: str
) -> None:
    headers = {**AUTH, "Content-Type": "application/json", "Content-Length": "2"}
    headers[header] = value
    answer = await exchange(platform, request_head("POST", AGENTS, headers), b"{}")
    problem = answer.problem()
    assert answer.status == 431 and problem["code"] == "request_header_too_large"
    assert value[1:40].encode() not in answer.body


async def test_an_oversized_request_line_is_a_problem_that_never_echoes_it(platform: PlatformProcess) -> None:
    answer = await exchange(platform, request_head("GET", "/v1/" + "u" * 10_000, AUTH))
    assert answer.status == 431 and answer.problem()["code"] == "request_header_too_large"
    assert b"uuuuuuuu" not in answer.body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"BLAH\r\n\r\n",
        b"G@T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: secretvalue\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz-secretvalue\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(200)) + b"\r\n",
    ],
)
async def test_requests_that_are_not_http_get_problem_json(
    platform: PlatformProcess, request_bytes: bytes
) -> None:
    answer = await exchange(platform, request_bytes)
    problem = answer.problem()
    assert answer.status == 400 and problem["code"] == "invalid_http"
    assert b"secretvalue" not in answer.body and b"BLAH" not in answer.body


@pytest.mark.parametrize("path", [AGENTS, "/no/such/route"])
async def test_an_unknown_expectation_is_a_problem_that_never_echoes_it(
    platform: PlatformProcess, path: str
) -> None:
    answer = await exchange(platform, request_head("GET", path, {**AUTH, "Expect": "secretvalue-42"}))
    assert answer.status == 417 and answer.problem()["code"] == "expectation_failed"
    assert b"secretvalue" not in answer.body


async def test_a_declared_body_over_the_limit_is_refused_before_100_continue(
    platform: PlatformProcess,
) -> None:
    headers = {
        **AUTH,
        "Content-Type": "application/json",
        "Content-Length": str(BIG),
        "Expect": "100-continue",
    }
    started = time.monotonic()
    answer = await exchange(platform, request_head("POST", AGENTS, headers))  # the body is never sent
    assert answer.status == 413 and answer.problem()["code"] == "payload_too_large"
    assert time.monotonic() - started < 5


async def test_bodies_over_the_limit_get_413_under_concurrent_load(platform: PlatformProcess) -> None:
    body = b'{"name": "' + b"x" * BIG + b'"}'

    async def one(index: int) -> Answer:
        if index % 2:
            chunked = b"".join(
                b"%x\r\n" % len(body[i : i + 65536]) + body[i : i + 65536] + b"\r\n"
                for i in range(0, len(body), 65536)
            )
            headers = {**AUTH, "Content-Type": "application/json", "Transfer-Encoding": "chunked"}
            return await exchange(platform, request_head("POST", AGENTS, headers), chunked + b"0\r\n\r\n")
        headers = {**AUTH, "Content-Type": "application/json", "Content-Length": str(len(body))}
        return await exchange(platform, request_head("POST", AGENTS, headers), body)

    answers = await asyncio.gather(*(one(i) for i in range(16)))
    assert [a.status for a in answers] == [413] * 16
    assert {a.problem()["code"] for a in answers} == {"payload_too_large"}
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{platform.url}/healthz", timeout=5)).status_code == 200


async def test_routing_errors_do_not_repeat_the_path_or_method(platform: PlatformProcess) -> None:
    answer = await exchange(platform, request_head("GET", "/secretvalue/x", AUTH))
    assert answer.status == 404 and answer.problem()["code"] == "not_found"
    assert b"secretvalue" not in answer.body
    answer = await exchange(platform, request_head("PUT", AGENTS, AUTH))
    assert answer.status == 405 and answer.problem()["code"] == "method_not_allowed"
    assert b"PUT" not in answer.body and b"/v1" not in answer.body and "allow" in answer.headers


# Random requests ---------------------------------------------------------------------------------

ROUTES = [
    "/healthz",
    "/v1/workspaces/{ws}/agents",
    "/v1/workspaces/{ws}/agents/{id}",
    "/v1/workspaces/{ws}/mcp-servers",
    "/v1/workspaces/{ws}/skills/{id}",
    "/v1/workspaces/{ws}/triggers",
    "/v1/workspaces/{ws}/channels/{id}",
    "/v1/workspaces/{ws}/secrets",
    "/v1/workspaces/{ws}/gateway-bundles/{id}/members/{id}",
    "/v1/workspaces/{ws}/idempotency-keys/{id}",
    "/_admin/faults",
    "/{id}",
    "/v1/{id}/{id}",
]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "FOO", "G@T", "get"]


def random_request(rng: random.Random, marker: str) -> tuple[bytes, bytes, int]:
    """One request (head, body) and the index of its kind; ``marker`` is in every value sent."""
    ws = rng.choice(["fz", "FZ", "a" * 70, "fz-1", "%00", "..", "%ff%fe"])
    path = rng.choice(ROUTES).replace("{ws}", ws)
    while "{id}" in path:
        path = path.replace(
            "{id}", rng.choice(["x", "agt_1", "%2e%2e", "a" * 300, "%ff", "%00x", marker, "é"]), 1
        )
    if rng.random() < 0.1:
        path += "?" + rng.choice(["limit=0", "limit=99999999999999999999", f"cursor={marker}", "archived=x"])
    headers: list[tuple[str, str]] = []
    auth = rng.random()
    if auth < 0.75:
        headers.append(("Authorization", f"Bearer {TOKEN}"))
    elif auth < 0.85:
        headers.append(("Authorization", f"Bearer {marker}"))
    elif auth < 0.9:
        headers.append(("Authorization", f"Bearer {marker}" + "s" * 9000))
    choices = {
        "Idempotency-Key": [
            marker,
            "",
            marker + " x",
            marker + "k" * 300,
            marker + "k" * 9000,
            marker + "\x7f",
        ],
        "If-Match": ['"3"', "*", marker, f'"{marker}"', '"' + "9" * 30 + '"', "W/" + marker + "x" * 9000],
        "Content-Type": ["application/json", "text/plain", marker, "application/json; charset=" + marker],
        "Expect": ["100-continue", marker],
        "Accept": ["text/html", "*/*"],
    }
    for name, values in choices.items():
        if rng.random() < 0.3:
            headers.append((name, rng.choice(values)))
    kind = rng.randrange(7)
    body = b""
    if kind == 0:
        body = json.dumps({"name": marker, "key": marker, "config": {"x": [marker] * 3}}).encode()
    elif kind == 1:
        body = json.dumps(rng.choice([[marker], marker, 3, None, {"a": {"b": marker}}])).encode()
    elif kind == 2:
        body = (marker + '{"').encode() + bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
    elif kind == 3:
        body = b'{"a":' * 200 + json.dumps(marker).encode() + b"}" * 200
    elif kind == 4:
        body = json.dumps({"name": marker + "\ud800", "timezone": "/".join(["a"] * 400)}).encode()
    if body or rng.random() < 0.5:
        headers.append(("Content-Length", str(len(body))))
    method = rng.choice(METHODS)
    return request_head(method, path, headers), body, kind


async def test_random_requests_never_get_5xx_or_raw_errors_and_never_echo_values(
    platform: PlatformProcess,
) -> None:
    rng = random.Random(15)
    marker = f"zqecho{rng.getrandbits(32):08x}"
    deadline = time.monotonic() + 20
    requests = [random_request(rng, marker) for _ in range(300)]
    big = b'{"name":"' + marker.encode() + b"x" * BIG + b'"}'
    requests += [
        (request_head("POST", AGENTS, {**AUTH, "Content-Length": str(len(big))}), big, -1) for _ in range(4)
    ]
    rng.shuffle(requests)
    gate = asyncio.Semaphore(8)
    failures: list[str] = []

    async def one(head: bytes, body: bytes) -> None:
        async with gate:
            assert time.monotonic() < deadline, "the random requests took longer than 20 s"
            try:
                answer = await exchange(platform, head, body, limit=10)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                failures.append(f"no answer ({type(exc).__name__}): {head[:120]!r}")
                return
        described = f"{head[:120]!r} -> {answer.status} {answer.body[:200]!r}"
        if answer.status >= 500:
            failures.append("5xx: " + described)
        elif answer.status >= 400:
            if head.startswith(b"HEAD "):
                return
            try:
                answer.problem()
            except (AssertionError, ValueError):
                failures.append("not problem+json: " + described)
            if marker.encode() in answer.body:
                failures.append("echoes a value: " + described)

    await asyncio.gather(*(one(head, body) for head, body, _ in requests))
    assert not failures, "\n".join(failures[:20])
    async with httpx.AsyncClient(timeout=5) as client:
        health = await client.get(f"{platform.url}/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        assert (await client.get(f"{platform.url}{AGENTS}", headers=AUTH)).status_code == 200
