"""Parsing a bundle document: text in, a validated Bundle (or the reasons there is none) out."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bundle_operator.document import (
    artifact_rules,
    credential_rules,
    keys,
    knowledge_rules,
    mcp_rules,
    schedule,
    setup,
)
from bundle_operator.document.canonical import digest
from bundle_operator.document.gateway_rules import check_gateway
from bundle_operator.document.issues import Code, Issue, blocking
from bundle_operator.document.models import SCHEMA_VERSIONS, Bundle
from bundle_operator.document.skills import check_skills
from bundle_operator.document.source import (
    MAX_SOURCE_BYTES,
    SourceError,
    SourceMap,
    data_size,
    load_source,
    refuse_lone_surrogates,
    too_large_message,
)
from bundle_operator.document.validation import validation_issues


@dataclass(frozen=True)
class ParsedBundle:
    """The outcome of parsing: the bundle when its shape is valid, and every issue found."""

    bundle: Bundle | None
    issues: list[Issue]
    source_map: SourceMap = field(default_factory=SourceMap)
    digest: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def blocking(self) -> bool:
        """Whether any issue stops an install."""
        return any(issue.blocking for issue in self.issues)


def parse_bundle_text(text: str | bytes) -> ParsedBundle:
    """Parse and check a bundle document given as YAML or JSON text."""
    with _collector_paused():
        try:
            loaded = load_source(text)
        except SourceError as exc:
            code = Code.DOCUMENT_TOO_LARGE if exc.too_large else Code.INVALID_DOCUMENT
            issue = blocking(code, exc.message, exc.path).with_line(exc.line)
            return ParsedBundle(None, [issue])
        return _parse_text_data(loaded.data, loaded.source_map)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a document is read.

    A large document allocates hundreds of thousands of nodes, dicts and lists, none of them in a
    reference cycle; the collector would traverse them over and over as they pile up (60% of the
    time of a 5 MiB document). Plain reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_bundle_data(data: Any, source_map: SourceMap | None = None) -> ParsedBundle:
    """Check already-loaded document data (a Bundle resource's inline spec, for one)."""
    source_map = source_map or SourceMap()
    # A document given as data gets the same size limit as one given as text.
    size = data_size(data)
    if size > MAX_SOURCE_BYTES:
        return ParsedBundle(
            None, [blocking(Code.DOCUMENT_TOO_LARGE, too_large_message(size), "")], source_map
        )
    # Text was checked as it was read; data from elsewhere (JSON with "\ud800" escapes) may hold
    # lone surrogates, which no digest, message or status could encode.
    try:
        refuse_lone_surrogates(data)
    except SourceError as exc:
        issue = blocking(Code.INVALID_DOCUMENT, exc.message, exc.path).with_line(source_map.line_of(exc.path))
        return ParsedBundle(None, [issue], source_map)
    return _parse_text_data(data, source_map)


def _parse_text_data(data: Any, source_map: SourceMap) -> ParsedBundle:
    """Check loaded data holding only valid Unicode text."""
    issues = _shape(data)
    if issues:
        return ParsedBundle(None, _placed(issues, source_map), source_map)
    try:
        bundle = Bundle.model_validate(data)
    except ValidationError as exc:
        return ParsedBundle(None, _placed(validation_issues(exc, data), source_map), source_map)
    findings = mcp_rules.check_mcps(bundle)
    issues = [
        *keys.check_identity(bundle),
        *keys.check_keys(bundle),
        *keys.check_platform_names(bundle),
        *keys.check_references(bundle),
        *setup.check_declarations(bundle),
        *setup.check_placeholders(bundle),
        *findings.issues,
        *artifact_rules.check_artifacts(bundle),
        *mcp_rules.check_channel_tokens(bundle),
        *credential_rules.check_credentials(bundle),
        *check_skills(bundle, source_map),
        *schedule.check_automations(bundle),
        *check_gateway(bundle),
        *knowledge_rules.check_schema_fields(bundle),
        *knowledge_rules.check_knowledge_sets(bundle),
        *knowledge_rules.check_apps(bundle),
    ]
    return ParsedBundle(bundle, _placed(issues, source_map), source_map, digest(bundle), findings.skipped)


_READ = " and ".join(f'"{v}"' for v in SCHEMA_VERSIONS)


def _shape(data: Any) -> list[Issue]:
    """The checks that decide whether the document is read at all."""
    if not isinstance(data, dict):
        return [
            blocking(Code.INVALID_DOCUMENT, "a bundle document is a mapping of fields at the top level", "")
        ]
    version = data.get("schema_version")
    if version is None:
        return [
            blocking(
                Code.INVALID_DOCUMENT,
                f"/schema_version: this field is required; this operator reads {_READ}",
                "/schema_version",
            )
        ]
    if version not in SCHEMA_VERSIONS:
        # A newer (or older) format is refused outright rather than half understood.
        shown = version if isinstance(version, str) and len(version) <= 32 else "this value"
        return [
            blocking(
                Code.UNSUPPORTED_SCHEMA_VERSION,
                f"schema_version {shown!r} is not supported; this operator reads only {_READ}",
                "/schema_version",
            )
        ]
    return []


def _placed(issues: list[Issue], source_map: SourceMap) -> list[Issue]:
    return [issue.with_line(source_map.line_of(issue.path)) for issue in issues]


__all__ = ["MAX_SOURCE_BYTES", "ParsedBundle", "parse_bundle_data", "parse_bundle_text"]
