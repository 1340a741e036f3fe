"""Three-way merge and drift paths on JSON values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.merge import OnConflict, merge

BASE = {
    "name": "Bot",
    "model": "gpt-4.1",
    "instructions": "Be brief.",
    "mcps": ["a", "b"],
    "config": {"x": 1},
}


def test_untouched_live_takes_the_new_version() -> None:
    theirs = {**BASE, "model": "gpt-5"}
    result = merge(BASE, theirs, dict(BASE))
    assert (result.merged, result.conflicts) == (theirs, [])


def test_local_edit_to_a_field_the_update_does_not_touch_survives() -> None:
    mine = {**BASE, "instructions": "Be very brief."}
    theirs = {**BASE, "model": "gpt-5"}
    result = merge(BASE, theirs, mine)
    assert result.merged == {**BASE, "instructions": "Be very brief.", "model": "gpt-5"}
    assert result.conflicts == []


def test_same_change_on_both_sides_is_no_conflict() -> None:
    both = {**BASE, "model": "gpt-5"}
    assert merge(BASE, both, dict(both)).conflicts == []


def test_true_conflict_is_reported_and_resolved_by_mode() -> None:
    mine = {**BASE, "model": "claude"}
    theirs = {**BASE, "model": "gpt-5", "name": "Bot 2"}
    failed = merge(BASE, theirs, mine)
    assert failed.conflicts == ["/model"]
    kept = merge(BASE, theirs, mine, OnConflict.KEEP_MINE)
    assert kept.merged["model"] == "claude" and kept.merged["name"] == "Bot 2"
    taken = merge(BASE, theirs, mine, OnConflict.TAKE_THEIRS)
    assert taken.merged["model"] == "gpt-5"
    assert kept.conflicts == taken.conflicts == ["/model"]


def test_nested_mappings_merge_key_by_key() -> None:
    mine = {**BASE, "config": {"x": 1, "y": 2}}
    theirs = {**BASE, "config": {"x": 5}}
    result = merge(BASE, theirs, mine)
    assert result.merged["config"] == {"x": 5, "y": 2}
    conflict = merge(BASE, {**BASE, "config": {"x": 5}}, {**BASE, "config": {"x": 7}})
    assert conflict.conflicts == ["/config/x"]


def test_lists_are_whole_values() -> None:
    result = merge(BASE, {**BASE, "mcps": ["a", "b", "c"]}, {**BASE, "mcps": ["b"]})
    assert result.conflicts == ["/mcps"]


def test_removed_keys() -> None:
    theirs = {k: v for k, v in BASE.items() if k != "instructions"}
    assert "instructions" not in merge(BASE, theirs, dict(BASE)).merged
    edited = {**BASE, "instructions": "mine"}
    assert merge(BASE, theirs, edited).conflicts == ["/instructions"]


def test_keys_with_slash_and_tilde_are_escaped() -> None:
    base = {"env": {"a/b": "1", "c~d": "1"}}
    result = merge(base, {"env": {"a/b": "2", "c~d": "2"}}, {"env": {"a/b": "3", "c~d": "3"}})
    assert sorted(result.conflicts) == ["/env/a~1b", "/env/c~0d"]


def test_changed_paths() -> None:
    live = {**BASE, "model": "x", "config": {"x": 1, "z": 0}, "mcps": ["a", "c"], "extra": True}
    assert changed_paths(BASE, live) == ["/config/z", "/extra", "/mcps/1", "/model"]
    assert changed_paths(BASE, {**BASE, "mcps": ["a"]}) == ["/mcps"]
    assert changed_paths(BASE, dict(BASE)) == []


values = st.recursive(
    st.none() | st.integers(-3, 3) | st.sampled_from(["a", "b"]),
    lambda c: st.dictionaries(st.sampled_from(["k", "l", "m"]), c, max_size=3),
    max_leaves=8,
)


def _overlaps(path: str, changed: list[str]) -> bool:
    """Whether a path lies in, or contains, one of the changed paths."""
    return any(path == p or path.startswith(p + "/") or p.startswith(path + "/") for p in changed)


@settings(max_examples=300, deadline=None)
@given(values, values, values)
def test_merge_properties(base: Any, theirs: Any, mine: Any) -> None:
    # Mine untouched: the new version lands; the bundle unchanged: the live value stays.
    assert merge(base, theirs, base).merged == theirs
    assert merge(base, base, mine).merged == mine
    assert merge(base, theirs, theirs).conflicts == []
    # A conflict is only ever where both sides moved away from base.
    for mode in OnConflict:
        result = merge(base, theirs, mine, mode)
        for path in result.conflicts:
            assert _overlaps(path, changed_paths(base, theirs))
            assert _overlaps(path, changed_paths(base, mine))
    # Symmetric: keep-mine of (theirs, mine) equals take-theirs of (mine, theirs).
    assert (
        merge(base, theirs, mine, OnConflict.KEEP_MINE).merged
        == merge(base, mine, theirs, OnConflict.TAKE_THEIRS).merged
    )


@pytest.mark.parametrize("mode", list(OnConflict))
def test_modes_agree_when_there_is_no_conflict(mode: OnConflict) -> None:
    mine = {**BASE, "instructions": "mine"}
    theirs = {**BASE, "model": "theirs"}
    assert merge(BASE, theirs, mine, mode).merged == merge(BASE, theirs, mine).merged
