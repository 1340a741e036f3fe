"""Fixtures for the platform tests: the reference platform as a real subprocess on loopback,
a GitHub stand-in serving SKILL.md files, and clients pointed at them."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from platform_harness import FAST_RETRY, TOKEN, PlatformProcess, start_platform

from bundle_operator.platform.client import PlatformClient


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class GitHubStub:
    """Serves ``files`` (path -> SKILL.md text) like raw.githubusercontent.com; other paths 404."""

    url: str
    files: dict[str, str] = field(default_factory=dict)
    fail_with: int | None = None


@pytest.fixture(scope="session")
def github() -> Iterator[GitHubStub]:
    stub = GitHubStub(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if stub.fail_with is not None:
                self.send_response(stub.fail_with)
                self.end_headers()
                return
            body = stub.files.get(self.path)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stub
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory, github: GitHubStub) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("platform") / "platform.db"
    running = start_platform(
        db, "--token", TOKEN, "--enable-fault-injection", "--github-base-url", github.url
    )
    yield running
    running.stop()


@pytest.fixture
def ws() -> str:
    """A fresh workspace per test, so tests never see each other's entities."""
    return f"t-{uuid.uuid4().hex[:16]}"


@pytest.fixture(autouse=True)
def clear_faults(platform: PlatformProcess) -> Iterator[None]:
    """Faults are server-wide: none armed by one test may reach the next."""
    yield
    httpx.delete(
        f"{platform.url}/_admin/faults", headers={"Authorization": f"Bearer {TOKEN}"}
    ).raise_for_status()


@pytest.fixture
async def client(platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(platform.url, token=TOKEN, timeout=10.0, retry=FAST_RETRY) as c:
        yield c
