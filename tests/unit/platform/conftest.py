"""Shared by the platform layer's unit tests: anyio on asyncio, and a clock the test moves."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """A monotonic clock that stands still until the test sets ``now``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
