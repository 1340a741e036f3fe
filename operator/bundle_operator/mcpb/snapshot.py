"""One private, unchanging copy of an archive, taken in one pass that also computes its SHA-256.

Whoever can write the archive's file could change it between two reads: swap an entry for one of
the same size and CRC-32 while it is extracted and put it back before a final hash, or let the
signature be checked over one version and the manifest read from another. So the file is read
exactly once, into an anonymous temporary file only this process holds (``O_TMPFILE`` where the
system has it), hashed on the way; the lock, the signature, the manifest and every extracted byte
then come from that copy. The copy lives on disk, so memory stays flat whatever the size.

Before anything is read the file must be a regular file (a FIFO or ``/dev/zero`` would block or
never end; it is opened non-blocking so even the open cannot hang) no larger than the limit.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.limits import Limits

CHUNK = 1024 * 1024
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_NOCTTY", 0)
)


@dataclass(frozen=True)
class Snapshot:
    """The archive's bytes as they were read once: ``file`` never changes, ``sha256`` is of it."""

    file: BinaryIO
    sha256: str
    size: int


def _too_large(size: int, limits: Limits) -> Refused:
    return Refused("file_too_large", f"the file is {size} bytes; at most {limits.max_file_bytes}")


def _check_descriptor(fd: int, limits: Limits) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise Refused("not_a_file", "the archive is not a regular file (a device, pipe, socket or folder)")
    if info.st_size > limits.max_file_bytes:
        raise _too_large(info.st_size, limits)


@contextmanager
def snapshot_path(path: str | os.PathLike[str], limits: Limits) -> Iterator[Snapshot]:
    """Open ``path`` (OSError when it cannot be), check what it is and yield its snapshot."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        _check_descriptor(fd, limits)  # before fdopen, which refuses a folder with its own error
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", buffering=0) as f, snapshot_open(f, limits) as snap:
        yield snap


@contextmanager
def snapshot_open(f: BinaryIO, limits: Limits) -> Iterator[Snapshot]:
    """The snapshot of an open file; bytes in memory (``io.BytesIO``) are already private to the caller."""
    if isinstance(f, io.BytesIO):
        size = f.seek(0, os.SEEK_END)
        if size > limits.max_file_bytes:
            raise _too_large(size, limits)
        yield Snapshot(f, _sha256_of(f), size)
        return
    try:
        fd: int | None = f.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor: the copy caps it
        fd = None
    if fd is not None:
        _check_descriptor(fd, limits)
    with tempfile.TemporaryFile(prefix=".mcpb-snapshot-") as copy:
        digest, size = _copy_hashing(f, copy, limits)
        yield Snapshot(copy, digest, size)


def _sha256_of(f: BinaryIO) -> str:
    h = hashlib.sha256()
    f.seek(0)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while n := f.readinto(view):  # type: ignore[attr-defined]
        h.update(view[:n])
    return h.hexdigest()


def _copy_hashing(f: BinaryIO, out: BinaryIO, limits: Limits) -> tuple[str, int]:
    h = hashlib.sha256()
    f.seek(0)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    size = 0
    while n := f.readinto(view):  # type: ignore[attr-defined]
        size += n
        if size > limits.max_file_bytes:  # it grew after the size check: never read past the limit
            raise _too_large(size, limits)
        h.update(view[:n])
        out.write(view[:n])
    out.flush()
    return h.hexdigest(), size
