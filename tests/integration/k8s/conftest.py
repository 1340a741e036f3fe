"""Fixtures for the source tests: asyncio, and no resolved document carried from one test to the next."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bundle_operator.k8s.bundle.sources import clear_cache


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()
