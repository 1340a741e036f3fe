"""Downloads for Bundle sources through the guarded fetcher, and its refusals as conditions.

Messages name the field to fix and show URLs without their query string, which may hold a token.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bundle_operator.fetch import PRIVATE_NETWORKS, FetchRefused, fetch_to_file
from bundle_operator.sources.resolution import SourceError, SourceSettings, invalid

# What to do about a download refused for good, by FetchRefused code.
_FETCH_HINTS = {
    "address_not_public": "only public addresses are fetched; serve the file from one",
    "not_https": "only https URLs are fetched",
    "credentials_in_url": "put no user or password in the URL",
    "too_large": "serve a smaller file",
    "tls_untrusted": "trust its CA (SSL_CERT_FILE in the operator's environment, --ca-file for bundlectl)",
}


# Downloads in flight at once, per process: each may hold up to 128 MiB in the temporary directory
# (the chart's /tmp emptyDir is sized for this many), however many Bundles reconcile together.
MAX_CONCURRENT_DOWNLOADS = 2
_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _slots() -> asyncio.Semaphore:
    """This event loop's download slots (a semaphore belongs to one loop)."""
    loop = asyncio.get_running_loop()
    slots = _SLOTS.get(loop)
    if slots is None:
        slots = _SLOTS[loop] = asyncio.Semaphore(MAX_CONCURRENT_DOWNLOADS)
    return slots


def allowed_networks(settings: SourceSettings) -> tuple[str, ...]:
    """The non-public networks a fetch may reach under these settings (none in production)."""
    return PRIVATE_NETWORKS if settings.allow_private_sources else ()


@asynccontextmanager
async def downloaded(
    url: str,
    sha256: str,
    max_bytes: int,
    settings: SourceSettings,
    field: str,
    *,
    too_large: str = "FetchFailed",
) -> AsyncIterator[Path]:
    """``url`` in a private file checked against ``sha256``, removed when the block ends.

    The download holds one of the process's download slots until its file is gone. ``too_large``
    is the reason a file over ``max_bytes`` stalls with.
    """
    async with _slots():
        path = await _download(url, sha256, max_bytes, settings, field, too_large)
        try:
            yield path
        finally:
            await remove(path)


async def _download(
    url: str, sha256: str, max_bytes: int, settings: SourceSettings, field: str, too_large: str
) -> Path:
    try:
        fetched = await fetch_to_file(
            url,
            expected_sha256=sha256,
            max_bytes=max_bytes,
            dest_dir=settings.cache_dir,
            allow_networks=allowed_networks(settings),
            verify=settings.verify,
            total_timeout=settings.download_timeout,
        )
    except FetchRefused as refusal:
        if refusal.code == "too_large":
            raise SourceError(
                too_large, f"{field}: {refusal.reason}; serve a smaller file", permanent=True
            ) from None
        raise fetch_error(refusal, field) from None
    except OSError as exc:  # the download could not be written: disk full, cache_dir gone
        raise SourceError(
            "FetchFailed",
            f"{field}: the download could not be saved ({exc.strerror or type(exc).__name__})",
            permanent=False,
        ) from None
    return fetched.path


def fetch_error(refusal: FetchRefused, field: str) -> SourceError:
    """A refused download as a condition: its reason names the host and path, never the query."""
    if refusal.code == "checksum_mismatch":
        return SourceError(
            "ChecksumMismatch",
            f"{field}: {refusal.reason}; correct the sha256 or the file it points at",
            permanent=True,
        )
    if refusal.code == "bad_checksum":
        return invalid(f"{field}: the sha256 is not 64 hex digits")
    if refusal.transient:
        return SourceError("FetchFailed", f"{field}: {refusal.reason}", permanent=False)
    hint = _FETCH_HINTS.get(refusal.code, "correct the URL or what it serves")
    return SourceError("FetchFailed", f"{field}: {refusal.reason}; {hint}", permanent=True)


async def remove(path: Path) -> None:
    """Remove a download; shielded, so a cancelled reconcile still leaves nothing behind."""
    await asyncio.shield(asyncio.to_thread(path.unlink, missing_ok=True))
