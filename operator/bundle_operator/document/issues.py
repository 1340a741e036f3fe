"""Issues: what analyze reports about a document, each with a stable code scripts can match on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Severity = Literal["blocking", "warning"]

# Lone surrogates (from a "\ud800" escape, or bytes that were not UTF-8 decoded with
# surrogateescape) cannot be written as UTF-8; control characters would steer a terminal, and the
# bidirectional embeddings, overrides and isolates would show a line's text in another order than
# it has (a name that reads as another).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def joined_surrogate_pairs(text: str) -> str:
    """``text`` with each high-low surrogate pair (YAML's "\\ud83d\\ude00") made the character it
    stands for; lone surrogates stay."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, carried by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code > 0xFF:
        return f"\\u{code:04x}"
    return f"\\x{code:02x}"


def printable(text: str) -> str:
    """``text`` as it may appear in a message or field: always UTF-8, never a control character.

    Lone surrogates, control characters and bidirectional overrides are written as escapes
    (``\\ud800``, ``\\xff`` for a byte that was not UTF-8, ``\\x1b``, ``\\u202e``), so output built
    from it is never torn half way nor shown in another order.
    """
    if text.isascii() and text.isprintable():
        return text
    return _UNPRINTABLE.sub(_escaped, joined_surrogate_pairs(text))


def cut_short(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its first ``limit`` and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"


def shown(text: str, limit: int = 64) -> str:
    """A user-given name (never a value) as a message quotes it: printable, and cut at ``limit``."""
    return printable(cut_short(text, limit))


class Code(StrEnum):
    """Stable issue codes; part of the CLI JSON contract and of the resources' status."""

    INVALID_DOCUMENT = "invalid_document"
    DOCUMENT_TOO_LARGE = "document_too_large"
    UNKNOWN_FIELD = "unknown_field"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    INVALID_NAME = "invalid_name"
    INVALID_VERSION = "invalid_version"
    INVALID_KEY = "invalid_key"
    DUPLICATE_KEY = "duplicate_key"
    UNKNOWN_REFERENCE = "unknown_reference"
    UNKNOWN_SETUP_REFERENCE = "unknown_setup_reference"
    PLACEHOLDER_NOT_SUBSTITUTED = "placeholder_not_substituted"
    MISSING_SETUP = "missing_setup"
    INVALID_SETUP_VALUE = "invalid_setup_value"
    INVALID_SETUP_DEFAULT = "invalid_setup_default"
    UNKNOWN_SETUP_KEY = "unknown_setup_key"
    UNUSED_SETUP_FIELD = "unused_setup_field"
    INVALID_SKILL_FRONTMATTER = "invalid_skill_frontmatter"
    INVALID_SKILL_SOURCE = "invalid_skill_source"
    CONTEXT_SECRET_LITERAL = "context_secret_literal"
    CONTEXT_SECRET_NOT_SECRET_FIELD = "context_secret_not_secret_field"
    CONTEXT_SECRET_NOT_URL_MCP = "context_secret_not_url_mcp"
    CONTEXT_SECRET_LENGTH = "context_secret_length"
    CREDENTIAL_LITERAL = "credential_literal"
    CREDENTIAL_NOT_SECRET_FIELD = "credential_not_secret_field"
    UNSUPPORTED_RUNTIME = "unsupported_runtime"
    INVALID_ARTIFACT = "invalid_artifact"
    BINARY_PLATFORM = "binary_platform"
    RUNS_FROM_ARCHIVE = "runs_from_archive"
    ARTIFACT_UNAVAILABLE = "artifact_unavailable"
    INVALID_URL = "invalid_url"
    INVALID_SCHEDULE = "invalid_schedule"
    INVALID_TIMEZONE = "invalid_timezone"
    DEPENDENCY_SKIPPED = "dependency_skipped"
    REQUIREMENT_NOT_CHECKED = "requirement_not_checked"
    REQUIREMENT_NOT_VERIFIED = "requirement_not_verified"
    REQUIREMENT_MISSING = "requirement_missing"
    REQUIREMENT_STRIPPED = "requirement_stripped"
    SUBSTITUTION_REQUIRED = "substitution_required"
    SUBSTITUTION_INVALID = "substitution_invalid"
    SUBSTITUTION_UNUSED = "substitution_unused"
    UPDATE_CONFLICT = "update_conflict"
    ENTITY_REMOVED = "entity_removed"
    ENTITY_KEPT = "entity_kept"
    INSTALL_FAILED = "install_failed"
    INSTALL_REFUSED = "install_refused"
    NAME_TAKEN = "name_taken"
    GATEWAY_NAME_CONFLICT = "gateway_name_conflict"
    GATEWAY_INVALID_NAME = "gateway_invalid_name"
    GATEWAY_DUPLICATE = "gateway_duplicate"
    GATEWAY_LIMIT = "gateway_limit"
    GATEWAY_TOOL_SHADOWED = "gateway_tool_shadowed"
    PROMPT_UNDECLARED_ARGUMENT = "prompt_undeclared_argument"
    PROMPT_UNKNOWN_RESOURCE = "prompt_unknown_resource"
    PROMPT_INVALID_MESSAGE = "prompt_invalid_message"
    NEWER_SCHEMA_FIELD = "newer_schema_field"
    INVALID_SOURCE = "invalid_source"
    SOURCE_CRAWLED_AS_WRITTEN = "source_crawled_as_written"
    TENANT_ADDRESS_AS_WRITTEN = "tenant_address_as_written"
    INVALID_APP_DOCUMENT = "invalid_app_document"
    # A source refused before any document was read (bundlectl analyze of a URL or registry record):
    # the Bundle's Stalled reason for the same refusal, in snake case.
    FETCH_FAILED = "fetch_failed"
    CHECKSUM_MISMATCH = "checksum_mismatch"
    ARCHIVE_REFUSED = "archive_refused"
    SIGNATURE_INVALID = "signature_invalid"
    INSECURE_PACKAGE_URL = "insecure_package_url"
    REGISTRY_RECORD_NOT_FOUND = "registry_record_not_found"
    REGISTRY_RECORD_DELETED = "registry_record_deleted"
    REGISTRY_RECORD_CHANGED = "registry_record_changed"
    REGISTRY_RECORD_INVALID = "registry_record_invalid"
    REGISTRY_NO_MCPB_PACKAGE = "registry_no_mcpb_package"
    REGISTRY_NO_COMPATIBLE_PACKAGE = "registry_no_compatible_package"
    REGISTRY_CHECKSUM_MISSING = "registry_checksum_missing"
    REGISTRY_CHECKSUM_CONFLICT = "registry_checksum_conflict"
    REGISTRY_UNAVAILABLE = "registry_unavailable"
    REGISTRY_REFUSED = "registry_refused"


@dataclass(frozen=True)
class Issue:
    """One finding. ``path`` is a JSON Pointer into the document; ``entity`` is ``kind:key``."""

    severity: Severity
    code: Code
    message: str
    path: str | None = None
    entity: str | None = None
    line: int | None = None

    def __post_init__(self) -> None:
        # Messages, pointers and entities may quote names from the user (a setup key given on the
        # command line, a JSON Pointer token): they must be writable as UTF-8 wherever they go.
        for name in ("message", "path", "entity"):
            value = getattr(self, name)
            if isinstance(value, str):
                safe = printable(value)
                if safe is not value:
                    object.__setattr__(self, name, safe)

    @property
    def blocking(self) -> bool:
        """Whether this issue stops an install."""
        return self.severity == "blocking"

    def with_line(self, line: int | None) -> Issue:
        """The same issue, placed on a line of the source text."""
        if line is None or self.line is not None:
            return self
        return Issue(self.severity, self.code, self.message, self.path, self.entity, line)

    def to_json(self) -> dict[str, object]:
        """The issue as the CLI JSON contract spells it."""
        return {
            "severity": self.severity,
            "code": str(self.code),
            "path": self.path,
            "entity": self.entity,
            "line": self.line,
            "message": self.message,
        }


def blocking(code: Code, message: str, path: str | None = None, entity: str | None = None) -> Issue:
    """A blocking issue."""
    return Issue("blocking", code, message, path, entity)


def blocking_for(
    problem: str | None, code: Code, subject: str, path: str | None = None, entity: str | None = None
) -> list[Issue]:
    """The blocking issue "<subject> <problem>" when a check found a problem; none when it found none."""
    return [] if problem is None else [blocking(code, f"{subject} {problem}", path, entity)]


def warning(code: Code, message: str, path: str | None = None, entity: str | None = None) -> Issue:
    """A warning: reported, never stops an install."""
    return Issue("warning", code, message, path, entity)
