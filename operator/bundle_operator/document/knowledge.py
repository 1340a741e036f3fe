"""Knowledge source types, defined once: which fields each type takes, which one is the tenant
address a ``knowledge_source`` requirement substitutes, and which tie a source to the organisation
that exported it. The document, the platform's models and rules, the engine and export all read
these tables, so a source analyze accepts is one the platform accepts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

SourceType = Literal["statutes", "website", "s3", "sftp", "smb", "webdav", "nextcloud", "onedrive", "ris"]

# A source key is a source's identity across instances; export derives ``<type>-<short hash>``.
SOURCE_KEY_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
_SOURCE_KEY = re.compile(SOURCE_KEY_PATTERN)


@dataclass(frozen=True)
class SourceFields:
    """The fields of one source type: required ones, optional ones, and which are lists."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    integers: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        """Every field of the type, required first."""
        return self.required + self.optional


SOURCE_FIELDS: dict[str, SourceFields] = {
    "statutes": SourceFields(("laws",), lists=("laws",)),
    "website": SourceFields(("urls",), lists=("urls",)),
    "s3": SourceFields(("bucket",), ("prefix", "region", "endpoint")),
    "sftp": SourceFields(("host",), ("port", "dir", "user"), integers=("port",)),
    "smb": SourceFields(("server", "share"), ("domain", "username")),
    "webdav": SourceFields(("base_url",), ("username",)),
    "nextcloud": SourceFields(("base_url",), ("username",)),
    # Shared links tie a source to the organisation that shared them: export leaves them out and
    # the installer sets them afresh, so a source may arrive without any.
    "onedrive": SourceFields((), ("shared_links",), lists=("shared_links",)),
    "ris": SourceFields(("host",)),
}

# Every field any source type has, besides ``type``, ``sync_schedule`` and ``credentials``.
ALL_SOURCE_FIELDS: tuple[str, ...] = tuple(
    dict.fromkeys(name for fields in SOURCE_FIELDS.values() for name in fields.all)
)

# The address that differs from tenant to tenant: a requirement ``<type>:<address>`` names it, and
# a substitution replaces it alone (prefix, region, port, dir and share travel as written).
TENANT_ADDRESS: dict[str, str] = {
    "s3": "bucket",
    "sftp": "host",
    "smb": "server",
    "webdav": "base_url",
    "nextcloud": "base_url",
    "ris": "host",
}

# What ties a source to the exporting organisation (seed 004): login names, the Windows domain,
# OneDrive shared links and the S3 endpoint (left in place, a re-pointed bucket would still be read
# from the exporter's object store). Export leaves them out and reports each.
ORGANISATION_FIELDS: dict[str, tuple[str, ...]] = {
    "s3": ("endpoint",),
    "sftp": ("user",),
    "smb": ("domain", "username"),
    "webdav": ("username",),
    "nextcloud": ("username",),
    "onedrive": ("shared_links",),
}

# At most this many entries in a source's lists (laws, URLs, shared links).
MAX_SOURCE_LIST = 500
# An app's document, as compact UTF-8 JSON, holds at most this many bytes.
MAX_APP_DOCUMENT = 256 * 1024

# Credential names a source may carry (their values are always secrets).
CREDENTIAL_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
_CREDENTIAL_NAME = re.compile(CREDENTIAL_NAME_PATTERN)


def source_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a source key, or None."""
    if "\n" in key or _SOURCE_KEY.match(key) is None:
        return "must match [a-z][a-z0-9-]* (at most 63 characters)"
    return None


def credential_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a source credential, or None."""
    if "\n" in name or _CREDENTIAL_NAME.match(name) is None:
        return "must match [a-z][a-z0-9_]* (at most 64 characters)"
    return None


def requirement_ref(source_type: str, address: str) -> str:
    """The ``knowledge_source`` requirement ref of a tenant address: ``<type>:<address>``."""
    return f"{source_type}:{address}"


def tenant_address(source: dict[str, object]) -> tuple[str, str] | None:
    """The (field, address) a requirement may substitute in a source, or None for a public one."""
    source_type = str(source.get("type"))
    field = TENANT_ADDRESS.get(source_type)
    if field is None:
        return None
    value = source.get(field)
    return (field, value) if isinstance(value, str) else None


def app_document_size(document: object) -> int:
    """The bytes of an app's document as compact UTF-8 JSON, the form its limit counts."""
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
