"""Printing previews: JSON for scripts (a contract), a table for people."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from bundle_operator.document.issues import printable
from bundle_operator.engine.preview import Preview


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    """Add -o/--output json|table."""
    parser.add_argument(
        "-o", "--output", choices=("json", "table"), default="table", help="output format (default: table)"
    )


def emit_preview(preview: Preview, output: str, stream: TextIO | None = None) -> None:
    """Print a preview in the chosen format: the whole text in one write, or nothing.

    The text is built and checked against the stream's encoding before anything is written, so
    a character the stream cannot carry never leaves a torn JSON document behind.
    """
    stream = stream or sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    if output == "json":
        data = preview.to_json()
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        if not _encodes(text, encoding):
            # The same JSON, with every non-ASCII character as a \u escape.
            text = json.dumps(data, indent=2, ensure_ascii=True) + "\n"
    else:
        text = render_table(preview)
        if not _encodes(text, encoding):
            text = text.encode(encoding, "backslashreplace").decode(encoding)
    stream.write(text)
    stream.flush()


def _encodes(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return lines


def render_table(preview: Preview) -> str:
    """The preview as text for a person."""
    lines: list[str] = []
    if preview.bundle is None:
        lines.append("Bundle: (the document could not be read)")
    else:
        version = preview.bundle.version or "(no version)"
        lines.append(printable(f"Bundle: {preview.bundle.name} {version}  {preview.bundle.digest}"))
    if preview.entities:
        lines.append("")
        with_ids = any(e.id is not None for e in preview.entities)
        headers = ["KIND", "KEY", "ACTION", *(["ID"] if with_ids else []), "REASON"]
        rows = [
            [e.kind, e.key, e.action, *([e.id or ""] if with_ids else []), e.reason or ""]
            for e in preview.entities
        ]
        lines += _table(headers, rows)
    if preview.issues:
        lines.append("")
        rows = [
            [
                i.severity.upper(),
                str(i.code),
                f"{i.path or ''}" + (f" (line {i.line})" if i.line is not None else ""),
                i.message,
            ]
            for i in preview.issues
        ]
        lines += _table(["SEVERITY", "CODE", "WHERE", "MESSAGE"], rows)
    blockers = sum(1 for i in preview.issues if i.blocking)
    warnings = len(preview.issues) - blockers
    lines.append("")
    if preview.blocking:
        lines.append(
            f"Blocked: {blockers} blocking issue(s), {warnings} warning(s). Nothing would be written."
        )
    else:
        lines.append(f"Ready: nothing blocks ({warnings} warning(s)).")
    return "\n".join(lines) + "\n"
