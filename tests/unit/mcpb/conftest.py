"""Fixtures for the .mcpb tests: write archive bytes to a file and inspect it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.mcpb import Inspection, inflate, inspect_file

Inspect = Callable[..., Inspection]


@pytest.fixture(autouse=True, params=sorted({inflate.CODEC.name, inflate.ZLIB.name}))
def codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> inflate.Codec:
    """Every archive test runs with each inflate codec: the accelerated one and zlib's fallback."""
    chosen = inflate.CODEC if request.param == inflate.CODEC.name else inflate.ZLIB
    monkeypatch.setattr(inflate, "CODEC", chosen)
    return chosen


@pytest.fixture
def inspect_bytes(tmp_path: Path) -> Inspect:
    """Write ``data`` to a fresh .mcpb file and inspect it (on linux unless told otherwise)."""
    counter = iter(range(1_000_000))

    def run(data: bytes, **kwargs: Any) -> Inspection:
        path = tmp_path / f"archive-{next(counter)}.mcpb"
        path.write_bytes(data)
        kwargs.setdefault("platform", "linux")
        return inspect_file(path, **kwargs)

    return run
