"""Stream an entry's data out of the archive, counting the bytes it really inflates to.

Headers can lie: a few hundred bytes of deflate can claim to be 1 KiB and inflate to gigabytes.
Every produced byte is counted against the entry's declared size and the archive's total limit,
so a lying entry is refused after at most one chunk past its claim, whatever its header says.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

from bundle_operator.mcpb.entries import DEFLATED, FLAG_ENCRYPTED, Entry
from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.limits import Limits

LOCAL_MAGIC = b"PK\x03\x04"
DESCRIPTOR_MAGIC = b"PK\x07\x08"
FLAG_DESCRIPTOR = 0x0008
ZIP64_EXTRA_ID = 0x0001
LOCAL_SIZE = 30
READ_CHUNK = 1024 * 1024
FEED_CHUNK = 64 * 1024
OUT_CHUNK = 1024 * 1024

Sink = Callable[[bytes], None]


@dataclass(frozen=True)
class Codec:
    """An implementation of raw inflate and CRC-32 with zlib's interface."""

    name: str
    decompressobj: Callable[[int], Any]
    crc32: Callable[[bytes, int], int]
    errors: tuple[type[Exception], ...]


ZLIB = Codec("zlib", zlib.decompressobj, zlib.crc32, (zlib.error,))


def _accelerated() -> Codec:
    """ISA-L's inflate and CRC-32 (python-isal) where its wheel installs: 2-3x zlib on text.

    The same deflate decoded by another library: the bytes out are the same, and a broken stream
    is refused by both (tests run every archive, hostile ones included, through both).
    """
    try:
        from isal import isal_zlib
    except ImportError:
        return ZLIB
    # The stub declares ``error`` as an instance; it is the exception class.
    isal_error = cast(type[Exception], isal_zlib.error)
    return Codec("isal", isal_zlib.decompressobj, isal_zlib.crc32, (isal_error, zlib.error))


# The codec every entry is inflated with; tests set it to ZLIB to check the fallback.
CODEC = _accelerated()


class RandomAccess:
    """Reads at an offset, safe to share between threads (``pread`` on a file, a lock otherwise)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._lock = threading.Lock()
        try:
            self._fd: int | None = f.fileno() if hasattr(os, "pread") else None
        except (OSError, ValueError, AttributeError):  # io.BytesIO has no descriptor
            self._fd = None

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``; fewer only at the end of the file."""
        if self._fd is None:
            with self._lock:
                self._f.seek(offset)
                return self._f.read(length)
        parts = []
        while length > 0:
            part = os.pread(self._fd, length, offset)
            if not part:
                break
            parts.append(part)
            offset += len(part)
            length -= len(part)
        return b"".join(parts)


class Stopped(Exception):
    """Raised inside a worker when another entry already refused the archive."""


@dataclass
class UnpackCounter:
    """Actual bytes inflated so far, across the whole archive (shared by worker threads)."""

    limits: Limits
    total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, n: int) -> None:
        with self._lock:
            self.total += n
            total = self.total
        if total > self.limits.max_unpacked_bytes:
            raise Refused(
                "unpacked_too_large",
                f"the archive inflates to more than {self.limits.max_unpacked_bytes} bytes",
            )


def _local_sizes(head: bytes, extra: bytes, name: str) -> tuple[int, int, int]:
    """(crc, compressed, uncompressed) as the local header gives them, zip64 extra included."""
    crc, csize, usize = struct.unpack_from("<3I", head, 14)
    if 0xFFFFFFFF not in (csize, usize):
        return crc, csize, usize
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        if tag == ZIP64_EXTRA_ID and size >= 16 and pos + 4 + 16 <= len(extra):
            # In a local header the zip64 extra holds both sizes, uncompressed first.
            usize, csize = struct.unpack_from("<2Q", extra, pos + 4)
            return crc, csize, usize
        pos += 4 + size
    raise Refused("zip_malformed", f"entry '{name}' claims zip64 sizes without a zip64 extra field")


def _descriptor_length(f: BinaryIO, entry: Entry, at: int, next_at: int) -> int:
    """Length of the data descriptor at ``at``, which must repeat the central values and end at
    ``next_at``; the four layouts differ in the optional signature and 32- or 64-bit sizes."""
    f.seek(at)
    window = f.read(min(24, max(0, next_at - at)))
    for signed in (True, False):
        for wide in (False, True):
            length = (4 if signed else 0) + 4 + (16 if wide else 8)
            if at + length != next_at or len(window) < length:
                continue
            body = window[4:] if signed else window
            if signed and window[:4] != DESCRIPTOR_MAGIC:
                continue
            crc, csize, usize = struct.unpack_from("<I2Q" if wide else "<3I", body)
            if (crc, csize, usize) == (entry.crc, entry.compressed_size, entry.uncompressed_size):
                return length
    raise Refused("zip_malformed", f"entry '{entry.name}' has a data descriptor that disagrees or is missing")


