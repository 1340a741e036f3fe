"""The accelerated inflate gives zlib's bytes, CRCs and refusals (every archive test runs on both)."""

from __future__ import annotations

import random
import string
import zlib

import pytest

from bundle_operator.mcpb import inflate


def test_the_accelerated_codec_is_the_one_in_use() -> None:
    # isal is a dependency: a failed import would fall back to zlib without a word.
    assert inflate._accelerated().name == "isal"


def _text(size: int) -> bytes:
    rng = random.Random(size)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randrange(2, 9))) for _ in range(500)]
    return " ".join(rng.choices(words, k=size // 5)).encode()[:size]


@pytest.mark.parametrize("level", [1, 6, 9])
@pytest.mark.parametrize("size", [0, 1, 65_537, 3_000_000])
def test_both_codecs_inflate_the_same_bytes_in_the_same_bounded_steps(level: int, size: int) -> None:
    data = _text(size)
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    stream = packer.compress(data) + packer.flush()
    outputs = []
    for codec in (inflate.ZLIB, inflate._accelerated()):
        inflater = codec.decompressobj(-15)
        chunks = [inflater.decompress(stream[i : i + 4096], 65_536) for i in range(0, len(stream), 4096)]
        while inflater.unconsumed_tail:
            chunks.append(inflater.decompress(inflater.unconsumed_tail, 65_536))
        assert all(len(chunk) <= 65_536 for chunk in chunks)
        out = b"".join(chunks)
        assert inflater.eof and not inflater.unused_data
        outputs.append((out, codec.crc32(out, 0)))
    assert outputs[0] == outputs[1] == (data, zlib.crc32(data))


@pytest.mark.parametrize("damage", ["flipped", "truncated", "trailing"])
def test_both_codecs_refuse_or_flag_the_same_broken_streams(damage: str) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = bytearray(packer.compress(_text(200_000)) + packer.flush())
    if damage == "flipped":
        stream[len(stream) // 2] ^= 0xFF
        stream[10] ^= 0xFF
    elif damage == "truncated":
        del stream[-50:]
    else:
        stream += b"more bytes after the end"
    verdicts = []
    for codec in (inflate.ZLIB, inflate._accelerated()):
        inflater = codec.decompressobj(-15)
        try:
            inflater.decompress(bytes(stream))
            verdicts.append(("ok", inflater.eof, inflater.unused_data))
        except codec.errors:
            verdicts.append(("error", None, None))
    assert verdicts[0] == verdicts[1]
