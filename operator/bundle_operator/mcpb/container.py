"""The outer layout of an .mcpb file: where the zip ends, where its directory is, and the signature block.

A signed archive is the zip followed by ``MCPB_SIG_V1``, a little-endian uint32 length N, N bytes of
DER and ``MCPB_SIG_END``. Newer packers also raise the zip's comment length so that the comment
covers the block (strict zip readers otherwise complain about trailing bytes); the signer hashed
the zip *before* that, so the reader remembers the comment length the signer saw.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.limits import Limits

SIG_HEADER = b"MCPB_SIG_V1"
SIG_FOOTER = b"MCPB_SIG_END"
EOCD_MAGIC = b"PK\x05\x06"
ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
ZIP64_EOCD_MAGIC = b"PK\x06\x06"
EOCD_SIZE = 22
ZIP64_LOCATOR_SIZE = 20
ZIP64_EOCD_SIZE = 56
MAX_COMMENT = 0xFFFF
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Layout:
    """Where things are in the file; offsets are absolute."""

    size: int
    zip_end: int  # the first byte after the zip (the signature block starts here when there is one)
    eocd_offset: int
    signed_comment_length: int  # the comment length as the signer hashed it
    stored_comment_length: int
    cd_offset: int
    cd_size: int
    entry_count: int
    signature_der: bytes | None


def _pread(f: BinaryIO, offset: int, length: int) -> bytes:
    f.seek(offset)
    data = f.read(length)
    if len(data) != length:
        raise Refused("zip_malformed", "the file ended earlier than its own structure says")
    return data


def _find_signature_block(tail: bytes, base: int, size: int) -> tuple[int, bytes] | None:
    """Return (block offset, DER) when the tail ends with a well-formed block, else None."""
    # The DER may itself contain the header bytes (a certificate subject can say anything), so every
    # candidate is tried and the earliest consistent one wins: the genuine header precedes the DER.
    start = 0
    while True:
        p = tail.find(SIG_HEADER, start)
        if p < 0:
            return None
        length_at = p + len(SIG_HEADER)
        if length_at + 4 <= len(tail):
            (n,) = struct.unpack_from("<I", tail, length_at)
            if length_at + 4 + n + len(SIG_FOOTER) == len(tail) and n > 0:
                der = tail[length_at + 4 : length_at + 4 + n]
                return base + p, der
        start = p + 1


def _find_eocd(
    window: bytes, base: int, zip_end: int, size: int, signed: bool
) -> tuple[int, int, int] | None:
    """Return (offset, stored comment length, signed comment length) of the zip's end record."""
    pos = len(window)
    while True:
        pos = window.rfind(EOCD_MAGIC, 0, pos)
        if pos < 0:
            return None
        if pos + EOCD_SIZE > len(window):
            continue
        (comment_len,) = struct.unpack_from("<H", window, pos + 20)
        eocd = base + pos
        if eocd + EOCD_SIZE + comment_len == zip_end:
            return eocd, comment_len, comment_len
        if signed and eocd + EOCD_SIZE + comment_len == size:
            # The comment was raised to cover the signature block: subtract the block back.
            original = comment_len - (size - zip_end)
            if original >= 0:
                return eocd, comment_len, original
        # Not this one; a false magic inside a comment or the block. Keep looking further back.


