"""The bundle document format (schema_version 0.1.0 and 0.2.0): models, parsing, references, checks."""

from bundle_operator.document.canonical import canonical_data, canonical_json, digest
from bundle_operator.document.issues import Code, Issue
from bundle_operator.document.models import SCHEMA_VERSION, Bundle
from bundle_operator.document.parse import ParsedBundle, parse_bundle_data, parse_bundle_text

__all__ = [
    "SCHEMA_VERSION",
    "Bundle",
    "Code",
    "Issue",
    "ParsedBundle",
    "canonical_data",
    "canonical_json",
    "digest",
    "parse_bundle_data",
    "parse_bundle_text",
]
