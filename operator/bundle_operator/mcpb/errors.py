"""The one exception the .mcpb reader raises: a refusal with a stable code and a reason for a person."""

from __future__ import annotations


class Refused(Exception):
    """The archive breaks a rule; ``code`` is stable for scripts, ``reason`` names the entry or field."""

    def __init__(self, code: str, reason: str) -> None:
        reason = printable(reason)
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def printable(text: str, limit: int = 2000) -> str:
    """Text safe for a terminal or a log line: control characters escaped, length bounded.

    Reasons quote entry names, keys and commands from the archive, which an attacker chooses.
    """
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."
