"""The generated reference pages in docs/ are what the code generates now (`make docs-reference`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle_operator.docgen import all_pages

DOCS = Path(__file__).resolve().parents[3] / "docs"
PAGES = all_pages()


@pytest.mark.parametrize("path", sorted(PAGES))
def test_generated_page_is_current(path: str) -> None:
    committed = DOCS / path
    assert committed.is_file(), f"docs/{path} is missing: run `make docs-reference`"
    assert committed.read_text(encoding="utf-8") == PAGES[path], (
        f"docs/{path} is stale: run `make docs-reference`"
    )
