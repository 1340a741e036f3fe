"""Contained extraction: a new private folder, the lock, the tree digest, and nothing left on refusal."""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.mcpb import Limits, Refused
from bundle_operator.mcpb.extract import extract_file
from bundle_operator.mcpb.treedigest import check_tree, tree_digest

from .craft import RawEntry, honest_entries, link_attr, manifest_entry, write_zip, zero_bomb_stream

MiB = 1024 * 1024


def _archive(tmp_path: Path, entries: list[RawEntry]) -> Path:
    path = tmp_path / "bundle.mcpb"
    path.write_bytes(write_zip(entries))
    return path


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        out[path.relative_to(root).as_posix()] = oct(stat.S_IMODE(mode)) + ("/" if path.is_dir() else "")
    return out


def test_an_accepted_archive_is_unpacked_into_a_new_private_folder(tmp_path: Path) -> None:
    entries = [
        *honest_entries(),
        RawEntry("bin/tool", b"#!/bin/sh\necho hi\n", external_attr=0o755 << 16),
        RawEntry("docs/", b"", method=0, external_attr=0o40755 << 16),
        RawEntry("deep/a/b/c.txt", b"nested"),
    ]
    archive = _archive(tmp_path, entries)
    dest = tmp_path / "out"
    extracted = extract_file(archive, dest, platform="linux")
    assert extracted.lock == "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    assert (dest / "server/index.js").read_bytes() == b"console.log('weather');\n"
    assert (dest / "deep/a/b/c.txt").read_bytes() == b"nested"
    assert _tree(dest) == {
        "bin": "0o700/",
        "bin/tool": "0o700",
        "deep": "0o700/",
        "deep/a": "0o700/",
        "deep/a/b": "0o700/",
        "deep/a/b/c.txt": "0o600",
        "docs": "0o700/",
        "manifest.json": "0o600",
        "server": "0o700/",
        "server/index.js": "0o600",
    }
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700
    assert extracted.tree_digest == tree_digest(dest)
    check_tree(dest, extracted.tree_digest)


def test_the_destination_must_be_new(tmp_path: Path) -> None:
    archive = _archive(tmp_path, honest_entries())
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(Refused) as exc:
        extract_file(archive, dest, platform="linux")
    assert exc.value.code == "destination_exists"
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize(
    "hostile",
    [
        RawEntry("../escape.txt", b"x"),
        RawEntry("server/link", b"/etc/passwd", method=0, external_attr=link_attr()),
        RawEntry("server/secret.js", b"x", flags=1),
        RawEntry("data/bomb.bin", b"", compressed=zero_bomb_stream(64), declared_size=1024, crc=0),
    ],
    ids=["escape", "link", "encrypted", "lying-bomb"],
)
def test_a_refused_archive_leaves_nothing_behind(tmp_path: Path, hostile: RawEntry) -> None:
    archive = _archive(tmp_path, [*honest_entries(), hostile])
    dest = tmp_path / "out"
    with pytest.raises(Refused):
        extract_file(archive, dest, platform="linux")
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.mcpb"]


def test_bytes_written_are_counted_against_the_limits(tmp_path: Path) -> None:
    entries = [*honest_entries(), *(RawEntry(f"data/{i}.bin", bytes(MiB)) for i in range(4))]
    archive = _archive(tmp_path, entries)
    with pytest.raises(Refused) as exc:
        extract_file(archive, tmp_path / "out", platform="linux", limits=Limits(max_unpacked_bytes=3 * MiB))
    assert exc.value.code == "unpacked_too_large"
    assert not (tmp_path / "out").exists()


def _forge_crc(data: bytes, target: int, at: int) -> bytes:
    """``data`` with the 4 bytes at ``at`` replaced so that its CRC-32 becomes ``target``."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table.append(c)
    top = {t >> 24: i for i, t in enumerate(table)}
    state = target ^ 0xFFFFFFFF
    for byte in reversed(data[at + 4 :]):
        i = top[state >> 24]
        state = ((state ^ table[i]) << 8 | (i ^ byte)) & 0xFFFFFFFF
    picks = []
    for _ in range(4):
        i = top[state >> 24]
        picks.append(i)
        state = ((state ^ table[i]) << 8) & 0xFFFFFFFF
    c, patch = zlib.crc32(data[:at]) ^ 0xFFFFFFFF, bytearray()
    for i in reversed(picks):
        patch.append((c ^ i) & 0xFF)
        c = (c >> 8) ^ table[(c ^ patch[-1]) & 0xFF]
    forged = data[:at] + bytes(patch) + data[at + 4 :]
    assert zlib.crc32(forged) == target
    return forged


def test_what_is_written_is_what_the_lock_names_even_if_the_file_is_swapped_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer of the file swaps an entry for one of the same size and CRC-32 while it is being
    # extracted and restores it afterwards. The tree must hold the bytes the lock names.
    from bundle_operator.mcpb import extract as extract_module

    good = b"console.log('weather');            /*pad*/\n"
    evil = b"require('child_process').exec('id');//XXXX\n"
    evil = _forge_crc(evil, zlib.crc32(good), evil.index(b"XXXX"))
    archive = _archive(tmp_path, [manifest_entry(), RawEntry("server/index.js", good, method=0)])
    original = archive.read_bytes()
    at = original.index(good)
    real = extract_module.stream_entry

    def swapped_meanwhile(*args: Any, **kwargs: Any) -> None:
        with archive.open("r+b") as w:
            w.seek(at)
            w.write(evil)
        try:
            real(*args, **kwargs)
        finally:
            with archive.open("r+b") as w:
                w.seek(at)
                w.write(good)

    monkeypatch.setattr(extract_module, "stream_entry", swapped_meanwhile)
    extracted = extract_file(archive, tmp_path / "out", platform="linux")
    assert extracted.lock == "sha256:" + hashlib.sha256(original).hexdigest()
    assert (tmp_path / "out" / "server" / "index.js").read_bytes() == good


@pytest.mark.parametrize("change", ["edit", "add-file", "add-folder", "remove", "chmod", "link", "rename"])
def test_any_change_to_the_tree_is_caught_before_use(tmp_path: Path, change: str) -> None:
    archive = _archive(tmp_path, [*honest_entries(), RawEntry("lib/util.js", b"util")])
    dest = tmp_path / "out"
    digest = extract_file(archive, dest, platform="linux").tree_digest
    target = dest / "server/index.js"
    if change == "edit":
        target.write_bytes(b"console.log('evil');\n")
    elif change == "add-file":
        (dest / "server/extra.js").write_bytes(b"")
    elif change == "add-folder":
        (dest / "server/new").mkdir()
    elif change == "remove":
        target.unlink()
    elif change == "chmod":
        target.chmod(0o700)
    elif change == "link":
        (dest / "lib/util.js").unlink()
        os.symlink("/etc/passwd", dest / "lib/util.js")
    elif change == "rename":
        (dest / "lib").rename(dest / "lab")
    with pytest.raises(Refused) as exc:
        check_tree(dest, digest)
    assert exc.value.code == "tree_changed"


def test_the_tree_digest_does_not_depend_on_where_or_when_the_tree_was_written(tmp_path: Path) -> None:
    archive = _archive(tmp_path, [*honest_entries(), RawEntry("b.txt", b"b"), RawEntry("a/z.txt", b"z")])
    first = extract_file(archive, tmp_path / "one", platform="linux")
    second = extract_file(archive, tmp_path / "two", platform="linux")
    assert first.tree_digest == second.tree_digest
    check_tree(tmp_path / "two", first.tree_digest)
