""".mcpb archives as Bundle sources: read once per content, then judged by each Bundle's signature policy.

Reading (the archive reader, the conversion and the parse) is blocking work and runs in a worker
thread. The same bytes always read the same way, so what reading found is cached by the archive's
SHA-256; the policy (requireSignature, trustedFingerprints) differs per Bundle and is applied on
every resolve. An archive kept in a Secret is a Secret's value: its details stay out of conditions.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

from bundle_operator.document.parse import ParsedBundle, parse_bundle_data
from bundle_operator.mcpb.convert import to_bundle
from bundle_operator.mcpb.errors import Refused, printable
from bundle_operator.mcpb.limits import DEFAULT_LIMITS
from bundle_operator.mcpb.reader import Inspection, inspect_file, inspect_open
from bundle_operator.mcpb.signature import SignatureResult
from bundle_operator.sources.archive_store import ARCHIVES
from bundle_operator.sources.downloads import downloaded
from bundle_operator.sources.models import McpbSource, SignatureStatus
from bundle_operator.sources.resolution import BoundedCache, SourceError, SourceSettings

ARCHIVE_MAX_BYTES = DEFAULT_LIMITS.max_file_bytes  # 128 MiB: what the .mcpb reader accepts at all
CACHE_MAX_ENTRIES = 64
CACHE_MAX_SOURCE_BYTES = 8 * 1024 * 1024
_ARCHIVE_WEIGHT = 64 * 1024  # a converted archive is a one-MCP document: small whatever the archive's size


@dataclass(frozen=True)
class Archive:
    """What reading an archive found, before a Bundle's signature policy is applied to it."""

    signature: SignatureResult | None
    parsed: ParsedBundle | None
    refused_code: str | None = None
    refused_reason: str | None = None
    sha256: str = ""  # of the archive's bytes (hex)

    @property
    def provides(self) -> tuple[str, ...]:
        """The archive as the document's MCP names it (``sha256:<hex>``): what an install may upload."""
        return (f"sha256:{self.sha256}",)


@dataclass(frozen=True)
class SignaturePolicy:
    """What a Bundle asks of an archive's signature; a registry source asks nothing."""

    require_signature: bool = False
    trusted_fingerprints: tuple[str, ...] = ()
    field: str = "spec.source.mcpb"

    @classmethod
    def of(cls, source: McpbSource) -> SignaturePolicy:
        """The policy an mcpb source sets."""
        return cls(source.require_signature, tuple(source.trusted_fingerprints))


# Keyed by ("bytes", sha256) for content the operator already holds, and by ("url", url, sha256)
# for downloads: a URL entry is only ever found again through the same URL, so knowing a checksum
# alone cannot pull another Bundle's document out of the cache.
_ARCHIVES: BoundedCache[Archive] = BoundedCache(CACHE_MAX_ENTRIES, CACHE_MAX_SOURCE_BYTES)


def clear_archives() -> None:
    """Forget every archive read (tests; a fresh start)."""
    _ARCHIVES.clear()
    ARCHIVES.clear()


def cached_download(url: str, sha256: str) -> Archive | None:
    """The archive read from ``url`` with ``sha256`` earlier, without any network call (None when
    its bytes, which an install uploads, are no longer kept)."""
    return _ARCHIVES.get(("url", url, sha256)) if ARCHIVES.has(sha256) else None


async def archive_from_url(
    url: str, sha256: str, settings: SourceSettings, field: str, *, too_large: str = "FetchFailed"
) -> Archive:
    """The archive at ``url``, downloaded (at most 128 MiB) and checked against ``sha256``, then read."""
    key = ("url", url, sha256)
    archive = _ARCHIVES.get(key)
    if archive is None or not ARCHIVES.has(sha256):
        async with downloaded(url, sha256, ARCHIVE_MAX_BYTES, settings, field, too_large=too_large) as path:
            archive = await asyncio.to_thread(_read_archive_file, path, field)
            if archive.parsed is not None:
                await asyncio.to_thread(ARCHIVES.keep_file, path, sha256)
        _ARCHIVES.put(key, archive, _ARCHIVE_WEIGHT)
    return archive


