"""The archives the operator keeps for installs, and which of them one installation may upload."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_operator.engine.artifacts import ArtifactUnavailable
from bundle_operator.k8s.installation.archives import SourceArchives
from bundle_operator.sources.archive_store import ArchiveStore


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def store() -> Iterator[ArchiveStore]:
    kept = ArchiveStore(max_entries=2, max_bytes=1000)
    yield kept
    kept.clear()


def test_kept_bytes_and_files_read_back_checked(store: ArchiveStore, tmp_path: Path) -> None:
    one, two = b"one" * 10, b"two" * 10
    store.keep_bytes(one, _hex(one))
    (tmp_path / "two.mcpb").write_bytes(two)
    store.keep_file(tmp_path / "two.mcpb", _hex(two))
    assert store.read(_hex(one)) == one and store.read(_hex(two)) == two
    assert store.has(_hex(one)) and not store.has(_hex(b"three"))


def test_the_least_recently_kept_goes_first(store: ArchiveStore) -> None:
    blobs = [bytes([i]) * 100 for i in range(3)]
    for blob in blobs:
        store.keep_bytes(blob, _hex(blob))
    assert [store.has(_hex(b)) for b in blobs] == [False, True, True]
    big = b"x" * 990  # with another kept, over the byte bound
    store.keep_bytes(big, _hex(big))
    assert store.has(_hex(big)) and not store.has(_hex(blobs[1]))


def test_an_archive_changed_on_disk_is_not_handed_out(store: ArchiveStore) -> None:
    data = b"archive"
    store.keep_bytes(data, _hex(data))
    path = next(p for p in store._root().iterdir() if p.name == _hex(data))
    path.write_bytes(b"tampered")
    assert store.read(_hex(data)) is None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_installation_gets_only_its_own_sources_archives(
    store: ArchiveStore, anyio_backend: str
) -> None:
    mine, theirs = b"mine", b"theirs"
    for data in (mine, theirs):
        store.keep_bytes(data, _hex(data))
    view = SourceArchives(frozenset({"sha256:" + _hex(mine)}), store)
    assert view.holds("sha256:" + _hex(mine)) and not view.holds("sha256:" + _hex(theirs))
    assert await view.read("sha256:" + _hex(mine)) == mine
    with pytest.raises(ArtifactUnavailable, match="did not provide it"):
        await view.read("sha256:" + _hex(theirs))  # kept, but another Bundle's
