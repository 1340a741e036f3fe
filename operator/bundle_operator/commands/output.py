"""Printing previews: JSON for scripts (a contract), a table for people."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TextIO

from bundle_operator.document.issues import printable
from bundle_operator.engine.preview import Preview


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    """Add -o/--output json|table."""
    parser.add_argument(
        "-o", "--output", choices=("json", "table"), default="table", help="output format (default: table)"
    )


@dataclass(frozen=True)
class InstallOutcome:
    """Why an install wrote nothing or was rolled back: the ``code`` and ``failure`` of install's JSON.

    ``code`` is ``bundle_invalid`` (analyze blocked, or the platform refused an entity as
    invalid) or ``bundle_install_failed`` (a step failed for another reason). ``failure`` is
    None when nothing was written (blocked); else it names the entity and fields that failed,
    carries the platform's problem, and says what the rollback deleted and could not delete.
    """

    code: str | None
    failure: dict[str, object] | None = None

    @property
    def rolled_back(self) -> bool:
        """Whether something was written and then undone."""
        return self.failure is not None


def emit_preview(
    preview: Preview, output: str, stream: TextIO | None = None, outcome: InstallOutcome | None = None
) -> None:
    """Print a preview in the chosen format: the whole text in one write, or nothing.

    The text is built and checked against the stream's encoding before anything is written, so
    a character the stream cannot carry never leaves a torn JSON document behind. ``outcome``
    (install only) adds ``code`` and ``failure`` to the JSON and says what happened in the table.
    """
    stream = stream or sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    if output == "json":
        data = preview.to_json()
        if outcome is not None:
            data["code"] = outcome.code
            data["failure"] = outcome.failure
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        if not _encodes(text, encoding):
            # The same JSON, with every non-ASCII character as a \u escape.
            text = json.dumps(data, indent=2, ensure_ascii=True) + "\n"
    else:
        text = render_table(preview, outcome)
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


def table_lines(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Aligned columns under their headers, every cell printable."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return lines


def render_table(preview: Preview, outcome: InstallOutcome | None = None) -> str:
    """The preview as text for a person; after a failed install, what was rolled back."""
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
        lines += table_lines(headers, rows)
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
        lines += table_lines(["SEVERITY", "CODE", "WHERE", "MESSAGE"], rows)
    blockers = sum(1 for i in preview.issues if i.blocking)
    warnings = len(preview.issues) - blockers
    lines.append("")
    if outcome is not None and outcome.failure is not None:
        lines += _failure_lines(outcome.code, outcome.failure)
    elif preview.blocking:
        written = "Nothing was written." if outcome is not None else "Nothing would be written."
        lines.append(f"Blocked: {blockers} blocking issue(s), {warnings} warning(s). {written}")
    else:
        lines.append(f"Ready: nothing blocks ({warnings} warning(s)).")
    return "\n".join(lines) + "\n"


def _failure_lines(code: str | None, failure: dict[str, object]) -> list[str]:
    entity = failure.get("entity") or "(no single entity)"
    lines = [printable(f"Install failed ({code}) at {entity}: {failure.get('detail')}")]
    rolled_back = failure.get("rolled_back") or []
    left = failure.get("rollback_failures") or []
    assert isinstance(rolled_back, list) and isinstance(left, list)
    if rolled_back:
        lines.append(
            printable(
                f"Rolled back: deleted {len(rolled_back)} platform entities created by this run: "
                f"{', '.join(rolled_back)}."
            )
        )
    elif left:
        lines.append("Rolled back: none of what this run created could be deleted.")
    else:
        lines.append("Rolled back: this run had created nothing.")
    if left:
        lines.append(
            printable(f"Could not delete {', '.join(left)}; the next install or uninstall deletes them.")
        )
    return lines
