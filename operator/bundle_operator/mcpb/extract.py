"""Contained extraction: an accepted archive into a new private folder, or nothing at all.

The archive is copied once into a private snapshot (hashed on the way), judged from it, and then
unpacked from that same copy, so what is written is exactly what was judged and what the lock
names, whatever happens to the original file meanwhile. Only after it is accepted is the folder
created (mode 0700, and it must not exist yet, so it is new). Entries are written with exclusive
creates that never follow a link, and the bytes written are counted against the limits again.
Any refusal removes the folder. The result carries the lock (the snapshot's SHA-256) and the tree
digest to re-check before each use.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.inflate import RandomAccess, UnpackCounter, stream_entry
from bundle_operator.mcpb.limits import DEFAULT_LIMITS, Limits
from bundle_operator.mcpb.reader import Inspection, inspect_snapshot
from bundle_operator.mcpb.snapshot import snapshot_path
from bundle_operator.mcpb.treedigest import PREFIX, tree_digest

# O_NOFOLLOW and O_CLOEXEC do not exist on Windows (where bundlectl may still run), O_BINARY only there.
_PLATFORM_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _PLATFORM_FLAGS


@dataclass(frozen=True)
class Extracted:
    """Where the bundle was unpacked, its lock and the digest of the tree as written."""

    path: Path
    lock: str
    tree_digest: str
    inspection: Inspection


def extract_file(
    archive: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    platform: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Extracted:
    """Unpack ``archive`` into the new folder ``dest``.

    Raises ``Refused`` (leaving no trace) when the archive or the destination is refused, and
    ``OSError`` when the archive cannot be read or the folder cannot be written.
    """
    target = Path(dest)
    if target.exists() or target.is_symlink():
        raise Refused("destination_exists", f"{target} already exists; extraction needs a new folder")
    if not target.parent.is_dir():
        raise Refused("destination_missing", f"{target.parent} is not a folder")
    with snapshot_path(archive, limits) as snap:
        inspection = inspect_snapshot(snap, platform=platform, limits=limits)
        if inspection.refused:
            raise Refused(inspection.code or "refused", inspection.reason or "the archive was refused")
        try:
            os.mkdir(target, 0o700)
        except FileExistsError:
            raise Refused("destination_exists", f"{target} already exists") from None
        try:
            _write_entries(snap.file, inspection, target, limits)
            digest = tree_digest(target)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    return Extracted(path=target, lock=PREFIX + inspection.sha256, tree_digest=digest, inspection=inspection)


def _write_entries(f: BinaryIO, inspection: Inspection, root: Path, limits: Limits) -> None:
    counter = UnpackCounter(limits)
    source = RandomAccess(f)
    real_root = os.path.realpath(root)
    for entry in sorted(inspection.entries, key=lambda e: e.local_offset):
        path = root / entry.name
        if entry.is_dir:
            _make_dirs(path, real_root)
            continue
        _make_dirs(path.parent, real_root)
        fd = os.open(path, _FILE_FLAGS, 0o700 if entry.executable else 0o600)
        with os.fdopen(fd, "wb") as out:
            written = 0

            def write(chunk: bytes, out: BinaryIO = out) -> None:
                nonlocal written
                written += out.write(chunk)

            stream_entry(source, entry, inspection.data_starts[entry.local_offset], counter, write)
        if written != entry.uncompressed_size:
            raise Refused("entry_size_mismatch", f"entry '{entry.name}' wrote {written} bytes")


def _make_dirs(path: Path, real_root: str) -> None:
    if path.is_dir() and not path.is_symlink():
        return
    _make_dirs(path.parent, real_root)
    os.mkdir(path, 0o700)
    # Names were checked already; this guards the guard, in case a folder is not where it seems.
    if not os.path.realpath(path).startswith(real_root + os.sep):
        raise Refused("entry_path", f"'{path}' would land outside the extraction folder")
