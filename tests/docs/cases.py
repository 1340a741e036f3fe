"""The tests' parameters: one per page (the convention) and one per page and scene (the commands)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _pytest.mark import ParameterSet

from tests.docs.blocks import Page

# A control plane is what the e2e tests need; a platform what the integration tests need.
_MARKS = {
    "platform": (pytest.mark.integration,),
    "cluster": (pytest.mark.integration, pytest.mark.e2e),
}


def by_page(pages: Sequence[Page]) -> list[ParameterSet]:
    """One parameter per page, its id the page's path under its folder."""
    return [pytest.param(page, id=page.name) for page in pages]


def by_page_and_scene(pages: Sequence[Page]) -> list[ParameterSet]:
    """One parameter per page and scene its blocks use, ids like ``how-to/approval.md:cluster``."""
    return [
        pytest.param(page, scene, id=f"{page.name}:{scene}", marks=_MARKS.get(scene, ()))
        for page in pages
        for scene in page.scenes
    ]
