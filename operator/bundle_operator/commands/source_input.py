"""Reading a document the user names on the command line: a file, standard input, or an https URL."""

from __future__ import annotations

import asyncio
import ssl
import sys
from pathlib import Path

from bundle_operator.document.source import MAX_SOURCE_BYTES
from bundle_operator.fetch import PRIVATE_NETWORKS, FetchRefused, fetch_to_file, shown_text

# Refusals that mean the URL or checksum as given cannot be used at all (a usage error, exit 2);
# the others say the document behind a usable URL could not be read (exit 1).
USAGE_REFUSALS = frozenset({"not_https", "credentials_in_url", "bad_url", "bad_checksum"})


class SourceInputError(Exception):
    """The named file cannot be read."""


class SourceFetchError(SourceInputError):
    """The URL could not be fetched; ``refusal`` is the fetcher's, ``code`` its refusal code."""

    def __init__(self, refusal: FetchRefused) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal
        self.code = refusal.code


def is_url(name: str) -> bool:
    """Whether the name on the command line is a URL rather than a file."""
    return name.lower().startswith(("https://", "http://"))


def read_source(name: str) -> bytes:
    """The bytes of a file, or of standard input for '-', read no further than the size cap allows."""
    limit = MAX_SOURCE_BYTES + 1  # one byte more, so the parser reports the size instead of a cut
    if name == "-":
        return sys.stdin.buffer.read(limit)
    path = Path(name)
    try:
        with path.open("rb") as handle:
            return handle.read(limit)
    except FileNotFoundError:
        raise SourceInputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise SourceInputError(f"{name}: is a directory") from None
    except OSError as exc:
        raise SourceInputError(f"{name}: {exc.strerror}") from None


def fetch_source(
    url: str,
    *,
    sha256: str | None = None,
    allow_private: bool = False,
    ca_file: str | None = None,
) -> bytes:
    """The document at an https URL, fetched as seed 000's ``source_url`` is: through the SSRF-guarded
    fetcher (https only, public addresses only, checked again at every redirect) with the 5 MiB
    document cap. A checksum is optional, as it is for ``source_url``; when given it must match.
    Messages show the URL without its query string or user part."""
    try:
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
    except (OSError, ssl.SSLError) as exc:
        raise SourceInputError(f"--ca-file {ca_file}: cannot be read as PEM ({type(exc).__name__})") from None
    try:
        fetched = asyncio.run(
            fetch_to_file(
                url,
                expected_sha256=sha256,
                max_bytes=MAX_SOURCE_BYTES,
                allow_networks=PRIVATE_NETWORKS if allow_private else (),
                verify=verify,
            )
        )
    except FetchRefused as refusal:
        raise SourceFetchError(refusal) from None
    except OSError as exc:  # the download could not be written: disk full, no temporary directory
        reason = exc.strerror or type(exc).__name__
        saved = FetchRefused("fetch_failed", f"{shown_text(url)}: could not be saved ({reason})")
        raise SourceFetchError(saved) from None
    try:
        return fetched.path.read_bytes()
    finally:
        fetched.path.unlink(missing_ok=True)
