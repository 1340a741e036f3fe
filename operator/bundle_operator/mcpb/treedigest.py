"""A digest of an unpacked bundle's folder, recorded at extraction and re-checked before each use.

Every folder and file counts: its relative path, and for a file its size, executable bit and
SHA-256. A link or special file anywhere, an added, removed or changed file or folder gives a
different digest (or is refused outright), so a changed tree is never used.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from bundle_operator.mcpb.errors import Refused

PREFIX = "sha256:"
_CHUNK = 1024 * 1024


def _file_digest(path: str) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(_CHUNK):
            size += len(chunk)
            h.update(chunk)
    return size, h.hexdigest()


def tree_digest(root: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` over the whole tree under ``root``; refuses links and special files."""
    h = hashlib.sha256()
    base = Path(root)
    if base.is_symlink() or not base.is_dir():
        raise Refused("tree_changed", f"{base} is not a folder")
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(base / rel_dir if rel_dir else base) as it:
            children = sorted(it, key=lambda e: e.name.encode("utf-8", "surrogateescape"))
        for child in children:
            rel = f"{rel_dir}/{child.name}" if rel_dir else child.name
            info = child.stat(follow_symlinks=False)
            name = rel.encode("utf-8", "surrogateescape")
            if stat.S_ISDIR(info.st_mode):
                h.update(b"d\0" + name + b"\0")
                pending.append(rel)
            elif stat.S_ISREG(info.st_mode):
                size, digest = _file_digest(child.path)
                executable = b"x" if info.st_mode & stat.S_IXUSR else b"-"
                h.update(b"f\0" + name + b"\0" + executable + f"\0{size}\0{digest}\0".encode())
            else:
                raise Refused(
                    "tree_changed", f"'{rel}' in the unpacked bundle is not a regular file or folder"
                )
        # Folders are walked depth-first but recorded in sorted order, so the digest is stable.
        pending.sort(reverse=True)
    return PREFIX + h.hexdigest()


def check_tree(root: str | os.PathLike[str], expected: str) -> None:
    """Refuse when the tree under ``root`` is not exactly the one that was extracted."""
    actual = tree_digest(root)
    if actual != expected:
        raise Refused(
            "tree_changed", f"the unpacked bundle at {root} changed since it was extracted; it is not used"
        )
