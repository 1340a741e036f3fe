"""The site's reference pages (docs/reference/), generated from the code: each module of this package
that defines ``pages()`` contributes some; ``python -m bundle_operator.docgen`` writes them all."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import cast

PageSet = dict[str, str]
"""Page path under docs/ (``reference/cli.md``) -> its Markdown text."""


def all_pages() -> PageSet:
    """Every generated page, from every module here that defines ``pages()``; a path made twice fails."""
    result: PageSet = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        make = getattr(module, "pages", None)
        if make is None:
            continue
        for path, text in cast(Callable[[], PageSet], make)().items():
            if path in result:
                raise ValueError(f"{path} is generated twice (again by {info.name})")
            result[path] = text
    return result
