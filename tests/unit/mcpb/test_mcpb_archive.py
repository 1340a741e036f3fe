"""Archive-level rules: sizes, counts, entry types and names, encryption, bombs, broken zips."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
import time
import warnings
import zipfile
from pathlib import Path

import pytest

from bundle_operator.mcpb import Limits, inspect_file

from .conftest import Inspect
from .craft import RawEntry, build, honest_entries, link_attr, manifest_entry, write_zip, zero_bomb_stream

MiB = 1024 * 1024


def test_an_honest_archive_is_accepted_and_its_sha256_is_the_files(tmp_path: Path) -> None:
    path = build(tmp_path / "ok.mcpb")
    result = inspect_file(path, platform="linux")
    assert (result.verdict, result.code, result.reason) == ("accepted", None, None)
    assert result.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert result.signature is not None and result.signature.status == "unsigned"


def test_entries_without_file_type_bits_are_regular_files(inspect_bytes: Inspect) -> None:
    # The official packer writes `mode & 0o777` only: no S_IFREG. That must read as a plain file.
    entries = [manifest_entry(), RawEntry("server/index.js", b"x", external_attr=0o755 << 16)]
    result = inspect_bytes(write_zip(entries))
    assert result.verdict == "accepted"
    (index,) = [e for e in result.entries if e.name == "server/index.js"]
    assert index.executable and not index.is_dir


def test_explicit_regular_files_and_folders_are_accepted(inspect_bytes: Inspect) -> None:
    entries = [
        manifest_entry(),
        RawEntry("server/", b"", method=0, external_attr=(stat.S_IFDIR | 0o755) << 16),
        RawEntry("server/index.js", b"x", external_attr=(stat.S_IFREG | 0o644) << 16),
        RawEntry("docs/readme.txt", b"dos", create_system=0, external_attr=0x20),
        RawEntry("assets/", b"", method=0, create_system=0, external_attr=0x10),
    ]
    assert inspect_bytes(write_zip(entries)).verdict == "accepted"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("../evil.js", "escapes the archive"),
        ("server/../../evil.js", "escapes the archive"),
        ("/etc/passwd", "absolute path"),
        ("C:/Windows/evil.dll", "absolute path"),
        ("server\\evil.js", "backslash"),
        ("server//evil.js", "empty or '.' path component"),
        ("server/./evil.js", "empty or '.' path component"),
        ("bad\nname.js", "control character"),
        ("x" * 300 + ".js", "too long"),
    ],
)
def test_unsafe_entry_names_are_refused(inspect_bytes: Inspect, name: str, fragment: str) -> None:
    result = inspect_bytes(write_zip([*honest_entries(), RawEntry(name, b"boom")]))
    assert (result.verdict, result.code) == ("refused", "entry_path")
    assert fragment in (result.reason or "")


def test_a_symbolic_link_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("server/link", b"/etc/passwd", method=0, external_attr=link_attr())
    result = inspect_bytes(write_zip([*honest_entries(), entry]))
    assert (result.verdict, result.code) == ("refused", "entry_link")
    assert "server/link" in (result.reason or "")


def test_a_windows_reparse_point_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("server/junction", b"", create_system=0, external_attr=0x400)
    assert inspect_bytes(write_zip([*honest_entries(), entry])).code == "entry_link"


@pytest.mark.parametrize("kind", [stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK])
def test_special_files_are_refused(inspect_bytes: Inspect, kind: int) -> None:
    entry = RawEntry("server/dev", b"", external_attr=(kind | 0o644) << 16)
    assert inspect_bytes(write_zip([*honest_entries(), entry])).code == "entry_type"


def test_a_folder_named_like_a_file_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("server/lib", b"", method=0, external_attr=(stat.S_IFDIR | 0o755) << 16)
    assert inspect_bytes(write_zip([*honest_entries(), entry])).code == "entry_type"


@pytest.mark.parametrize(("flags", "method"), [(0x1, 8), (0x41, 8), (0x1, 99)])
def test_encrypted_entries_are_refused(inspect_bytes: Inspect, flags: int, method: int) -> None:
    entry = RawEntry("server/secret.js", b"x", flags=flags, method=method)
    result = inspect_bytes(write_zip([*honest_entries(), entry]))
    assert (result.code, result.reason) == ("entry_encrypted", "entry 'server/secret.js' is encrypted")


def test_an_unknown_compression_method_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("server/x.js", b"x", method=12, compressed=b"BZh9")
    assert inspect_bytes(write_zip([*honest_entries(), entry])).code == "entry_compression"


def test_duplicate_names_are_refused(inspect_bytes: Inspect) -> None:
    entries = [*honest_entries(), RawEntry("server/index.js", b"console.log('other')")]
    result = inspect_bytes(write_zip(entries))
    assert (result.code, result.reason) == (
        "entry_duplicate",
        "entry 'server/index.js' appears more than once",
    )


def test_a_file_and_a_folder_of_the_same_name_are_refused(inspect_bytes: Inspect) -> None:
    entries = [*honest_entries(), RawEntry("lib", b"file"), RawEntry("lib/inner.js", b"x")]
    assert inspect_bytes(write_zip(entries)).code == "entry_duplicate"


@pytest.mark.parametrize(
    "names",
    [
        ["lib", "lib-extra/x.js", "lib.d/y.js", "lib/deep/inner.js"],  # '-' and '.' sort before '/'
        ["deep/a/b/c", "Deep/A/B/c/d.js"],
    ],
)
def test_a_file_with_entries_inside_it_is_refused_wherever_they_sort(
    inspect_bytes: Inspect, names: list[str]
) -> None:
    entries = [*honest_entries(), *(RawEntry(n, b"x") for n in names)]
    assert inspect_bytes(write_zip(entries)).code == "entry_duplicate"


def test_paths_deeper_than_64_folders_are_refused(inspect_bytes: Inspect) -> None:
    ok = "/".join(["d"] * 63) + "/file.js"  # 64 parts
    assert inspect_bytes(write_zip([*honest_entries(), RawEntry(ok, b"x")])).verdict == "accepted"
    deep = "/".join(["d"] * 64) + "/file.js"
    result = inspect_bytes(write_zip([*honest_entries(), RawEntry(deep, b"x")]))
    assert (result.verdict, result.code) == ("refused", "entry_path_depth")


def test_thousands_of_very_deep_entries_are_judged_quickly(inspect_bytes: Inspect) -> None:
    # 19,000 names of 500 parts each: checking every prefix of every name against the files was
    # quadratic in the depth (about 17 s of CPU for one archive of 40 MB).
    prefix = "a/" * 500
    entries = [*honest_entries(), *(RawEntry(f"{prefix}f{i:05}", b"", method=0) for i in range(19_000))]
    data = write_zip(entries)
    started = time.process_time()
    result = inspect_bytes(data)
    assert (result.verdict, result.code) == ("refused", "entry_path_depth")
    assert time.process_time() - started < 2.0


@pytest.mark.parametrize("other", ["SERVER/index.js", "server/INDEX.js", "Server/Index.JS"])
def test_names_differing_only_in_case_are_refused(inspect_bytes: Inspect, other: str) -> None:
    result = inspect_bytes(write_zip([*honest_entries(), RawEntry(other, b"x")]))
    assert result.code == "entry_case_collision"
    assert other in (result.reason or "")


def test_names_differing_only_in_unicode_form_are_refused(inspect_bytes: Inspect) -> None:
    composed, decomposed = "caf\u00e9.txt", "cafe\u0301.txt"
    entries = [
        *honest_entries(),
        RawEntry(composed, b"1", flags=0x800),
        RawEntry(decomposed, b"2", flags=0x800),
    ]
    assert inspect_bytes(write_zip(entries)).code == "entry_case_collision"


def test_a_file_over_128_mib_is_refused_before_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.mcpb"
    with path.open("wb") as f:  # sparse: costs no disk
        f.truncate(128 * MiB + 1)
    result = inspect_file(path, platform="linux")
    assert (result.verdict, result.code) == ("refused", "file_too_large")
    assert result.signature is None and result.manifest is None
    assert result.sha256 == ""  # refused by its size alone: not one byte was read or hashed


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_file_that_is_not_regular_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "pipe.mcpb"
        os.mkfifo(path)  # nobody writes: reading it would wait for ever
    elif kind == "device":
        path = Path("/dev/zero")  # reading it would never end
    else:
        path = tmp_path
    result = inspect_file(path, platform="linux")
    assert (result.verdict, result.code, result.sha256) == ("refused", "not_a_file", "")


def test_more_than_20000_files_are_refused(inspect_bytes: Inspect) -> None:
    entries = [*honest_entries(), *(RawEntry(f"data/{i:05}.txt", b"", method=0) for i in range(19_999))]
    result = inspect_bytes(write_zip(entries))
    assert (result.code, result.reason) == ("too_many_files", "the archive has 20001 entries; at most 20000")


def test_exactly_20000_files_are_accepted(inspect_bytes: Inspect) -> None:
    entries = [*honest_entries(), *(RawEntry(f"data/{i:05}.txt", b"", method=0) for i in range(19_998))]
    assert inspect_bytes(write_zip(entries)).verdict == "accepted"


def test_declared_sizes_over_512_mib_are_refused_without_inflating(inspect_bytes: Inspect) -> None:
    # Honest headers, real size: six entries of 100 MiB of zeros each (a ~600 KiB archive).
    bomb = zero_bomb_stream(100)
    entries = [*honest_entries()]
    for i in range(6):
        entries.append(RawEntry(f"data/{i}.bin", b"", compressed=bomb, declared_size=100 * MiB, crc=0))
    result = inspect_bytes(write_zip(entries))
    assert (result.code, result.reason) == (
        "unpacked_too_large",
        "the archive declares more than 536870912 bytes unpacked",
    )


def test_a_bomb_whose_header_lies_is_refused_at_its_declared_size(inspect_bytes: Inspect) -> None:
    # 1 GiB of zeros claiming to be 1 KiB: refused as soon as it passes its claim.
    entry = RawEntry("data/small.txt", b"", compressed=zero_bomb_stream(1024), declared_size=1024, crc=0)
    result = inspect_bytes(write_zip([*honest_entries(), entry]))
    assert result.code == "entry_size_mismatch"
    assert result.reason == "entry 'data/small.txt' inflates to more than the 1024 bytes it declares"


def test_real_unpacked_bytes_count_against_a_limit(inspect_bytes: Inspect) -> None:
    # Each header honest, the total over a (lowered) limit: the counter, not the headers, refuses.
    limits = Limits(max_unpacked_bytes=8 * MiB)
    entries = [*honest_entries()]
    entries += [RawEntry(f"data/{i}.bin", bytes(3 * MiB)) for i in range(3)]
    data = write_zip(entries)
    assert inspect_bytes(data, limits=Limits(max_unpacked_bytes=10 * MiB)).verdict == "accepted"
    assert inspect_bytes(data, limits=limits).code == "unpacked_too_large"


def test_an_entry_shorter_than_declared_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("data/a.txt", b"short", declared_size=500)
    assert inspect_bytes(write_zip([*honest_entries(), entry])).code == "entry_size_mismatch"


def test_a_crc_mismatch_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("data/a.txt", b"hello", crc=12345)
    result = inspect_bytes(write_zip([*honest_entries(), entry]))
    assert (result.code, result.reason) == ("entry_corrupt", "entry 'data/a.txt' fails its CRC check")


def test_broken_deflate_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("data/a.txt", b"hello", compressed=b"\xff\xff\xff\xff")
    assert inspect_bytes(write_zip([*honest_entries(), entry])).code == "entry_corrupt"


def test_a_manifest_over_1_mib_is_refused(inspect_bytes: Inspect, tmp_path: Path) -> None:
    from .craft import base_manifest

    big = base_manifest(long_description="x" * (1024 * 1024))
    result = inspect_file(build(tmp_path / "m.mcpb", big), platform="linux")
    assert (result.code, result.reason) == (
        "manifest_too_large",
        "manifest.json is larger than 1048576 bytes",
    )


def test_a_manifest_that_lies_about_its_size_is_refused(inspect_bytes: Inspect) -> None:
    entry = RawEntry("manifest.json", b"", compressed=zero_bomb_stream(4), declared_size=100, crc=0)
    entries = [entry, RawEntry("server/index.js", b"x")]
    assert inspect_bytes(write_zip(entries)).code == "entry_size_mismatch"


def test_an_archive_without_a_manifest_is_refused(inspect_bytes: Inspect) -> None:
    result = inspect_bytes(write_zip([RawEntry("server/index.js", b"x")]))
    assert (result.code, result.manifest) == ("manifest_missing", None)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "zip_malformed"),
        (b"not a zip at all", "zip_malformed"),
        (b"\x00" * 100_000, "zip_malformed"),
    ],
)
def test_non_zip_files_are_refused(inspect_bytes: Inspect, data: bytes, code: str) -> None:
    result = inspect_bytes(data)
    assert (result.verdict, result.code) == ("refused", code)
    assert result.sha256 == hashlib.sha256(data).hexdigest()


def test_bytes_after_the_zip_are_refused(inspect_bytes: Inspect) -> None:
    data = write_zip(honest_entries()) + b"trailing junk"
    result = inspect_bytes(data)
    assert (result.code, result.reason) == ("zip_malformed", "the file has bytes after the end of the zip")


def test_data_before_the_zip_is_refused(inspect_bytes: Inspect) -> None:
    # A self-extracting stub in front shifts every offset; the reader accepts no hidden prefix.
    assert inspect_bytes(b"#!/bin/sh\nexit 0\n" + write_zip(honest_entries())).code == "zip_malformed"


def test_a_truncated_archive_is_refused(inspect_bytes: Inspect) -> None:
    data = write_zip(honest_entries())
    assert inspect_bytes(data[: len(data) // 2]).verdict == "refused"


def test_overlapping_entries_are_refused(inspect_bytes: Inspect) -> None:
    # The quoted-overlap bomb shape: b.txt's local header also sits inside a.txt's stored data,
    # and b's central record points there, so both entries would read the same bytes.
    local_b = write_zip([RawEntry("b.txt", b"hello", method=0)])
    local_b = local_b[: local_b.find(b"PK\x01\x02")]
    data = bytearray(
        write_zip(
            [*honest_entries(), RawEntry("a.txt", local_b, method=0), RawEntry("b.txt", b"hello", method=0)]
        )
    )
    inside_a = data.find(local_b)
    struct.pack_into("<I", data, data.rfind(b"PK\x01\x02") + 42, inside_a)
    result = inspect_bytes(bytes(data))
    assert (result.code, result.reason) == ("zip_malformed", "entry 'b.txt' overlaps another entry")


def test_a_central_name_that_differs_from_the_local_one_is_refused(inspect_bytes: Inspect) -> None:
    data = bytearray(write_zip([*honest_entries(), RawEntry("aaaa.txt", b"x")]))
    local = data.find(b"aaaa.txt")
    data[local : local + 8] = b"../a.txt"
    assert inspect_bytes(bytes(data)).code == "zip_malformed"


def test_python_zipfile_archives_with_zip64_extras_are_read(tmp_path: Path) -> None:
    from .craft import base_manifest

    path = tmp_path / "z64.mcpb"
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("manifest.json", "w", force_zip64=True) as f:
            f.write(__import__("json").dumps(base_manifest()).encode())
        zf.writestr("server/index.js", b"x")
    path.write_bytes(buf.getvalue())
    assert inspect_file(path, platform="linux").verdict == "accepted"


def test_reasons_never_carry_terminal_control_characters(inspect_bytes: Inspect) -> None:
    entry = RawEntry("evil\x1b[2J.js", b"x", flags=1)  # encrypted: refused before the name rules
    result = inspect_bytes(write_zip([*honest_entries(), entry]))
    assert result.code == "entry_encrypted"
    assert "\x1b" not in (result.reason or "")
    assert "evil\\x1b[2J.js" in (result.reason or "")


def test_an_archive_held_in_memory_is_read_the_same_way(tmp_path: Path) -> None:
    from bundle_operator.mcpb.reader import inspect_open

    data = build(tmp_path / "ok.mcpb").read_bytes()
    result = inspect_open(io.BytesIO(data), platform="linux")
    assert (result.verdict, result.sha256) == ("accepted", hashlib.sha256(data).hexdigest())
    bad = inspect_open(io.BytesIO(data[:-5]), platform="linux")
    assert (bad.verdict, bad.sha256) == ("refused", hashlib.sha256(data[:-5]).hexdigest())


def test_a_big_archive_reports_its_earliest_bad_entry_every_time(inspect_bytes: Inspect) -> None:
    # Big enough to be inflated by several threads; the answer must still be the first problem.
    import os as _os

    blobs = [RawEntry(f"data/{i:02}.bin", _os.urandom(256 * 1024)) for i in range(24)]
    blobs[5] = RawEntry("data/05.bin", _os.urandom(256 * 1024), crc=1)
    blobs[20] = RawEntry("data/20.bin", b"", compressed=zero_bomb_stream(64), declared_size=10, crc=0)
    data = write_zip([*honest_entries(), *blobs])
    for _ in range(5):
        result = inspect_bytes(data)
        assert (result.code, result.reason) == ("entry_corrupt", "entry 'data/05.bin' fails its CRC check")
    blobs[5] = RawEntry("data/05.bin", b"fine")
    result = inspect_bytes(write_zip([*honest_entries(), *blobs]))
    assert result.reason == "entry 'data/20.bin' inflates to more than the 10 bytes it declares"


# --- one view of the zip: what a streaming unzipper sees is what the central directory says ---


def _prefixed(data: bytes, prefix: bytes) -> bytes:
    """``prefix`` in front of the zip, with every offset moved so the zip is still consistent."""
    out = bytearray(prefix + data)
    eocd = out.rfind(b"PK\x05\x06")
    (count,) = struct.unpack_from("<H", out, eocd + 10)
    (cd_offset,) = struct.unpack_from("<I", out, eocd + 16)
    struct.pack_into("<I", out, eocd + 16, cd_offset + len(prefix))
    pos = cd_offset + len(prefix)
    for _ in range(count):
        nlen, xlen, clen = struct.unpack_from("<3H", out, pos + 28)
        (local,) = struct.unpack_from("<I", out, pos + 42)
        struct.pack_into("<I", out, pos + 42, local + len(prefix))
        pos += 46 + nlen + xlen + clen
    return bytes(out)


def test_a_consistent_zip_behind_hidden_bytes_is_refused(inspect_bytes: Inspect) -> None:
    honest = write_zip(honest_entries())
    hidden = write_zip([RawEntry("server/index.js", b"EVIL")])
    hidden_local = hidden[: hidden.index(b"PK\x01\x02")]  # a streaming unzipper would write this
    for prefix in (b"J" * 4096, hidden_local):
        result = inspect_bytes(_prefixed(honest, prefix))
        assert (result.code, result.reason) == (
            "zip_malformed",
            f"the archive hides {len(prefix)} bytes before the first entry",
        )


def test_a_gap_between_entries_is_refused(inspect_bytes: Inspect) -> None:
    data = bytearray(write_zip([*honest_entries(), RawEntry("a.txt", b"a", method=0)]))
    last_local = data.rfind(b"PK\x03\x04")
    cd = data.find(b"PK\x01\x02")
    # Slide the last entry 8 bytes further and fix its central offset and the directory's.
    moved = bytes(data[:last_local]) + b"\0" * 8 + bytes(data[last_local:])
    out = bytearray(moved)
    last_central = out.rfind(b"PK\x01\x02")
    struct.pack_into("<I", out, last_central + 42, last_local + 8)
    eocd = out.rfind(b"PK\x05\x06")
    struct.pack_into("<I", out, eocd + 16, cd + 8)
    result = inspect_bytes(bytes(out))
    assert (result.code, result.reason) == ("zip_malformed", "the archive hides 8 bytes before entry 'a.txt'")


@pytest.mark.parametrize(
    ("offset", "value"),
    [(14, 0xDEADBEEF), (18, 1), (22, 1)],  # CRC, compressed size, uncompressed size
)
def test_a_local_header_that_disagrees_with_the_central_one_is_refused(
    inspect_bytes: Inspect, offset: int, value: int
) -> None:
    data = bytearray(write_zip(honest_entries()))
    struct.pack_into("<I", data, offset, value)  # the first local header; the central one is honest
    result = inspect_bytes(bytes(data))
    assert (result.code, result.reason) == (
        "zip_malformed",
        "entry 'manifest.json' has a CRC or sizes in its local header that disagree",
    )


def test_a_data_descriptor_flag_only_in_the_local_header_is_refused(inspect_bytes: Inspect) -> None:
    data = bytearray(write_zip(honest_entries()))
    struct.pack_into("<H", data, 6, 0x0008)
    assert inspect_bytes(bytes(data)).code == "zip_malformed"


def test_python_zipfile_archives_with_data_descriptors_are_read(tmp_path: Path) -> None:
    from .craft import base_manifest

    class Unseekable(io.RawIOBase):
        def __init__(self) -> None:
            self.buf = io.BytesIO()

        def writable(self) -> bool:
            return True

        def write(self, b: bytes) -> int:  # type: ignore[override]
            return self.buf.write(b)

    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as zf:  # type: ignore[arg-type]
        zf.writestr("manifest.json", __import__("json").dumps(base_manifest()))
        zf.writestr("server/index.js", b"x")
    data = sink.buf.getvalue()
    assert struct.unpack_from("<H", data, 6)[0] & 0x0008  # zipfile deferred the sizes
    path = tmp_path / "stream.mcpb"
    path.write_bytes(data)
    assert inspect_file(path, platform="linux").verdict == "accepted"


@pytest.mark.parametrize("system", [0, 10, 19])  # MS-DOS, NTFS, OS X: unzip still applies the mode
def test_a_link_mode_is_refused_whatever_the_creator_system(inspect_bytes: Inspect, system: int) -> None:
    link = RawEntry("server/link", b"/etc/passwd", method=0, create_system=system, external_attr=link_attr())
    assert inspect_bytes(write_zip([*honest_entries(), link])).code == "entry_link"


def _with_zip64_end(data: bytes, saturate: bool) -> bytes:
    eocd = data.rfind(b"PK\x05\x06")
    count, _, cd_size, cd_offset = struct.unpack_from("<2H2I", data, eocd + 8)
    z64 = b"PK\x06\x06" + struct.pack("<Q2H2I4Q", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, eocd, 1)
    classic_offset = 0xFFFFFFFF if saturate else cd_offset
    end = b"PK\x05\x06" + struct.pack("<4H2IH", 0, 0, count, count, cd_size, classic_offset, 0)
    return data[:eocd] + z64 + locator + end


def test_a_zip64_end_record_counts_only_where_a_classic_field_is_full(inspect_bytes: Inspect) -> None:
    data = write_zip(honest_entries())
    assert inspect_bytes(_with_zip64_end(data, saturate=True)).verdict == "accepted"
    result = inspect_bytes(_with_zip64_end(data, saturate=False))
    assert (result.code, result.reason) == (
        "zip_malformed",
        "the zip64 end record disagrees with the classic one",
    )
