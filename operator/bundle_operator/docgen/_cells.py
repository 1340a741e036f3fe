"""Text for Markdown table cells, shared by the table pages (cli, metrics, events, codes)."""

from __future__ import annotations


def cell(text: str) -> str:
    """``text`` on one line, safe inside a table cell (a ``|`` would end the cell)."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """``text`` as a code span inside a table cell; backticks inside get a longer fence."""
    text = cell(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"
