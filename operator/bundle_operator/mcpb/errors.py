"""The one exception the .mcpb reader raises: a refusal with a stable code and a reason for a person."""

from __future__ import annotations


class Refused(Exception):
    """The archive breaks a rule; ``code`` is stable for scripts, ``reason`` names the entry or field."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
