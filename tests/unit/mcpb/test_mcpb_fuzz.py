"""Property tests: any damaged archive gets a verdict (never a crash), and a signed one never passes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_operator.mcpb import inspect_file

from .craft import build, make_signer, sign_bytes

_DIR = Path(tempfile.mkdtemp(prefix="mcpb-fuzz-"))
UNSIGNED = build(_DIR / "base.mcpb").read_bytes()
SIGNED = sign_bytes(UNSIGNED, make_signer("ec"))
VERDICTS = {"accepted", "not_runnable", "refused"}

edits = st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4)


def _mutate(data: bytes, changes: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for at, value in changes:
        out[at % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


def _inspect(data: bytes) -> tuple[str, str | None, str | None]:
    path = _DIR / "case.mcpb"
    path.write_bytes(data)
    result = inspect_file(path, platform="linux")
    return result.verdict, result.code, result.signature.status if result.signature else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=edits, cut=st.none() | st.integers(min_value=0, max_value=len(SIGNED)), signed=st.booleans())
def test_damaged_archives_always_get_a_verdict(
    changes: list[tuple[int, int]], cut: int | None, signed: bool
) -> None:
    verdict, code, _ = _inspect(_mutate(SIGNED if signed else UNSIGNED, changes, cut))
    assert verdict in VERDICTS
    assert (verdict == "refused") == (code is not None and code != "uv_not_runnable")


# The end record's comment length is the one field a signer's packer may change after signing.
_COMMENT_LENGTH = {UNSIGNED.rfind(b"PK\x05\x06") + 20, UNSIGNED.rfind(b"PK\x05\x06") + 21}


@settings(max_examples=300, deadline=None)
@given(changes=edits)
def test_a_signed_archive_whose_zip_changed_never_passes(changes: list[tuple[int, int]]) -> None:
    within_zip = [(at % len(UNSIGNED), value) for at, value in changes]
    within_zip = [(at, value) for at, value in within_zip if at not in _COMMENT_LENGTH]
    data = _mutate(SIGNED, within_zip, None)
    verdict, _, status = _inspect(data)
    if data != SIGNED:
        assert verdict == "refused"
        assert status != "signed"
