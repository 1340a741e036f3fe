"""The .mcpb archives Bundle sources fetched, kept on disk by SHA-256 for the installs that upload them.

Reading an archive (``archives``) keeps only what the reader found; an MCP made from it runs from
the archive itself, which install uploads to the platform (DESIGN.md §9.7), so the bytes are kept
too: in a private folder, bounded in count and size, the least recently kept going first. An
installation sees only the archives its own Bundle's source provided (``k8s.installation.archives``):
knowing a digest alone never hands another namespace's archive (perhaps kept in a Secret) to a platform.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

MAX_ENTRIES = 16
MAX_BYTES = 2 * 1024 * 1024 * 1024


class ArchiveStore:
    """Archives by hex SHA-256 in a private folder made on first use."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._folder: Path | None = None
        self._sizes: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def _root(self) -> Path:
        if self._folder is None or not self._folder.is_dir():
            self._folder = Path(tempfile.mkdtemp(prefix="bundle-operator-archives-"))
            self._sizes.clear()
        return self._folder

    def has(self, sha256: str) -> bool:
        """Whether the archive is kept (and its file still there)."""
        with self._lock:
            return sha256 in self._sizes and (self._root() / sha256).is_file()

    def keep_file(self, path: Path, sha256: str) -> None:
        """Keep a copy of a checked download (blocking: call it in a worker thread)."""
        self._keep(sha256, lambda partial: shutil.copyfile(path, partial))

    def keep_bytes(self, data: bytes, sha256: str) -> None:
        """Keep an archive held in memory (a ConfigMap's or Secret's bytes)."""

        def write(partial: Path) -> None:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)

        self._keep(sha256, write)

    def _keep(self, sha256: str, write: Callable[[Path], object]) -> None:
        """Write the archive beside its place and move it in, unless it is kept already."""
        with self._lock:
            target = self._root() / sha256
            if sha256 in self._sizes and target.is_file():
                self._sizes.move_to_end(sha256)
                return
            partial = target.with_name(f".{sha256}.{os.getpid()}.{threading.get_ident()}")
            write(partial)
            os.replace(partial, target)
            self._kept(sha256, target.stat().st_size)

    def _kept(self, sha256: str, size: int) -> None:
        self._sizes[sha256] = size
        self._sizes.move_to_end(sha256)
        while len(self._sizes) > 1 and (
            len(self._sizes) > self.max_entries or sum(self._sizes.values()) > self.max_bytes
        ):
            old, _ = self._sizes.popitem(last=False)
            with contextlib.suppress(FileNotFoundError):
                (self._root() / old).unlink()

    def read(self, sha256: str) -> bytes | None:
        """The archive's bytes, checked against its digest; None when it is not kept (or changed)."""
        with self._lock:
            if sha256 not in self._sizes:
                return None
            path = self._root() / sha256
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return data if hashlib.sha256(data).hexdigest() == sha256 else None

    def clear(self) -> None:
        """Forget every archive (tests; a fresh start)."""
        with self._lock:
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
            self._sizes.clear()


ARCHIVES = ArchiveStore()
