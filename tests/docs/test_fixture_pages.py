"""The runner on pages of its own (tests/docs/fixtures/): every scene and both block kinds pass,
and a page whose output, exit code or checkout writes differ from what it shows fails, naming
the page line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import Page, page_of, read_pages
from tests.docs.cases import by_page, by_page_and_scene
from tests.docs.runner import run_blocks
from tests.docs.scenes import ROOT, OpenScene

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURES_DIR = FIXTURES.relative_to(ROOT).as_posix()
PAGES = read_pages(FIXTURES)


def test_the_fixture_pages_use_every_scene_and_both_kinds() -> None:
    scenes = {scene for page in PAGES for scene in page.scenes}
    kinds = {block.lang for page in PAGES for block in page.blocks}
    assert scenes == {"offline", "platform", "cluster", "checkout"}
    assert {"sh", "console"} <= kinds


@pytest.mark.parametrize("page", by_page(PAGES))
def test_fixture_page_follows_the_command_convention(page: Page) -> None:
    found = page.problems(ROOT, FIXTURES_DIR)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("page", "scene"), by_page_and_scene(PAGES))
def test_fixture_page_commands_run_as_shown(page: Page, scene: str, open_scene: OpenScene) -> None:
    failure = run_blocks(page.runnable(scene), open_scene(scene, page.name))
    assert failure is None, failure


def test_the_tested_by_block_runs_here(open_scene: OpenScene) -> None:
    """tests/docs/fixtures/tested-by.md names this test for its block: it runs the same lines."""
    page = next(page for page in PAGES if page.name == "tested-by.md")
    (block,) = [block for block in page.blocks if block.tested_by]
    offline_copy = page_of(page.name, "```sh\n" + "\n".join(block.body) + "\n```\n")
    assert run_blocks(offline_copy.runnable("offline"), open_scene("offline", page.name)) is None


def test_a_changed_output_line_fails_naming_its_page_line(open_scene: OpenScene) -> None:
    text = (FIXTURES / "offline.md").read_text()
    changed = text.replace("examples/building-office.yaml in acme", "examples/building-office.yaml in globex")
    assert changed != text
    page = page_of("offline.md", changed)
    shown_at = changed.splitlines().index("examples/building-office.yaml in globex") + 1
    failure = run_blocks(page.runnable("offline"), open_scene("offline", page.name))
    assert failure is not None
    assert f"offline.md:{shown_at}" in failure
    assert "-examples/building-office.yaml in globex" in failure
    assert "+examples/building-office.yaml in acme" in failure


def test_a_failing_command_fails_naming_its_page_line(open_scene: OpenScene) -> None:
    page = page_of(
        "broken.md", "# Broken\n\n```sh\ntrue\nbundlectl analyze examples/no-such.yaml\necho never\n```\n"
    )
    failure = run_blocks(page.runnable("offline"), open_scene("offline", page.name))
    assert failure is not None
    assert failure.startswith("[scene offline] broken.md:5: exited ")
    assert "no-such.yaml" in failure
    assert "never" not in failure


def test_a_hanging_block_is_stopped_at_its_timeout(open_scene: OpenScene) -> None:
    page = page_of("slow.md", "```console\n$ sleep 30\n```\n")
    failure = run_blocks(page.runnable("offline"), open_scene("offline", page.name), block_timeout=1.0)
    assert failure is not None
    assert "slow.md:2: timed out" in failure


def test_a_checkout_block_that_writes_outside_tmp_fails(open_scene: OpenScene) -> None:
    stray = ROOT / "docs-runner-stray.txt"
    page = page_of("stray.md", f"<!-- scene: checkout -->\n```sh\necho x > {stray.name}\n```\n")
    try:
        failure = run_blocks(page.runnable("checkout"), open_scene("checkout", page.name))
    finally:
        stray.unlink(missing_ok=True)
    assert failure is not None
    assert "stray.md:3: a checkout block may write only under tmp/" in failure
    assert stray.name in failure