def data_ranges(f: BinaryIO, entries: list[Entry], cd_offset: int) -> dict[int, int]:
    """Map each entry's local offset to where its data starts; refuse any other view of the zip.

    A streaming unzipper reads local headers front to back, this reader follows the central
    directory: the two must see the same archive. So the entries tile the file from byte 0 to
    the central directory with no gap (nothing hidden before or between them) and no overlap, and
    each local header agrees with its central record on name, method, flags, CRC and sizes (the
    data descriptor's when bit 3 defers them there).
    """
    starts: dict[int, int] = {}
    ordered = sorted(entries, key=lambda e: e.local_offset)
    expected = 0
    for i, entry in enumerate(ordered):
        if entry.local_offset < expected:
            raise Refused("zip_malformed", f"entry '{entry.name}' overlaps another entry")
        if entry.local_offset > expected:
            where = "before the first entry" if i == 0 else f"before entry '{entry.name}'"
            raise Refused("zip_malformed", f"the archive hides {entry.local_offset - expected} bytes {where}")
        f.seek(entry.local_offset)
        head = f.read(LOCAL_SIZE)
        if len(head) != LOCAL_SIZE or head[:4] != LOCAL_MAGIC:
            raise Refused("zip_malformed", f"entry '{entry.name}' has no local header")
        flags, method = struct.unpack_from("<2H", head, 6)
        nlen, xlen = struct.unpack_from("<2H", head, 26)
        if f.read(nlen) != entry.raw_name:
            raise Refused("zip_malformed", f"entry '{entry.name}' has a different name in its local header")
        extra = f.read(xlen)
        same_flags = (flags ^ entry.flags) & (FLAG_ENCRYPTED | FLAG_DESCRIPTOR) == 0
        if method != entry.method or not same_flags or len(extra) != xlen:
            raise Refused("zip_malformed", f"entry '{entry.name}' has a local header that disagrees")
        if not flags & FLAG_DESCRIPTOR:
            local = _local_sizes(head, extra, entry.name)
            if local != (entry.crc, entry.compressed_size, entry.uncompressed_size):
                raise Refused(
                    "zip_malformed",
                    f"entry '{entry.name}' has a CRC or sizes in its local header that disagree",
                )
        start = entry.local_offset + LOCAL_SIZE + nlen + xlen
        end = start + entry.compressed_size
        if end > cd_offset:
            raise Refused("zip_malformed", f"entry '{entry.name}' runs into the central directory")
        if flags & FLAG_DESCRIPTOR:
            next_at = ordered[i + 1].local_offset if i + 1 < len(ordered) else cd_offset
            end += _descriptor_length(f, entry, end, next_at)
        starts[entry.local_offset] = start
        expected = end
    if expected != cd_offset:
        raise Refused(
            "zip_malformed", f"the archive hides {cd_offset - expected} bytes before its central directory"
        )
    return starts


def stream_entry(
    source: RandomAccess,
    entry: Entry,
    data_start: int,
    counter: UnpackCounter,
    sink: Sink | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Inflate one entry, feeding ``sink``; refuse on a size lie, a CRC mismatch or a broken stream."""
    position = data_start
    remaining = entry.compressed_size
    produced = 0
    crc = 0
    codec = CODEC
    inflater = codec.decompressobj(-15) if entry.method == DEFLATED else None

    def emit(out: bytes) -> None:
        nonlocal produced, crc
        if not out:
            return
        produced += len(out)
        if produced > entry.uncompressed_size:
            raise Refused(
                "entry_size_mismatch",
                f"entry '{entry.name}' inflates to more than the {entry.uncompressed_size} bytes it declares",
            )
        counter.add(len(out))
        crc = codec.crc32(out, crc)
        if sink is not None:
            sink(out)

    while remaining > 0:
        if stop is not None and stop():
            raise Stopped()
        block = source.read(position, min(READ_CHUNK, remaining))
        if not block:
            raise Refused("zip_malformed", f"entry '{entry.name}' is cut short")
        position += len(block)
        remaining -= len(block)
        if inflater is None:
            emit(block)
            continue
        for i in range(0, len(block), FEED_CHUNK):
            if inflater.eof:
                raise Refused("entry_corrupt", f"entry '{entry.name}' has data after its end")
            try:
                emit(inflater.decompress(block[i : i + FEED_CHUNK], OUT_CHUNK))
                while inflater.unconsumed_tail:
                    emit(inflater.decompress(inflater.unconsumed_tail, OUT_CHUNK))
            except codec.errors:
                raise Refused("entry_corrupt", f"entry '{entry.name}' is not valid deflate data") from None
    if inflater is not None and (not inflater.eof or inflater.unused_data):
        raise Refused("entry_corrupt", f"entry '{entry.name}' does not end where its header says")
    if produced != entry.uncompressed_size:
        raise Refused(
            "entry_size_mismatch",
            f"entry '{entry.name}' inflates to {produced} bytes but declares {entry.uncompressed_size}",
        )
    if crc != entry.crc:
        raise Refused("entry_corrupt", f"entry '{entry.name}' fails its CRC check")
