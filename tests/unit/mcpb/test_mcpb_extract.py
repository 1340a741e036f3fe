"""Contained extraction: a new private folder, the lock, the tree digest, and nothing left on refusal."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from bundle_operator.mcpb import Limits, Refused
from bundle_operator.mcpb.extract import extract_file
from bundle_operator.mcpb.treedigest import check_tree, tree_digest

from .craft import RawEntry, honest_entries, link_attr, write_zip, zero_bomb_stream

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


def test_an_archive_changed_during_extraction_is_refused_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundle_operator.mcpb import extract as extract_module

    archive = _archive(tmp_path, honest_entries())
    real = extract_module.whole_file_sha256

    def changed_underneath(f: object) -> str:
        with archive.open("ab") as out:  # someone appends while we write
            out.write(b"x")
        return real(f)  # type: ignore[arg-type]

    monkeypatch.setattr(extract_module, "whole_file_sha256", changed_underneath)
    with pytest.raises(Refused) as exc:
        extract_file(archive, tmp_path / "out", platform="linux")
    assert exc.value.code == "archive_changed"
    assert not (tmp_path / "out").exists()


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
