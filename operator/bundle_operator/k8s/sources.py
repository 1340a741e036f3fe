"""Resolve a Bundle's ``spec.source`` into a parsed bundle document and the Bundle's status fields.

Four kinds of source (DESIGN.md §4): the document inline in the spec, a ConfigMap key, an https
URL pinned by SHA-256, or a .mcpb archive (by URL, ConfigMap or Secret) that is read, verified and
converted. Everything here is plain async Python: Kubernetes objects come through the small
``ObjectReader`` protocol, so this module imports neither kopf nor kubernetes and tests without a
cluster. Blocking work (reading archives, parsing big documents, file I/O) runs in worker threads:
one blocking call inside ``async def`` would freeze every handler of the operator.

Errors are ``SourceError`` with a CamelCase reason for the Bundle's conditions and a message that
names the field to fix; no message carries a Secret's bytes or the document's text (CONVENTIONS.md
"Secrets"), and URLs are shown without their query string, which may hold a token.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import re
import ssl
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import httpx

from bundle_operator.document.parse import (
    MAX_SOURCE_BYTES,
    ParsedBundle,
    parse_bundle_data,
    parse_bundle_text,
)
from bundle_operator.fetch import FetchRefused, fetch_to_file, shown
from bundle_operator.k8s.object_keys import KeyMissing, missing, secret_key
from bundle_operator.k8s.resources import (
    BundleSource,
    LocalObjectKeyRef,
    McpbSource,
    SignatureStatus,
    UrlSource,
)
from bundle_operator.mcpb.convert import to_bundle
from bundle_operator.mcpb.errors import Refused, printable
from bundle_operator.mcpb.limits import DEFAULT_LIMITS
from bundle_operator.mcpb.reader import Inspection, inspect_file, inspect_open
from bundle_operator.mcpb.signature import SignatureResult

DOCUMENT_MAX_BYTES = MAX_SOURCE_BYTES  # 5 MiB: what the parser accepts at all
ARCHIVE_MAX_BYTES = DEFAULT_LIMITS.max_file_bytes  # 128 MiB: what the .mcpb reader accepts at all
# What --allow-private-sources opens up: loopback and the private ranges (tests and local setups).
PRIVATE_NETWORKS = ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
# Resolved documents kept for re-reconciles. A parsed document keeps its YAML node tree (for line
# numbers) alive, many times the text's size, so the cache is bounded in source bytes as well.
CACHE_MAX_ENTRIES = 64
CACHE_MAX_SOURCE_BYTES = 8 * 1024 * 1024
_RETRYABLE_STATUS = frozenset({408, 425, 429})
# FetchRefused codes for failures that may pass by themselves: the source is retried with backoff.
_TRANSIENT_FETCH_CODES = frozenset({"dns_failed", "timeout", "fetch_failed"})
_ANSWERED = re.compile(r"answered (\d{3})$")
# What to do about a download refused for good, by FetchRefused code.
_FETCH_HINTS = {
    "address_not_public": "only public addresses are fetched; serve the file from one",
    "not_https": "only https URLs are fetched",
    "credentials_in_url": "put no user or password in the URL",
    "too_large": "serve a smaller file",
}


class ObjectReader(Protocol):
    """Reads the objects a source refers to, in the Bundle's namespace; None when one is missing."""

    async def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ConfigMap as the API returns it (``binaryData`` base64), or None when it is missing."""
        ...

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret as the API returns it (``data`` base64), or None when it is missing."""
        ...


@dataclass(frozen=True)
class SourceSettings:
    """How sources are fetched: the operator's settings, or a test's."""

    allow_private_sources: bool = False  # lets url/mcpb URLs reach loopback and private networks (tests only)
    verify: ssl.SSLContext | bool = True  # TLS verification for URL fetches (tests trust their own CA)
    cache_dir: Path | None = None  # where downloads are written while they are read (default: the temp dir)


@dataclass(frozen=True)
class Resolved:
    """A source read and parsed; ``origin`` is for people and never holds a secret or a query string."""

    parsed: ParsedBundle
    signature: SignatureStatus | None
    origin: str


