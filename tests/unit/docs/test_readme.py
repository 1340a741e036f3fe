"""The README is a landing page: short, linking into the site, and every command it shows is one a
docs page runs (the two commands themselves aside)."""

from __future__ import annotations

from pathlib import Path

from tests.docs.blocks import fenced_blocks, read_pages

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
# `make test` is the suite itself; `make run` runs on the getting-started page as RUN_ONCE=1 make run.
THE_TWO_COMMANDS = "make run     # the main job, on the embedded defaults\nmake test"


def test_the_readme_is_a_landing_page_of_at_most_150_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_every_command_block_of_the_readme_is_run_on_a_docs_page() -> None:
    shown = ["\n".join(b.body) for b in fenced_blocks(README.read_text(encoding="utf-8"), "README.md")]
    assert shown and shown[0].startswith(THE_TWO_COMMANDS)
    ran = {"\n".join(block.body) for page in read_pages(ROOT / "docs") for block in page.blocks}
    missing = [body for body in shown[1:] if body not in ran]
    assert not missing, f"README blocks that no docs page runs: {missing}"


def test_the_readme_links_only_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    linked = [part.split(")", 1)[0].split("#", 1)[0] for part in text.split("](")[1:]]
    local = [link for link in linked if not link.startswith(("http://", "https://"))]
    assert len(local) >= 20, "the README links into the site"
    assert [link for link in local if not (ROOT / link).is_file()] == []
