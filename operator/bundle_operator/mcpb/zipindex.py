"""Read the zip's central directory into plain records, streamed so a huge directory costs no memory."""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from bundle_operator.mcpb.container import Layout
from bundle_operator.mcpb.errors import Refused

CENTRAL_MAGIC = b"PK\x01\x02"
CENTRAL_SIZE = 46
ZIP64_EXTRA_ID = 0x0001


@dataclass(frozen=True)
class RawEntry:
    """One central directory record, undecoded."""

    index: int
    raw_name: bytes
    create_system: int
    flags: int
    method: int
    crc: int
    compressed_size: int
    uncompressed_size: int
    external_attr: int
    local_offset: int


def _zip64_values(extra: bytes, wanted: list[str]) -> dict[str, int]:
    # The zip64 extra holds, in this order, only the fields whose 32-bit slot is all ones.
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + size]
        if tag == ZIP64_EXTRA_ID:
            if len(body) < 8 * len(wanted):
                break
            return {name: struct.unpack_from("<Q", body, 8 * i)[0] for i, name in enumerate(wanted)}
        pos += 4 + size
    raise Refused("zip_malformed", "an entry claims zip64 sizes without a zip64 extra field")


def read_central_directory(f: BinaryIO, layout: Layout, max_name_bytes: int) -> list[RawEntry]:
    """Every central directory record; the count and size must match the end record exactly."""
    return list(_iter_central_directory(f, layout, max_name_bytes))


def _iter_central_directory(f: BinaryIO, layout: Layout, max_name_bytes: int) -> Iterator[RawEntry]:
    f.seek(layout.cd_offset)
    reader = io.BufferedReader(_Bounded(f, layout.cd_size), buffer_size=256 * 1024)
    consumed = 0
    for index in range(layout.entry_count):
        head = reader.read(CENTRAL_SIZE)
        if len(head) != CENTRAL_SIZE or head[:4] != CENTRAL_MAGIC:
            raise Refused("zip_malformed", f"central directory record {index} is damaged")
        (
            made_by,
            _needed,
            flags,
            method,
            _time,
            _date,
            crc,
            csize,
            usize,
            nlen,
            xlen,
            clen,
            disk,
            _internal,
            external,
            offset,
        ) = struct.unpack_from("<6H3I5H2I", head, 4)
        rest = reader.read(nlen + xlen + clen)
        if len(rest) != nlen + xlen + clen:
            raise Refused("zip_malformed", f"central directory record {index} is cut short")
        consumed += CENTRAL_SIZE + len(rest)
        name = rest[:nlen]
        if nlen > max_name_bytes:
            raise Refused("entry_path", f"entry {index} has a name longer than {max_name_bytes} bytes")
        extra = rest[nlen : nlen + xlen]
        wanted = [
            field
            for field, value in (("usize", usize), ("csize", csize), ("offset", offset))
            if value == 0xFFFFFFFF
        ]
        if wanted:
            big = _zip64_values(extra, wanted)
            usize = big.get("usize", usize)
            csize = big.get("csize", csize)
            offset = big.get("offset", offset)
        if disk not in (0, 0xFFFF):
            raise Refused("zip_malformed", "multi-part zip archives are not accepted")
        yield RawEntry(
            index=index,
            raw_name=name,
            create_system=made_by >> 8,
            flags=flags,
            method=method,
            crc=crc,
            compressed_size=csize,
            uncompressed_size=usize,
            external_attr=external,
            local_offset=offset,
        )
    if consumed != layout.cd_size:
        raise Refused("zip_malformed", "the central directory holds more than its entry count says")


class _Bounded(io.RawIOBase):
    """A read-only window of ``length`` bytes from the current position of ``f``."""

    def __init__(self, f: BinaryIO, length: int) -> None:
        self._f = f
        self._left = length

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        n = min(len(b), self._left)
        data = self._f.read(n)
        b[: len(data)] = data
        self._left -= len(data)
        return len(data)
