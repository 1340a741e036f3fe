"""Text for Markdown table cells, shared by every generated page."""

from __future__ import annotations


def one_line(text: str) -> str:
    """Text fit for a table cell: every run of whitespace (newlines too) one space."""
    return " ".join(text.split())


def cell(text: str) -> str:
    """``text`` on one line, safe inside a table cell (a ``|`` would end the cell)."""
    return one_line(text).replace("|", "\\|")


def fenced(text: str) -> str:
    """``text`` as a code span: backticks inside get a longer fence."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code(text: str) -> str:
    """``text`` as a code span inside a table cell."""
    return fenced(cell(text))