class SourceError(Exception):
    """The source cannot be read; ``permanent`` when nothing changes without a user's action."""

    def __init__(self, reason: str, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.permanent = permanent


# ----------------------------------------------------------------------------------------- cache

V = TypeVar("V")


class _Cache(Generic[V]):
    """A small least-recently-used map, bounded in entries and in the source bytes its values came from."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._items: OrderedDict[tuple[str, ...], tuple[V, int]] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0

    def get(self, key: tuple[str, ...]) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: tuple[str, ...], value: V, size: int) -> None:
        if size > self._max_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._items[key] = (value, size)
        self._bytes += size
        while len(self._items) > self._max_entries or self._bytes > self._max_bytes:
            _, (_, evicted) = self._items.popitem(last=False)
            self._bytes -= evicted

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0


@dataclass(frozen=True)
class _Archive:
    """What reading an archive found, before the Bundle's signature policy is applied to it.

    The same bytes always read the same way, so this is cached by the archive's SHA-256; the policy
    (requireSignature, trustedFingerprints) differs per Bundle and is applied on every resolve.
    """

    signature: SignatureResult | None
    parsed: ParsedBundle | None
    refused_code: str | None = None
    refused_reason: str | None = None


# Keyed by (kind, sha256) for content the operator already holds, and by (kind, url, sha256) for
# downloads: a URL entry is only ever found again through the same URL, so knowing a checksum alone
# cannot pull another Bundle's document out of the cache.
_DOCUMENTS: _Cache[ParsedBundle] = _Cache(CACHE_MAX_ENTRIES, CACHE_MAX_SOURCE_BYTES)
_ARCHIVES: _Cache[_Archive] = _Cache(CACHE_MAX_ENTRIES, CACHE_MAX_SOURCE_BYTES)
_ARCHIVE_WEIGHT = 64 * 1024  # a converted archive is a one-MCP document: small whatever the archive's size


def clear_cache() -> None:
    """Forget every resolved document and archive (tests; a fresh start)."""
    _DOCUMENTS.clear()
    _ARCHIVES.clear()


# --------------------------------------------------------------------------------------- resolve


async def resolve(
    source: BundleSource, namespace: str, reader: ObjectReader, settings: SourceSettings
) -> Resolved:
    """Read the Bundle's source and parse the document; raises ``SourceError`` when it cannot be read.

    A document that is read but broken is not an error: it comes back parsed, with its issues.
    """
    check_one_source(source)
    if source.inline is not None:
        parsed = await asyncio.to_thread(parse_bundle_data, source.inline)
        return Resolved(parsed, None, "inline")
    if source.config_map_ref is not None:
        return await _resolve_config_map(source.config_map_ref, namespace, reader)
    if source.url is not None:
        return await _resolve_url(source.url, settings)
    assert source.mcpb is not None  # check_one_source saw exactly one
    return await _resolve_mcpb(source.mcpb, namespace, reader, settings)


def _exactly_one(field: str, options: tuple[tuple[str, object], ...]) -> None:
    """Refuse unless exactly one of the named options is set, naming what was found."""
    given = [name for name, value in options if value is not None]
    if len(given) != 1:
        found = ", ".join(given) if given else "none"
        names = ", ".join(name for name, _ in options)
        raise _invalid(f"{field}: set exactly one of {names} (found: {found})")


def check_one_source(source: BundleSource) -> None:
    """Refuse (``SourceError``) unless exactly one kind of source is set."""
    _exactly_one(
        "spec.source",
        (
            ("inline", source.inline),
            ("configMapRef", source.config_map_ref),
            ("url", source.url),
            ("mcpb", source.mcpb),
        ),
    )


def _invalid(message: str) -> SourceError:
    return SourceError("InvalidSource", message, permanent=True)


async def _resolve_config_map(ref: LocalObjectKeyRef, namespace: str, reader: ObjectReader) -> Resolved:
    content = await _config_map_value(reader, namespace, ref, "spec.source.configMapRef")
    parsed = await _parse_cached(content)
    return Resolved(parsed, None, f"ConfigMap {ref.name}/{ref.key}")


async def _parse_cached(content: str | bytes) -> ParsedBundle:
    """Parse a document's text, reusing the result for the same bytes."""
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    key = ("text", hashlib.sha256(data).hexdigest())
    parsed = _DOCUMENTS.get(key)
    if parsed is None:
        parsed = await asyncio.to_thread(parse_bundle_text, content)
        _DOCUMENTS.put(key, parsed, len(data))
    return parsed


async def _resolve_url(source: UrlSource, settings: SourceSettings) -> Resolved:
    origin = _shown(source.url)
    key = ("url", source.url, source.sha256)
    parsed = _DOCUMENTS.get(key)
    if parsed is None:
        path = await _download(source.url, source.sha256, DOCUMENT_MAX_BYTES, settings, "spec.source.url")
        data = await _read_and_remove(path)
        parsed = await asyncio.to_thread(parse_bundle_text, data)
        _DOCUMENTS.put(key, parsed, len(data))
    return Resolved(parsed, None, origin)


# ------------------------------------------------------------------------------------------ mcpb


async def _resolve_mcpb(
    source: McpbSource, namespace: str, reader: ObjectReader, settings: SourceSettings
) -> Resolved:
    _check_mcpb(source)
    if source.url is not None:
        assert source.sha256 is not None  # _check_mcpb
        archive = await _archive_from_url(source.url, source.sha256, settings)
        return _accept(archive, source, f"mcpb {_shown(source.url)}", in_secret=False)
    data, field, origin = await _archive_bytes(source, namespace, reader)
    archive = await _archive_from_bytes(data, source.sha256, field)
    return _accept(archive, source, origin, in_secret=source.secret_ref is not None)


def _check_mcpb(source: McpbSource) -> None:
    _exactly_one(
        "spec.source.mcpb",
        (("url", source.url), ("configMapRef", source.config_map_ref), ("secretRef", source.secret_ref)),
    )
    if source.url is not None and source.sha256 is None:
        raise _invalid("spec.source.mcpb.sha256: required with url; set it to the archive's SHA-256")


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


async def _archive_from_url(url: str, sha256: str, settings: SourceSettings) -> _Archive:
    key = ("url", url, sha256)
    archive = _ARCHIVES.get(key)
    if archive is None:
        path = await _download(url, sha256, ARCHIVE_MAX_BYTES, settings, "spec.source.mcpb.url")
        try:
            archive = await asyncio.to_thread(_read_archive_file, path)
        finally:
            await _remove(path)
        _ARCHIVES.put(key, archive, _ARCHIVE_WEIGHT)
    return archive


async def _archive_from_bytes(data: bytes, pinned: str | None, field: str) -> _Archive:
    sha256 = hashlib.sha256(data).hexdigest()
    # sha256 is optional beside a ConfigMap or Secret; when the spec pins the archive, hold to it.
    if pinned is not None and sha256 != pinned:
        raise SourceError(
            "ChecksumMismatch",
            f"{field}: the archive does not match spec.source.mcpb.sha256; "
            "correct the checksum or the archive",
            permanent=True,
        )
    key = ("bytes", sha256)
    archive = _ARCHIVES.get(key)
    if archive is None:
        archive = await asyncio.to_thread(_read_archive_bytes, data)
        _ARCHIVES.put(key, archive, _ARCHIVE_WEIGHT)
    return archive


def _read_archive_file(path: Path) -> _Archive:
    try:
        return _converted(inspect_file(path))
    except OSError as exc:  # our own download went missing: not the archive's fault
        raise SourceError(
            "FetchFailed",
            f"spec.source.mcpb.url: the downloaded archive could not be read ({exc.strerror})",
            permanent=False,
        ) from None


def _read_archive_bytes(data: bytes) -> _Archive:
    # A ConfigMap or Secret holds at most 1 MiB: read from memory, so nothing touches the disk.
    return _converted(inspect_open(io.BytesIO(data)))


def _converted(inspection: Inspection) -> _Archive:
    """Inspection -> conversion -> parse, all blocking: runs in a worker thread."""
    if inspection.refused:
        return _Archive(inspection.signature, None, inspection.code, inspection.reason)
    try:
        conversion = to_bundle(inspection)
    except Refused as refusal:  # a uv bundle: read, never run
        return _Archive(inspection.signature, None, refusal.code, refusal.reason)
    return _Archive(inspection.signature, parse_bundle_data(conversion.document))


def _accept(archive: _Archive, source: McpbSource, origin: str, *, in_secret: bool) -> Resolved:
    """Apply the reader's verdict and the Bundle's signature policy to a read archive."""
    if archive.parsed is None:
        raise _refusal(archive.refused_code or "refused", archive.refused_reason or "", in_secret)
    return Resolved(archive.parsed, _signature_status(archive.signature, source), origin)


def _refusal(code: str, reason: str, in_secret: bool) -> SourceError:
    # A reason quotes the archive (entry names, manifest fields); an archive kept in a Secret is a
    # Secret's value, so its details stay out of the condition and bundlectl shows them instead.
    detail = (
        "; run `bundlectl mcpb inspect` on the archive for the details (not shown: it is kept in a Secret)"
        if in_secret
        else f": {reason}"
    )
    if code.startswith("signature_"):
        return SourceError(
            "SignatureInvalid",
            f"spec.source.mcpb: the archive's signature does not verify ({code}){detail}; "
            "use an intact archive from its publisher",
            permanent=True,
        )
    return SourceError(
        "ArchiveRefused", f"spec.source.mcpb: the archive is refused ({code}){detail}", permanent=True
    )


def _signature_status(result: SignatureResult | None, source: McpbSource) -> SignatureStatus:
    if result is None or result.status != "signed":
        # A trust list is pointless if removing the signature gets past it: it requires one too.
        if source.require_signature or source.trusted_fingerprints:
            setting = "requireSignature" if source.require_signature else "trustedFingerprints"
            raise SourceError(
                "SignatureRequired",
                f"spec.source.mcpb.{setting}: the archive is not signed; use a signed archive "
                "or drop the requirement",
                permanent=True,
            )
        return SignatureStatus(status="Unsigned")
    subject = printable(result.subject or "", 256)  # the certificate's text, chosen by whoever made it
    fingerprint = result.fingerprint_sha256 or ""
    trusted = {_fingerprint(f) for f in source.trusted_fingerprints}
    if trusted and _fingerprint(fingerprint) not in trusted:
        raise SourceError(
            "SignerNotTrusted",
            f"spec.source.mcpb.trustedFingerprints: the archive is signed by '{subject}' "
            f"(SHA-256 fingerprint {fingerprint}), which is not listed; add that fingerprint if you "
            "trust this signer, or use an archive signed by a listed one",
            permanent=True,
        )
    return SignatureStatus(status="Signed", subject=subject, fingerprint_sha256=fingerprint)


def _fingerprint(text: str) -> str:
    """A fingerprint as compared: lowercase hex, without the ':' separators openssl prints."""
    return text.replace(":", "").strip().lower()


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
        raise _invalid(f"{where} is not valid base64") from None


async def _download(url: str, sha256: str, max_bytes: int, settings: SourceSettings, field: str) -> Path:
    """Fetch ``url`` into a private file checked against ``sha256``; the caller removes the file."""
    try:
        fetched = await fetch_to_file(
            url,
            expected_sha256=sha256,
            max_bytes=max_bytes,
            dest_dir=settings.cache_dir,
            allow_networks=PRIVATE_NETWORKS if settings.allow_private_sources else (),
            verify=settings.verify,
        )
    except FetchRefused as refusal:
        raise _fetch_error(refusal, field) from None
    except OSError as exc:  # the download could not be written: disk full, cache_dir gone
        raise SourceError(
            "FetchFailed",
            f"{field}: the download could not be saved ({exc.strerror or type(exc).__name__})",
            permanent=False,
        ) from None
    return fetched.path


def _fetch_error(refusal: FetchRefused, field: str) -> SourceError:
    """A refused download as a condition: its reason names the host and path, never the query."""
    if refusal.code == "checksum_mismatch":
        return SourceError(
            "ChecksumMismatch",
            f"{field}: {refusal.reason}; correct the sha256 or the file it points at",
            permanent=True,
        )
    if refusal.code == "bad_checksum":
        return _invalid(f"{field}: the sha256 is not 64 hex digits")
    if refusal.code in _TRANSIENT_FETCH_CODES or _retryable_status(refusal):
        return SourceError("FetchFailed", f"{field}: {refusal.reason}", permanent=False)
    hint = _FETCH_HINTS.get(refusal.code, "correct the URL or what it serves")
    return SourceError("FetchFailed", f"{field}: {refusal.reason}; {hint}", permanent=True)


def _retryable_status(refusal: FetchRefused) -> bool:
    """5xx, 408, 425 and 429 may pass; any other status (404, 403) needs the URL or server fixed."""
    if refusal.code != "http_status":
        return False
    match = _ANSWERED.search(refusal.reason)
    if match is None:
        return True  # unknown wording: retrying with backoff is the safe side
    status = int(match.group(1))
    return status >= 500 or status in _RETRYABLE_STATUS


def _shown(url: str) -> str:
    """The URL as people may see it: no query string, no credentials."""
    try:
        return shown(httpx.URL(url))
    except httpx.InvalidURL:
        return "(a URL that cannot be read)"


async def _read_and_remove(path: Path) -> bytes:
    try:
        return await asyncio.to_thread(path.read_bytes)
    finally:
        await _remove(path)


async def _remove(path: Path) -> None:
    # Shielded: a cancelled reconcile must still not leave a download behind.
    await asyncio.shield(asyncio.to_thread(path.unlink, missing_ok=True))


__all__ = [
    "ObjectReader",
    "Resolved",
    "SourceError",
    "SourceSettings",
    "clear_cache",
    "resolve",
]
