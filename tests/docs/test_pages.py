"""Every command the pages of docs/ show runs in its scene and prints what the page shows."""

from __future__ import annotations

import pytest

from tests.docs.blocks import Page, read_pages
from tests.docs.cases import by_page, by_page_and_scene
from tests.docs.runner import run_blocks
from tests.docs.scenes import ROOT, OpenScene

PAGES = read_pages(ROOT / "docs")


@pytest.mark.parametrize("page", by_page(PAGES))
def test_page_follows_the_command_convention(page: Page) -> None:
    found = page.problems(ROOT, "docs")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("page", "scene"), by_page_and_scene(PAGES))
def test_page_commands_run_as_shown(page: Page, scene: str, open_scene: OpenScene) -> None:
    failure = run_blocks(page.runnable(scene), open_scene(scene, page.name))
    assert failure is None, failure
