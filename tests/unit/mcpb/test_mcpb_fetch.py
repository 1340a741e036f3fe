"""The safe https fetcher, against an HTTPS server on 127.0.0.1 that each test allows explicitly."""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import ssl
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from bundle_operator.fetch import Fetched, FetchRefused, fetch_to_file, is_public_address, resolve_checked
from tests.tls import QuietHandler, https_server, throwaway_tls

PAYLOAD = os.urandom(300_000)
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()
LOOPBACK = ["127.0.0.1/32"]

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Server:
    port: int
    ca: ssl.SSLContext
    hits: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    peers: list[int] = field(default_factory=list)  # the client's port: one per connection

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tls = throwaway_tls(tmp_path_factory.mktemp("tls"))
    state: dict[str, Server] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            srv = state["server"]
            srv.hits.append(self.path)
            srv.hosts.append(self.headers.get("Host", ""))
            srv.peers.append(self.client_address[1])
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path == "/file":
                self.answer(200, PAYLOAD)
            elif parts.path == "/chunked":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(PAYLOAD), 65536):
                    chunk = PAYLOAD[i : i + 65536]
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            elif parts.path == "/big":
                self.send_response(200)
                self.send_header("Content-Length", str(10 * 1024 * 1024 * 1024))
                self.end_headers()
            elif parts.path == "/redirect":
                self.answer(302, headers={"Location": query["to"][0]})
            elif parts.path == "/loop":
                self.answer(307, headers={"Location": "/loop"})
            else:
                self.answer(404, b"no")

    with https_server(Handler, tls) as port:
        state["server"] = Server(port=port, ca=tls.client_context())
        yield state["server"]


async def fetch_from(
    server: Server, url: str, dest: Path, max_bytes: int, sha256: str = PAYLOAD_SHA, **options: Any
) -> Fetched:
    """Fetch from the test server as the operator would: loopback allowed, its CA trusted."""
    return await fetch_to_file(
        url,
        expected_sha256=sha256,
        max_bytes=max_bytes,
        dest_dir=dest,
        allow_networks=LOOPBACK,
        verify=server.ca,
        **options,
    )


def _left_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_a_file_is_downloaded_checked_and_private(server: Server, tmp_path: Path) -> None:
    got = await fetch_from(server, server.url("/file?token=abc"), tmp_path, 1_000_000)
    assert got.path.parent == tmp_path
    assert got.path.read_bytes() == PAYLOAD
    assert (got.sha256, got.size) == (PAYLOAD_SHA, len(PAYLOAD))
    assert stat.S_IMODE(got.path.stat().st_mode) == 0o600
    assert "token" not in got.url


async def test_a_checksum_mismatch_leaves_nothing(server: Server, tmp_path: Path) -> None:
    with pytest.raises(FetchRefused) as exc:
        await fetch_from(server, server.url("/file"), tmp_path, 1_000_000, sha256="sha256:" + "0" * 64)
    assert exc.value.code == "checksum_mismatch"
    assert _left_in(tmp_path) == []


@pytest.mark.parametrize("path", ["/big", "/chunked", "/file"])
async def test_more_than_the_cap_is_refused(server: Server, tmp_path: Path, path: str) -> None:
    with pytest.raises(FetchRefused) as exc:
        await fetch_from(server, server.url(path), tmp_path, 100_000)
    assert exc.value.code == "too_large"
    assert _left_in(tmp_path) == []


async def test_a_redirect_to_an_allowed_address_is_followed(server: Server, tmp_path: Path) -> None:
    got = await fetch_from(server, server.url("/redirect?to=/file"), tmp_path, 1_000_000)
    assert got.path.read_bytes() == PAYLOAD


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("https://127.0.0.2:{port}/file", "address_not_public"),  # loopback, but not the allowed one
        ("http://127.0.0.1:{port}/file", "not_https"),
        ("https://user:pw@127.0.0.1:{port}/file", "credentials_in_url"),
    ],
)
async def test_each_redirect_is_checked_again(server: Server, tmp_path: Path, target: str, code: str) -> None:
    to = target.format(port=server.port)
    before = len(server.hits)
    with pytest.raises(FetchRefused) as exc:
        await fetch_from(server, server.url("/redirect?to=" + to), tmp_path, 1_000_000)
    assert exc.value.code == code
    assert len(server.hits) == before + 1  # the redirect itself, nothing after it
    assert _left_in(tmp_path) == []


async def test_endless_redirects_stop(server: Server, tmp_path: Path) -> None:
    with pytest.raises(FetchRefused) as exc:
        await fetch_from(server, server.url("/loop"), tmp_path, 1_000, max_redirects=3)
    assert exc.value.code == "too_many_redirects"


