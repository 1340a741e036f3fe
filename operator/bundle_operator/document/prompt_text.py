"""``{{name}}`` placeholders in a gateway prompt's text: finding them and filling them in.

Analyze, the platform's prompt rules and the gateway's ``prompts/get`` read placeholders the same
way. A name is what stands between the braces with its surrounding spaces dropped. The pattern
reads the name in one greedy run and strips it afterwards: a lazy name between two runs of
optional spaces backtracks in cubic time on ``{{`` followed by a long run of spaces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_PLACEHOLDER = re.compile(r"\{\{([^{}]*)\}\}")


def placeholder_names(text: str) -> list[str]:
    """The names of the placeholders in ``text``, in order, repeats included."""
    return [match.group(1).strip() for match in _PLACEHOLDER.finditer(text)]


def render(text: str, arguments: Mapping[str, str]) -> str:
    """Replace each placeholder once with its argument ("" when not given); values are never expanded."""
    return _PLACEHOLDER.sub(lambda match: arguments.get(match.group(1).strip(), ""), text)