def read_layout(f: BinaryIO, size: int, limits: Limits) -> Layout:
    """Locate the signature block and the zip's end records without reading the whole file."""
    block_max = len(SIG_HEADER) + 4 + limits.max_signature_bytes + len(SIG_FOOTER)
    tail_len = min(size, EOCD_SIZE + MAX_COMMENT + block_max + ZIP64_LOCATOR_SIZE)
    tail_base = size - tail_len
    tail = _pread(f, tail_base, tail_len)

    signature_der: bytes | None = None
    zip_end = size
    if tail.endswith(SIG_FOOTER):
        found = _find_signature_block(tail, tail_base, size)
        if found is None:
            raise Refused(
                "signature_invalid",
                "the file ends with a signature marker but the signature block is damaged",
            )
        zip_end, signature_der = found

    signed = signature_der is not None
    window_start = max(0, zip_end - (EOCD_SIZE + MAX_COMMENT + ZIP64_LOCATOR_SIZE))
    window = tail[window_start - tail_base : zip_end - tail_base]
    found_eocd = _find_eocd(window, window_start, zip_end, size, signed)
    if found_eocd is None:
        if not signed and SIG_HEADER in tail:
            # Bytes after the zip that start like a signature: a damaged block is never "unsigned".
            raise Refused("signature_invalid", "the signature block after the zip is damaged or cut short")
        if EOCD_MAGIC in window:
            raise Refused("zip_malformed", "the file has bytes after the end of the zip")
        raise Refused("zip_malformed", "not a zip archive (no end of central directory record)")
    eocd, stored_comment, signed_comment = found_eocd

    rec = _pread(f, eocd, EOCD_SIZE)
    disk, cd_disk, n_disk, n_total, cd_size, cd_offset, _ = struct.unpack_from("<4H2IH", rec, 4)
    cd_end = eocd
    if eocd >= ZIP64_LOCATOR_SIZE and _pread(f, eocd - ZIP64_LOCATOR_SIZE, 4) == ZIP64_LOCATOR_MAGIC:
        loc = _pread(f, eocd - ZIP64_LOCATOR_SIZE, ZIP64_LOCATOR_SIZE)
        _, z64_offset, total_disks = struct.unpack_from("<IQI", loc, 4)
        if total_disks > 1 or z64_offset + ZIP64_EOCD_SIZE > eocd - ZIP64_LOCATOR_SIZE:
            raise Refused("zip_malformed", "the zip64 end record is out of place")
        z64 = _pread(f, z64_offset, ZIP64_EOCD_SIZE)
        if z64[:4] != ZIP64_EOCD_MAGIC:
            raise Refused("zip_malformed", "the zip64 end record is missing")
        classic = (disk, cd_disk, n_disk, n_total, cd_size, cd_offset)
        wide = struct.unpack_from("<2I4Q", z64, 16)
        saturated = [value in (0xFFFF, 0xFFFFFFFF) for value in classic]
        # Readers that ignore zip64 use the classic fields: both views must be the same archive,
        # so the zip64 record only counts where a classic field is full, and agrees elsewhere.
        if not any(saturated) or any(
            not full and value != big for full, value, big in zip(saturated, classic, wide, strict=True)
        ):
            raise Refused("zip_malformed", "the zip64 end record disagrees with the classic one")
        disk, cd_disk, n_disk, n_total, cd_size, cd_offset = wide
        cd_end = z64_offset
    elif 0xFFFF in (n_disk, n_total) or 0xFFFFFFFF in (cd_size, cd_offset):
        raise Refused("zip_malformed", "the zip claims zip64 sizes without a zip64 end record")
    if disk != 0 or cd_disk != 0 or n_disk != n_total:
        raise Refused("zip_malformed", "multi-part zip archives are not accepted")
    # Nothing may hide before the zip or between its directory and its end record.
    if cd_offset + cd_size != cd_end:
        raise Refused("zip_malformed", "the central directory is not where the end record says")
    if n_total > limits.max_files:
        raise Refused("too_many_files", f"the archive has {n_total} entries; at most {limits.max_files}")
    return Layout(
        size=size,
        zip_end=zip_end,
        eocd_offset=eocd,
        signed_comment_length=signed_comment,
        stored_comment_length=stored_comment,
        cd_offset=cd_offset,
        cd_size=cd_size,
        entry_count=n_total,
        signature_der=signature_der,
    )


class _Hasher(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...


def _feed(f: BinaryIO, start: int, end: int, buf: bytearray, sinks: list[_Hasher]) -> None:
    f.seek(start)
    view = memoryview(buf)
    remaining = end - start
    while remaining > 0:
        n = f.readinto(view[: min(len(buf), remaining)])  # type: ignore[attr-defined]
        if not n:
            raise Refused("zip_malformed", "the file changed size while it was read")
        for h in sinks:
            h.update(view[:n])
        remaining -= n


def content_digest(f: BinaryIO, layout: Layout, algorithm: str) -> bytes:
    """The digest of what the signer signed: the zip, with the comment length it saw."""
    content = hashlib.new(algorithm)
    buf = bytearray(CHUNK)
    split = layout.eocd_offset + 20
    _feed(f, 0, split, buf, [content])
    content.update(struct.pack("<H", layout.signed_comment_length))
    _feed(f, split + 2, layout.zip_end, buf, [content])
    return content.digest()
