"""Resolve a Bundle's ``spec.source`` into a parsed bundle document and the Bundle's status fields.

Five kinds of source (DESIGN.md §4, §9.3): the document inline in the spec, a ConfigMap key, an
https URL pinned by SHA-256, a .mcpb archive (by URL, ConfigMap or Secret) that is read, verified
and converted, and an MCP Registry record that points at such an archive. Everything here is
plain async Python: Kubernetes objects come through the small ``ObjectReader`` protocol, so this
module imports neither kopf nor kubernetes and tests without a cluster. Blocking work (reading
archives, parsing big documents, file I/O) runs in worker threads: one blocking call inside
``async def`` would freeze every handler of the operator.

Errors are ``SourceError`` with a CamelCase reason for the Bundle's conditions and a message that
names the field to fix; no message carries a Secret's bytes or the document's text (CONVENTIONS.md
"Secrets"), and URLs are shown without their query string, which may hold a token.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from bundle_operator.document.parse import (
    MAX_SOURCE_BYTES,
    ParsedBundle,
    parse_bundle_data,
    parse_bundle_text,
)
from bundle_operator.fetch import shown_text as shown_url
from bundle_operator.k8s.object_keys import KeyMissing, missing, secret_key
from bundle_operator.sources.archives import (
    CACHE_MAX_SOURCE_BYTES,
    SignaturePolicy,
    accept,
    archive_from_bytes,
    archive_from_url,
    clear_archives,
)
from bundle_operator.sources.downloads import downloaded
from bundle_operator.sources.models import BundleSource, LocalObjectKeyRef, McpbSource, UrlSource
from bundle_operator.sources.registry_source import clear_registry_cache, resolve_registry
from bundle_operator.sources.resolution import BoundedCache, Resolved, SourceError, SourceSettings, invalid

T = TypeVar("T")
DOCUMENT_MAX_BYTES = MAX_SOURCE_BYTES  # 5 MiB: what the parser accepts at all


class ObjectReader(Protocol):
    """Reads the objects a source refers to, in the Bundle's namespace; None when one is missing."""

    async def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ConfigMap as the API returns it (``binaryData`` base64), or None when it is missing."""
        ...

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret as the API returns it (``data`` base64), or None when it is missing."""
        ...


# Resolved documents kept for re-reconciles. A parsed document keeps its YAML node tree (for line
# numbers) alive, many times the text's size, so the cache is bounded in source bytes as well.
# Keyed by ("text", sha256) for content the operator holds and by ("url", url, sha256) for
# downloads, so knowing a checksum alone cannot pull another Bundle's document out of the cache.
# Entries: a fleet's Bundles each resolve again at every drift check of their installations, and a
# cache smaller than the fleet's count of Bundles would parse every one of them every time.
DOCUMENTS_KEPT = 1024
_DOCUMENTS: BoundedCache[ParsedBundle] = BoundedCache(DOCUMENTS_KEPT, CACHE_MAX_SOURCE_BYTES)


def clear_cache() -> None:
    """Forget every resolved document, archive and registry resolution (tests; a fresh start)."""
    _DOCUMENTS.clear()
    clear_archives()
    clear_registry_cache()


async def resolve(
    source: BundleSource, namespace: str, reader: ObjectReader, settings: SourceSettings
) -> Resolved:
    """Read the Bundle's source and parse the document; raises ``SourceError`` when it cannot be read.

    A document that is read but broken is not an error: it comes back parsed, with its issues.
    """
    check_one_source(source)
    if source.inline is not None:
        return Resolved(await _parse_inline(source.inline), None, "inline")
    if source.config_map_ref is not None:
        return await _resolve_config_map(source.config_map_ref, namespace, reader)
    if source.url is not None:
        return await _resolve_url(source.url, settings)
    if source.registry is not None:
        return await resolve_registry(source.registry, settings)
    assert source.mcpb is not None  # check_one_source saw exactly one
    return await _resolve_mcpb(source.mcpb, namespace, reader, settings)


def _exactly_one(field: str, options: tuple[tuple[str, object], ...]) -> None:
    """Refuse unless exactly one of the named options is set, naming what was found."""
    given = [name for name, value in options if value is not None]
    if len(given) != 1:
        found = ", ".join(given) if given else "none"
        names = ", ".join(name for name, _ in options)
        raise invalid(f"{field}: set exactly one of {names} (found: {found})")


def check_one_source(source: BundleSource) -> None:
    """Refuse (``SourceError``) unless exactly one kind of source is set."""
    _exactly_one(
        "spec.source",
        (
            ("inline", source.inline),
            ("configMapRef", source.config_map_ref),
            ("url", source.url),
            ("mcpb", source.mcpb),
            ("registry", source.registry),
        ),
    )


async def _resolve_config_map(ref: LocalObjectKeyRef, namespace: str, reader: ObjectReader) -> Resolved:
    content = await _config_map_value(reader, namespace, ref, "spec.source.configMapRef")
    parsed = await _parse_cached(content)
    return Resolved(parsed, None, f"ConfigMap {ref.name}/{ref.key}")


async def _parse_cached(content: str | bytes) -> ParsedBundle:
    """Parse a document's text, reusing the result for the same bytes."""
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    return await _kept(("text", hashlib.sha256(data).hexdigest()), len(data), parse_bundle_text, content)


