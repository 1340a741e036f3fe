"""Fixtures for the engine tests: the reference platform over real HTTP and a client per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.retry import RetryPolicy
from tests.integration.platform.platform_harness import PlatformProcess, github_stub, start_platform

TOKEN = "engine-test-token"
FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05, max_retry_after=1.0)
# What the GitHub stand-in serves: the SKILL.md files the examples' GitHub skills point at.
GITHUB_FILES = {
    "/acme-labs/agent-skills/main/skills/release-notes/SKILL.md": (
        "---\nname: release-notes\ndescription: Release notes from merged pull requests.\n---\n# Notes\n"
    ),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def github_url() -> Iterator[str]:
    """A loopback stand-in for raw GitHub content."""
    with github_stub(GITHUB_FILES) as stub:
        yield stub.url


@pytest.fixture(scope="session")
def engine_platform(tmp_path_factory: pytest.TempPathFactory, github_url: str) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("engine-platform") / "platform.db"
    running = start_platform(
        db, "--token", TOKEN, "--enable-fault-injection", "--github-base-url", github_url
    )
    yield running
    running.stop()


@pytest.fixture
def ws() -> str:
    """A fresh workspace per test."""
    return f"e-{uuid.uuid4().hex[:16]}"


@pytest.fixture
async def client(engine_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(engine_platform.url, token=TOKEN, retry=FAST_RETRY) as c:
        yield c
