"""A Bundle's MCP Registry source (DESIGN.md §9.3, seed 003): nothing is used before it is verified.

The record is read and judged (a deleted version, no mcpb package, a package URL that is not plain
https, no digest, or a digest that differs from the pinned one: nothing is downloaded). Right before
the download the record is read again; if it changed, nothing is used. The archive is downloaded
behind the fetcher's guards, at most 128 MiB, its SHA-256 checked before anything reads it, and
then read exactly like an ``mcpb`` source. An archive already read for the same URL and digest is
not downloaded again, and then the second read has nothing to guard.

A record with several mcpb packages (one build per platform) is read package by package, in the
record's order: the first whose manifest supports this platform is used, and when none does the
Bundle stalls with ``RegistryNoCompatiblePackage`` and a message naming each package and why.
"""

from __future__ import annotations

from bundle_operator.fetch import shown_text as shown_url
from bundle_operator.registry.client import RegistryClient, RegistryError
from bundle_operator.registry.names import LATEST, InvalidName
from bundle_operator.registry.records import (
    Installable,
    NotInstallable,
    Record,
    package_verdicts,
    record_label,
)
from bundle_operator.sources.archive_store import ARCHIVES
from bundle_operator.sources.archives import (
    CACHE_MAX_ENTRIES,
    Archive,
    SignaturePolicy,
    accept,
    archive_from_url,
    cached_download,
)
from bundle_operator.sources.downloads import allowed_networks
from bundle_operator.sources.models import RegistrySource, SourceStatus
from bundle_operator.sources.resolution import BoundedCache, Resolved, SourceError, SourceSettings

FIELD = "spec.source.registry"
_POLICY = SignaturePolicy(field=FIELD)
_RESOLVED_WEIGHT = 64 * 1024
# What a Bundle's reconcile resolved, by (registry, server, version, sha256): an installation of
# that Bundle installs exactly this (DESIGN.md §9.3) without reading the registry once more.
_RESOLVED: BoundedCache[Resolved] = BoundedCache(CACHE_MAX_ENTRIES, CACHE_MAX_ENTRIES * _RESOLVED_WEIGHT)


def clear_registry_cache() -> None:
    """Forget every registry source resolved (tests; a fresh start)."""
    _RESOLVED.clear()


def pinned(source: RegistrySource, status: SourceStatus) -> RegistrySource:
    """``source`` held to what its Bundle resolved: the version and digest in ``status.source``."""
    return source.model_copy(update={"version": status.version, "file_sha256": status.sha256})


async def resolve_registry(
    source: RegistrySource, settings: SourceSettings, *, reuse: bool = False
) -> Resolved:
    """Resolve a registry source; ``reuse`` takes an earlier resolution of the same pinned version.

    Raises ``SourceError`` with the Stalled reasons of DESIGN.md §9.3.
    """
    if reuse and source.version != LATEST and source.file_sha256 is not None:
        hit = _RESOLVED.get(_key(source.url, source.server, source.version, source.file_sha256))
        if hit is not None and ARCHIVES.has(source.file_sha256):
            return hit
    try:
        client = RegistryClient(
            source.url,
            allow_networks=allowed_networks(settings),
            verify=settings.verify,
            timeout=settings.registry_timeout,
        )
    except InvalidName as exc:
        raise SourceError("InvalidSource", f"{FIELD}.url: {exc}", permanent=True) from None
    first = await _read(client, source)
    verdicts = package_verdicts(first, source.file_sha256)
    if isinstance(verdicts, NotInstallable):
        raise SourceError(verdicts.reason, f"{FIELD}: {verdicts.message}", permanent=True)
    usable = [v for v in verdicts if isinstance(v, Installable)]
    if not usable:
        refusal = verdicts[0]
        assert isinstance(refusal, NotInstallable)
        raise SourceError(refusal.reason, f"{FIELD}: {refusal.message}", permanent=True)
    download = _Download(client, source, settings, first)
    if len(verdicts) == 1:
        choice = usable[0]
        archive = await download.archive(choice)
    else:
        choice, archive = await _for_this_platform(download, verdicts, first)
    parsed, signature = accept(archive, _POLICY, in_secret=False)
    status = SourceStatus(
        registry=client.base,
        server=source.server,
        version=first.version,
        package_url=shown_url(choice.package_url),
        sha256=choice.sha256,
    )
    resolved = Resolved(
        parsed,
        signature,
        f"registry {source.server} {first.version}",
        source=status,
        warnings=(choice.warning,) if choice.warning else (),
        archives=archive.provides,
    )
    _RESOLVED.put(_key(client.base, source.server, first.version, choice.sha256), resolved, _RESOLVED_WEIGHT)
    return resolved