async def _parse_inline(document: dict[str, Any]) -> ParsedBundle:
    """Parse an inline document, reusing the result for the same content: every installation of a
    Bundle, and each of its drift checks, resolves the same document."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str).encode()
    return await _kept(("inline", hashlib.sha256(text).hexdigest()), len(text), parse_bundle_data, document)


async def _kept(
    key: tuple[str, str], size: int, parse: Callable[[T], ParsedBundle], source: T
) -> ParsedBundle:
    """The parse of ``source`` kept under ``key`` (``size`` source bytes), parsed in a thread if new."""
    parsed = _DOCUMENTS.get(key)
    if parsed is None:
        parsed = await asyncio.to_thread(parse, source)
        _DOCUMENTS.put(key, parsed, size)
    return parsed


async def _resolve_url(source: UrlSource, settings: SourceSettings) -> Resolved:
    origin = shown_url(source.url)
    key = ("url", source.url, source.sha256)
    parsed = _DOCUMENTS.get(key)
    if parsed is None:
        async with downloaded(
            source.url, source.sha256, DOCUMENT_MAX_BYTES, settings, "spec.source.url"
        ) as path:
            data = await asyncio.to_thread(path.read_bytes)
        parsed = await asyncio.to_thread(parse_bundle_text, data)
        _DOCUMENTS.put(key, parsed, len(data))
    return Resolved(parsed, None, origin)


# ------------------------------------------------------------------------------------------ mcpb


async def _resolve_mcpb(
    source: McpbSource, namespace: str, reader: ObjectReader, settings: SourceSettings
) -> Resolved:
    _check_mcpb(source)
    policy = SignaturePolicy.of(source)
    if source.url is not None:
        assert source.sha256 is not None  # _check_mcpb
        archive = await archive_from_url(source.url, source.sha256, settings, "spec.source.mcpb.url")
        parsed, signature = accept(archive, policy, in_secret=False)
        return Resolved(parsed, signature, f"mcpb {shown_url(source.url)}", archives=archive.provides)
    data, field, origin = await _archive_bytes(source, namespace, reader)
    archive = await archive_from_bytes(data, source.sha256, field)
    parsed, signature = accept(archive, policy, in_secret=source.secret_ref is not None)
    return Resolved(parsed, signature, origin, archives=archive.provides)


def _check_mcpb(source: McpbSource) -> None:
    _exactly_one(
        "spec.source.mcpb",
        (("url", source.url), ("configMapRef", source.config_map_ref), ("secretRef", source.secret_ref)),
    )
    if source.url is not None and source.sha256 is None:
        raise invalid("spec.source.mcpb.sha256: required with url; set it to the archive's SHA-256")


async def _archive_bytes(source: McpbSource, namespace: str, reader: ObjectReader) -> tuple[bytes, str, str]:
    """The archive's bytes from its ConfigMap or Secret, the field that names it, and its origin."""
    if source.config_map_ref is not None:
        ref, field = source.config_map_ref, "spec.source.mcpb.configMapRef"
        content = await _config_map_value(reader, namespace, ref, field)
        data = content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content
        return data, field, f"mcpb ConfigMap {ref.name}/{ref.key}"
    assert source.secret_ref is not None  # _check_mcpb saw exactly one
    ref, field = source.secret_ref, "spec.source.mcpb.secretRef"
    return await _secret_value(reader, namespace, ref, field), field, f"mcpb Secret {ref.name}/{ref.key}"


# ------------------------------------------------------------------------------- objects and files


async def _config_map_value(
    reader: ObjectReader, namespace: str, ref: LocalObjectKeyRef, field: str
) -> str | bytes:
    """``data[key]`` as text, or ``binaryData[key]`` decoded to bytes."""
    obj = await reader.read_config_map(namespace, ref.name)
    if obj is None:
        raise _absent(missing("ConfigMap", namespace, ref, field, found=False))
    text = (obj.get("data") or {}).get(ref.key)
    if isinstance(text, str):
        return text
    encoded = (obj.get("binaryData") or {}).get(ref.key)
    if isinstance(encoded, str):
        return _base64(encoded, f"{field}: ConfigMap '{ref.name}' key '{ref.key}'")
    raise _absent(missing("ConfigMap", namespace, ref, field, found=True, where=" in data or binaryData"))


async def _secret_value(reader: ObjectReader, namespace: str, ref: LocalObjectKeyRef, field: str) -> bytes:
    try:
        encoded = await secret_key(reader, namespace, ref, field)
    except KeyMissing as gone:
        raise _absent(gone) from None
    return _base64(encoded, f"{field}: Secret '{ref.name}' key '{ref.key}'")


def _absent(gone: KeyMissing) -> SourceError:
    return SourceError(
        gone.reason, gone.hinted("create it or correct the name", "add it or correct the key"), permanent=True
    )


def _base64(encoded: str, where: str) -> bytes:
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        # The API server only stores valid base64, so this is a reader that did not decode as it says.
        raise invalid(f"{where} is not valid base64") from None


__all__ = [
    "ObjectReader",
    "Resolved",
    "SourceError",
    "SourceSettings",
    "check_one_source",
    "clear_cache",
    "resolve",
]
