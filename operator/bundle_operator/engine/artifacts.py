"""The archives an install delivers to the platform before the MCPs that run from them.

An MCP made from an .mcpb names its archive by SHA-256 (``artifact.digest``); the engine never
knows where the bytes live. Whoever runs the engine hands it an ``ArtifactFiles``: the CLI reads
the files a person gives, the operator the archives its Bundle sources fetched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

PATH = "artifacts"  # the platform collection; a part's id is the digest


class ArtifactUnavailable(Exception):
    """The run needs an archive the platform lacks and nobody gave it."""

    def __init__(self, digest: str, reason: str) -> None:
        super().__init__(f"the archive {digest} is not on the platform and {reason}")
        self.digest = digest


class ArtifactFiles(Protocol):
    """Archives by digest (``sha256:<hex>``), read when the platform does not have them yet."""

    def holds(self, digest: str) -> bool:
        """Whether this source can give the archive."""
        ...

    async def read(self, digest: str) -> bytes:
        """The archive's bytes; ``ArtifactUnavailable`` when this source does not hold it."""
        ...


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of an archive's bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class ArchiveFiles:
    """Archives from files on this machine, indexed by their content (``bundlectl install --artifact``)."""

    paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def of(cls, files: Iterable[Path]) -> ArchiveFiles:
        """Index ``files`` by digest (each read once, in chunks)."""
        found = cls()
        for path in files:
            h = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(1024 * 1024):
                    h.update(chunk)
            found.paths["sha256:" + h.hexdigest()] = path
        return found

    def holds(self, digest: str) -> bool:
        return digest in self.paths

    async def read(self, digest: str) -> bytes:
        path = self.paths.get(digest)
        if path is None:
            raise ArtifactUnavailable(digest, "no --artifact file given has that digest")
        data = path.read_bytes()
        if digest_of(data) != digest:  # changed since it was indexed
            raise ArtifactUnavailable(digest, f"{path.name} changed since it was read")
        return data


@dataclass(frozen=True)
class AnyOf:
    """Several sources of archives, asked in order."""

    sources: tuple[ArtifactFiles, ...]

    def holds(self, digest: str) -> bool:
        return any(source.holds(digest) for source in self.sources)

    async def read(self, digest: str) -> bytes:
        for source in self.sources:
            if source.holds(digest):
                return await source.read(digest)
        raise ArtifactUnavailable(digest, "no source of this run holds it")


def any_of(*sources: ArtifactFiles | None) -> ArtifactFiles | None:
    """The sources given (None when there are none)."""
    present = tuple(s for s in sources if s is not None)
    return None if not present else present[0] if len(present) == 1 else AnyOf(present)
