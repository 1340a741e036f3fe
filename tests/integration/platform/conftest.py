"""Fixtures for the platform tests: the reference platform as a real subprocess on loopback,
a GitHub stand-in serving SKILL.md files, and clients pointed at them."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from platform_harness import FAST_RETRY, TOKEN, GitHubStub, PlatformProcess, github_stub, start_platform

from bundle_operator.platform.client import PlatformClient

# This folder is on sys.path as itself (no __init__.py); the members live in the tests package.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.mcp_members import Members, running_members
from tests.oauth_issuer import StubIssuer, stub_issuer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def github() -> Iterator[GitHubStub]:
    with github_stub() as stub:
        yield stub


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


@pytest.fixture
async def members() -> AsyncIterator[Members]:
    """The weather and notes MCP servers of tests/mcp_members.py, in the test's own loop."""
    async with running_members() as running:
        yield running


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubIssuer]:
    """An OAuth issuer with RSA, EC and Ed25519 keys over https (tests/oauth_issuer.py)."""
    with stub_issuer(tmp_path_factory.mktemp("issuer")) as running:
        yield running


@pytest.fixture(scope="module")
def issuer_platform(
    tmp_path_factory: pytest.TempPathFactory, issuer: StubIssuer
) -> Iterator[PlatformProcess]:
    """A platform of the module's own that trusts the issuer's CA, with quick rediscovery."""
    db = tmp_path_factory.mktemp("oauth") / "platform.db"
    running = start_platform(
        db,
        "--token",
        TOKEN,
        "--discovery-interval",
        "2",
        "--allow-private-issuers",
        env={"SSL_CERT_FILE": str(issuer.tls.ca_file)},
    )
    yield running
    running.stop()