class _Download:
    """Downloads a record's packages; the record is read once more before the first download."""

    def __init__(
        self, client: RegistryClient, source: RegistrySource, settings: SourceSettings, first: Record
    ) -> None:
        self._client, self._source, self._settings, self._first = client, source, settings, first
        self._rechecked = False

    async def archive(self, choice: Installable) -> Archive:
        """The package's archive, read from the cache or downloaded and checked against its digest."""
        archive = cached_download(choice.package_url, choice.sha256)
        if archive is not None:
            return archive
        if not self._rechecked:
            second = await _read(self._client, self._source)
            if second.fingerprint != self._first.fingerprint:
                raise SourceError(
                    "RegistryRecordChanged",
                    f"{FIELD}: the record of {self._source.server} {self._first.version} changed between "
                    "its two reads; nothing was downloaded, and it is read afresh at the next refresh",
                    permanent=True,
                )
            self._rechecked = True
        try:
            return await archive_from_url(
                choice.package_url, choice.sha256, self._settings, FIELD, too_large="ArchiveRefused"
            )
        except SourceError as exc:
            raise _checked(exc, choice) from None


async def _for_this_platform(
    download: _Download, verdicts: list[Installable | NotInstallable], record: Record
) -> tuple[Installable, Archive]:
    """The first package whose archive's manifest supports this platform, or a refusal naming each."""
    why_not: list[str] = []
    for verdict in verdicts:
        if isinstance(verdict, NotInstallable):
            why_not.append(f"({verdict.reason}) {verdict.message}")
            continue
        archive = await download.archive(verdict)
        # Any other refusal is this build's own fault: it is chosen, and accept() reports it.
        if archive.refused_code != "platform":
            return verdict, archive
        why_not.append(f"{shown_url(verdict.package_url)}: {archive.refused_reason}")
    raise SourceError(
        "RegistryNoCompatiblePackage",
        f"{FIELD}: none of the {len(verdicts)} mcpb packages of {record_label(record)} runs on this "
        f"platform: {'; '.join(why_not)}",
        permanent=True,
    )


def _key(registry: str, server: str, version: str, sha256: str) -> tuple[str, ...]:
    return ("registry", registry.rstrip("/"), server, version, sha256)


async def _read(client: RegistryClient, source: RegistrySource) -> Record:
    try:
        return await client.record(source.server, source.version)
    except RegistryError as exc:
        raise SourceError(exc.reason, f"{FIELD}: {exc.message}", permanent=exc.permanent) from None


def _checked(exc: SourceError, choice: Installable) -> SourceError:
    """A download refusal, worded for a registry package (seed 003: a mismatch is never used)."""
    if exc.reason != "ChecksumMismatch":
        return exc
    where = (
        "its registry record gives"
        if choice.digest_from == "record"
        else "spec.source.registry.fileSha256 pins"
    )
    return SourceError(
        "ChecksumMismatch",
        f"{FIELD}: the archive at {shown_url(choice.package_url)} does not match the SHA-256 {where}, "
        "so it was not used",
        permanent=True,
    )
