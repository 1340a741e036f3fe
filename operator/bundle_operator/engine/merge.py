"""Three-way merge of JSON values: base (what was written), theirs (the new bundle), mine (live).

Mappings merge key by key; anything else (scalars, lists) is one value: a list of ids or of
arguments is only meaningful whole. A place both sides changed to different values is a conflict,
named by its JSON Pointer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bundle_operator.document.pointer import join_pointer


class _Absent:
    """A key that is not there; distinct from an explicit null."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class OnConflict(StrEnum):
    """What to do where both sides changed one place differently."""

    FAIL = "fail"
    KEEP_MINE = "keep-mine"
    TAKE_THEIRS = "take-theirs"


@dataclass
class MergeResult:
    """The merged value and the conflict paths."""

    merged: Any
    conflicts: list[str] = field(default_factory=list)


def merge(base: Any, theirs: Any, mine: Any, on_conflict: OnConflict = OnConflict.FAIL) -> MergeResult:
    """Merge three versions; conflicts are reported in every mode, resolved by ``on_conflict``."""
    conflicts: list[str] = []
    merged = _merge(base, theirs, mine, "", on_conflict, conflicts)
    return MergeResult(merged, conflicts)


def _merge(base: Any, theirs: Any, mine: Any, pointer: str, mode: OnConflict, conflicts: list[str]) -> Any:
    if theirs == base:
        return mine
    if mine in (base, theirs):
        return theirs
    if all(isinstance(v, dict) for v in (base, theirs, mine)):
        out: dict[str, Any] = {}
        for key in _ordered_keys(theirs, mine, base):
            value = _merge(
                base.get(key, ABSENT),
                theirs.get(key, ABSENT),
                mine.get(key, ABSENT),
                join_pointer(pointer, key),
                mode,
                conflicts,
            )
            if value is not ABSENT:
                out[key] = value
        return out
    if isinstance(base, _Absent) and isinstance(theirs, dict) and isinstance(mine, dict):
        return _merge({}, theirs, mine, pointer, mode, conflicts)
    conflicts.append(pointer)
    return mine if mode is not OnConflict.TAKE_THEIRS else theirs


def _ordered_keys(*mappings: dict[str, Any]) -> list[str]:
    seen: dict[str, None] = {}
    for mapping in mappings:
        for key in mapping:
            seen.setdefault(key)
    return list(seen)