async def test_loopback_is_refused_unless_allowed(server: Server, tmp_path: Path) -> None:
    before = len(server.hits)
    for url in (server.url("/file"), server.url("/file", host="localhost")):
        with pytest.raises(FetchRefused) as exc:
            await fetch_to_file(
                url, expected_sha256=PAYLOAD_SHA, max_bytes=1_000_000, dest_dir=tmp_path, verify=server.ca
            )
        assert exc.value.code == "address_not_public"
    assert len(server.hits) == before  # refused before any connection


async def test_a_name_is_resolved_checked_and_kept_for_tls_and_host(server: Server, tmp_path: Path) -> None:
    got = await fetch_to_file(
        server.url("/file", host="localhost"),
        expected_sha256=PAYLOAD_SHA,
        max_bytes=1_000_000,
        dest_dir=tmp_path,
        allow_networks=[*LOOPBACK, "::1/128"],
        verify=server.ca,
    )
    assert got.path.read_bytes() == PAYLOAD
    assert server.hosts[-1] == f"localhost:{server.port}"


async def test_each_redirect_hop_gets_its_own_connection(server: Server, tmp_path: Path) -> None:
    # Both names are this server's address: a pooled connection verified for 'localhost' must not
    # carry the request for another host (requests are sent to the checked IP, so the pool would).
    before = len(server.peers)
    got = await fetch_to_file(
        server.url("/redirect?to=" + server.url("/file")).replace("127.0.0.1", "localhost", 1),
        expected_sha256=PAYLOAD_SHA,
        max_bytes=1_000_000,
        dest_dir=tmp_path,
        allow_networks=[*LOOPBACK, "::1/128"],
        verify=server.ca,
    )
    assert got.path.read_bytes() == PAYLOAD
    first, second = server.peers[before:]
    assert first != second
    assert server.hosts[-2:] == [f"localhost:{server.port}", f"127.0.0.1:{server.port}"]


async def test_an_international_name_goes_out_in_its_ascii_form(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundle_operator import fetch

    async def dns(host: str, port: int, **kwargs: object) -> list[tuple[object, ...]]:
        assert host == "xn--bcher-kva.example"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(fetch.anyio, "getaddrinfo", dns)
    got = await fetch_to_file(
        server.url("/file", host="bücher.example"),
        expected_sha256=PAYLOAD_SHA,
        max_bytes=1_000_000,
        dest_dir=tmp_path,
        allow_networks=LOOPBACK,
        verify=False,  # the test certificate does not name the host; what is checked is the Host header
    )
    assert got.path.read_bytes() == PAYLOAD
    assert server.hosts[-1] == f"xn--bcher-kva.example:{server.port}"


async def test_tls_is_verified(server: Server, tmp_path: Path) -> None:
    with pytest.raises(FetchRefused) as exc:
        await fetch_to_file(
            server.url("/file"), expected_sha256=PAYLOAD_SHA, max_bytes=1_000_000, allow_networks=LOOPBACK
        )
    assert exc.value.code == "tls_untrusted"
    assert "TLS certificate is not trusted" in exc.value.reason


async def test_plain_http_and_bad_inputs_are_refused(tmp_path: Path) -> None:
    cases = [
        ("http://example.org/x.mcpb", PAYLOAD_SHA, "not_https"),
        ("https://example.org/x.mcpb", "abc", "bad_checksum"),
    ]
    for url, sha, code in cases:
        with pytest.raises(FetchRefused) as exc:
            await fetch_to_file(url, expected_sha256=sha, max_bytes=10, dest_dir=tmp_path)
        assert exc.value.code == code


async def test_an_error_status_is_refused(server: Server, tmp_path: Path) -> None:
    with pytest.raises(FetchRefused) as exc:
        await fetch_from(server, server.url("/missing"), tmp_path, 1_000)
    assert (exc.value.code, exc.value.reason) == ("http_status", f"{server.url('/missing')} answered 404")


async def test_names_with_private_answers_are_refused_before_connecting() -> None:
    with pytest.raises(FetchRefused) as exc:
        await resolve_checked(httpx.URL("https://localhost/x"), [])
    assert exc.value.code == "address_not_public"


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
        ("::ffff:8.8.8.8", True),
        ("10.0.0.1", False),
        ("172.16.5.4", False),
        ("192.168.1.1", False),
        ("127.0.0.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("255.255.255.255", False),
        ("192.0.2.1", False),
        ("198.18.0.1", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("fec0::1", False),  # site-local, deprecated: not public whatever Python's tables say
        ("fec0::a9fe:a9fe", False),
        ("2001:db8::1", False),
        ("ff02::1", False),
        ("::ffff:10.0.0.1", False),
        ("::ffff:127.0.0.1", False),
        ("2002:0a00:0001::1", False),  # 6to4 wrapping 10.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 wrapping 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False),  # Teredo with a private client
    ],
)
def test_which_addresses_count_as_public(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public
