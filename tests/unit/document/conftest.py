"""Fixtures for the document tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.document.builders import BASE


@pytest.fixture
def doc() -> dict[str, Any]:
    """A fresh copy of a valid bundle document, to mutate per test."""
    return copy.deepcopy(BASE)