async def archive_from_bytes(data: bytes, pinned: str | None, field: str) -> Archive:
    """An archive the operator holds (a ConfigMap's or Secret's bytes), held to a pinned SHA-256."""
    sha256 = hashlib.sha256(data).hexdigest()
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
    if archive.parsed is not None and not ARCHIVES.has(sha256):
        await asyncio.to_thread(ARCHIVES.keep_bytes, data, sha256)
    return archive


def _read_archive_file(path: Path, field: str) -> Archive:
    try:
        return _converted(inspect_file(path))
    except OSError as exc:  # our own download went missing: not the archive's fault
        raise SourceError(
            "FetchFailed",
            f"{field}: the downloaded archive could not be read ({exc.strerror})",
            permanent=False,
        ) from None


def _read_archive_bytes(data: bytes) -> Archive:
    # A ConfigMap or Secret holds at most 1 MiB: read from memory, so nothing touches the disk.
    return _converted(inspect_open(io.BytesIO(data)))


def _converted(inspection: Inspection) -> Archive:
    """Inspection -> conversion -> parse, all blocking: runs in a worker thread."""
    if inspection.refused:
        return Archive(inspection.signature, None, inspection.code, inspection.reason)
    try:
        conversion = to_bundle(inspection)
    except Refused as refusal:  # a uv bundle: read, never run
        return Archive(inspection.signature, None, refusal.code, refusal.reason)
    return Archive(inspection.signature, parse_bundle_data(conversion.document), sha256=inspection.sha256)


def accept(
    archive: Archive, policy: SignaturePolicy, *, in_secret: bool
) -> tuple[ParsedBundle, SignatureStatus]:
    """Apply the reader's verdict and the Bundle's signature policy to a read archive."""
    if archive.parsed is None:
        raise _refusal(
            archive.refused_code or "refused", archive.refused_reason or "", in_secret, policy.field
        )
    return archive.parsed, _signature_status(archive.signature, policy)


def _refusal(code: str, reason: str, in_secret: bool, field: str) -> SourceError:
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
            f"{field}: the archive's signature does not verify ({code}){detail}; "
            "use an intact archive from its publisher",
            permanent=True,
        )
    return SourceError("ArchiveRefused", f"{field}: the archive is refused ({code}){detail}", permanent=True)


def _signature_status(result: SignatureResult | None, policy: SignaturePolicy) -> SignatureStatus:
    if result is None or result.status != "signed":
        # A trust list is pointless if removing the signature gets past it: it requires one too.
        if policy.require_signature or policy.trusted_fingerprints:
            setting = "requireSignature" if policy.require_signature else "trustedFingerprints"
            raise SourceError(
                "SignatureRequired",
                f"{policy.field}.{setting}: the archive is not signed; use a signed archive "
                "or drop the requirement",
                permanent=True,
            )
        return SignatureStatus(status="Unsigned")
    subject = printable(result.subject or "", 256)  # the certificate's text, chosen by whoever made it
    fingerprint = result.fingerprint_sha256 or ""
    trusted = {_fingerprint(f) for f in policy.trusted_fingerprints}
    if trusted and _fingerprint(fingerprint) not in trusted:
        raise SourceError(
            "SignerNotTrusted",
            f"{policy.field}.trustedFingerprints: the archive is signed by '{subject}' "
            f"(SHA-256 fingerprint {fingerprint}), which is not listed; add that fingerprint if you "
            "trust this signer, or use an archive signed by a listed one",
            permanent=True,
        )
    return SignatureStatus(status="Signed", subject=subject, fingerprint_sha256=fingerprint)


def _fingerprint(text: str) -> str:
    """A fingerprint as compared: lowercase hex, without the ':' separators openssl prints."""
    return text.replace(":", "").strip().lower()
