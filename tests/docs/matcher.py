"""Shown console output against printed output: `...` lines, `<...>` wildcards, trailing spaces, and
runs of two or more spaces (table columns) as wide as they come."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

ANY_LINES = "..."
ANY_TEXT = "<...>"
# kubectl and bundlectl pad table columns to their widest cell, which an age or an id moves: a page
# shows the table aligned as printed once, and any run of two or more spaces matches any other.
_COLUMN_GAP = re.compile(r" {2,}")


def _columns(line: str) -> str:
    return _COLUMN_GAP.sub("  ", line.rstrip())


def line_matches(shown: str, printed: str) -> bool:
    """One shown line against one printed line; each ``<...>`` stands for any text in the line, and
    a run of two or more spaces for any such run."""
    shown, printed = _columns(shown), _columns(printed)
    pieces = shown.split(ANY_TEXT)
    if len(pieces) == 1:
        return shown == printed
    first, *middle, last = pieces
    if not printed.startswith(first) or len(printed) < len(first) + len(last):
        return False
    if not printed.endswith(last):
        return False
    # Leftmost matches of the inner pieces leave the most room for the ones after.
    at, end = len(first), len(printed) - len(last)
    for piece in middle:
        found = printed.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _trim(lines: Sequence[str]) -> list[str]:
    """Lines without trailing spaces, and without blank lines at the end (a page cannot show them)."""
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


@dataclass(frozen=True)
class Mismatch:
    """Where shown and printed output part: the index of the first shown line that cannot match
    (len(shown) when the printed output goes on past it), and the printed line there."""

    shown_index: int
    printed_line: str | None


def mismatch(shown: Sequence[str], printed: Sequence[str]) -> Mismatch | None:
    """None when ``printed`` is what ``shown`` shows, else the first place they part."""
    shown, printed = _trim(shown), _trim(printed)
    reach = {0}  # the printed positions a prefix of the shown lines can end at
    for i, pattern in enumerate(shown):
        if pattern.strip() == ANY_LINES:
            nxt = set(range(min(reach), len(printed) + 1))
        else:
            nxt = {j + 1 for j in reach if j < len(printed) and line_matches(pattern, printed[j])}
        if not nxt:
            j = min(reach)
            return Mismatch(i, printed[j] if j < len(printed) else None)
        reach = nxt
    if len(printed) in reach:
        return None
    return Mismatch(len(shown), printed[min(reach)] if min(reach) < len(printed) else None)


def report(
    where: str, command: str, shown: Sequence[str], shown_line: int, printed: Sequence[str]
) -> str | None:
    """None when the output matches, else a readable failure naming the page line that differs.

    ``where`` is ``page:line`` of the command; ``shown_line`` the page line of its first output line.
    """
    found = mismatch(shown, printed)
    if found is None:
        return None
    page = where.rsplit(":", 1)[0]
    trimmed = _trim(shown)
    if found.shown_index < len(trimmed):
        at = f"{page}:{shown_line + found.shown_index}"
        first = f"  page shows: {trimmed[found.shown_index]}\n  printed:    {found.printed_line}"
    else:
        at = f"{page}:{shown_line + len(trimmed)}"
        first = f"  page shows: (nothing more)\n  printed:    {found.printed_line}"
    diff = difflib.unified_diff(
        trimmed, _trim(printed), fromfile=f"shown at {page}:{shown_line}", tofile="printed", lineterm=""
    )
    return (
        f"{where}: `{command}` printed other output than the page shows, from {at}:\n{first}\n"
        + "\n".join(diff)
    )
