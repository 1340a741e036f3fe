"""What resolving a Bundle's source gives and how it fails, shared by every kind of source."""

from __future__ import annotations

import ssl
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from bundle_operator.document.parse import ParsedBundle
from bundle_operator.sources.models import SignatureStatus, SourceStatus


@dataclass(frozen=True)
class SourceSettings:
    """How sources are fetched: the operator's settings, or a test's."""

    allow_private_sources: bool = False  # lets source URLs reach loopback and private networks (tests only)
    verify: ssl.SSLContext | bool = (
        True  # TLS trust for fetches (fetch.tls_context(); tests trust their own CA)
    )
    cache_dir: Path | None = None  # where downloads are written while they are read (default: the temp dir)
    registry_timeout: float = 30.0  # one read of a registry record, redirects included
    download_timeout: float = 300.0  # one archive or document download


@dataclass(frozen=True)
class Resolved:
    """A source read and parsed; ``origin`` is for people and never holds a secret or a query string.

    ``source`` says what a registry source resolved to; ``warnings`` are for a Warning event
    (a deprecated registry record).
    """

    parsed: ParsedBundle
    signature: SignatureStatus | None
    origin: str
    source: SourceStatus | None = None
    warnings: tuple[str, ...] = field(default=())
    # The archives (``sha256:<hex>``) the document's MCPs run from, which this source provided.
    archives: tuple[str, ...] = ()


class SourceError(Exception):
    """The source cannot be read; ``permanent`` when nothing changes without a user's action."""

    def __init__(self, reason: str, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.permanent = permanent


def invalid(message: str) -> SourceError:
    """A spec that cannot be resolved as written (``InvalidSource``)."""
    return SourceError("InvalidSource", message, permanent=True)


V = TypeVar("V")


class BoundedCache(Generic[V]):
    """A small least-recently-used map, bounded in entries and in the source bytes its values came from."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._items: OrderedDict[tuple[str, ...], tuple[V, int]] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0

    def get(self, key: tuple[str, ...]) -> V | None:
        """The value under ``key``, now the most recently used, or None."""
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: tuple[str, ...], value: V, size: int) -> None:
        """Keep ``value``, forgetting the least recently used entries beyond the bounds."""
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
        """Forget everything."""
        self._items.clear()
        self._bytes = 0
