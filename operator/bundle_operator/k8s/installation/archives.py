"""The archives one installation may upload: those its own Bundle's source provided (DESIGN.md §9.7)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bundle_operator.engine.artifacts import ArtifactUnavailable
from bundle_operator.sources.archive_store import ARCHIVES, ArchiveStore


@dataclass(frozen=True)
class SourceArchives:
    """The engine's ``ArtifactFiles`` for one installation, read from the operator's archive store.

    Knowing a digest is not enough: an archive another Bundle fetched (perhaps from a Secret) is
    not this installation's to upload.
    """

    digests: frozenset[str]
    store: ArchiveStore = ARCHIVES

    def holds(self, digest: str) -> bool:
        return digest in self.digests and self.store.has(digest.removeprefix("sha256:"))

    async def read(self, digest: str) -> bytes:
        if digest not in self.digests:
            raise ArtifactUnavailable(digest, "the Bundle's source did not provide it")
        data = await asyncio.to_thread(self.store.read, digest.removeprefix("sha256:"))
        if data is None:
            raise ArtifactUnavailable(digest, "the operator no longer holds it; the Bundle fetches it again")
        return data
