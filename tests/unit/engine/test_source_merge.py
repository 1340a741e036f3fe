"""Three-way merge of a knowledge set's spec, ``{"set": {...}, "sources": {key: spec}}``: the source
key is a source's identity across versions, so an update merges source for source, field by field.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_operator.document.knowledge import SOURCE_FIELDS
from bundle_operator.engine.kinds.knowledge_set import source_spec
from bundle_operator.engine.merge import OnConflict, merge
from bundle_operator.engine.plan import _conflict_issues

SETTINGS = settings(max_examples=80, deadline=None)

SOURCE_TYPES = sorted(SOURCE_FIELDS)
BUNDLE_KEYS = ("statutes-1", "s3-1", "sftp-1", "website-1")  # keys a bundle version uses
LOCAL_KEY = "mine-1"  # a key no bundle version uses
CREDENTIAL_NAMES = ("access_key_id", "secret_access_key", "password")

# Few values, so that independent edits often collide.
texts = st.sampled_from(["a", "b", "c"])
schedules = st.none() | st.sampled_from(["0 3 * * *", "30 3 * * *"])
credential_lists = st.lists(st.sampled_from(CREDENTIAL_NAMES), unique=True, max_size=2).map(sorted)


def field_values(source_type: str, name: str) -> st.SearchStrategy[Any]:
    """Values one field of a source spec may hold."""
    fields = SOURCE_FIELDS[source_type]
    if name == "sync_schedule":
        return schedules
    if name == "credentials":
        return credential_lists
    if name in fields.lists:
        return st.lists(texts, max_size=2)
    if name in fields.integers:
        return st.none() | st.integers(1, 3)
    if name in fields.required:
        return texts
    return st.none() | texts


@st.composite
def sources(draw: st.DrawFn) -> dict[str, Any]:
    """A source in the spec form the engine writes, built by ``source_spec`` over a real type."""
    source_type = draw(st.sampled_from(SOURCE_TYPES))
    fields = {name: draw(field_values(source_type, name)) for name in SOURCE_FIELDS[source_type].all}
    fields["sync_schedule"] = draw(schedules)
    return source_spec(source_type, fields, draw(credential_lists))


def editable_fields(spec: dict[str, Any]) -> list[str]:
    """Every field of a source spec but its type."""
    return [name for name in spec if name != "type"]


knowledge_sets = st.builds(
    lambda name, description, sources: {
        "set": {"name": name, "description": description, "data_description": ""},
        "sources": sources,
    },
    texts,
    texts,
    st.dictionaries(st.sampled_from(BUNDLE_KEYS), sources(), max_size=3),
)
with_a_source = knowledge_sets.filter(lambda spec: bool(spec["sources"]))


@st.composite
def edited(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` after some edits: set texts, fields of sources, sources dropped or added."""
    out = copy.deepcopy(spec)
    if draw(st.booleans()):
        out["set"]["name"] = draw(texts)
    for key in list(out["sources"]):
        action = draw(st.sampled_from(["keep", "edit", "drop"]))
        if action == "drop":
            del out["sources"][key]
        elif action == "edit":
            source = out["sources"][key]
            names = draw(
                st.lists(st.sampled_from(editable_fields(source)), unique=True, min_size=1, max_size=2)
            )
            for name in names:
                source[name] = draw(field_values(source["type"], name))
    for key in draw(st.lists(st.sampled_from(BUNDLE_KEYS), unique=True, max_size=1)):
        out["sources"].setdefault(key, draw(sources()))
    return out


@st.composite
def base_and_edit(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    base = draw(knowledge_sets)
    return base, draw(edited(base))


@st.composite
def one_field(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A knowledge set spec with at least one source, one of its keys and one of its fields."""
    base = draw(with_a_source)
    key = draw(st.sampled_from(sorted(base["sources"])))
    name = draw(st.sampled_from(editable_fields(base["sources"][key])))
    return base, key, name


def other_value(data: st.DataObject, source: dict[str, Any], name: str, *avoid: Any) -> Any:
    """A value for field ``name`` of ``source`` that differs from its own and from ``avoid``."""
    current = source[name]
    return data.draw(field_values(source["type"], name).filter(lambda v: v != current and v not in avoid))


def with_field(spec: dict[str, Any], key: str, name: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    out["sources"][key][name] = value
    return out


def without_source(spec: dict[str, Any], key: str) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    del out["sources"][key]
    return out


def assert_clean_in_every_mode(base: Any, theirs: Any, mine: Any, *, expected: Any) -> None:
    """Every conflict mode merges to ``expected`` without a conflict."""
    for mode in OnConflict:
        result = merge(base, theirs, mine, mode)
        assert (result.merged, result.conflicts) == (expected, [])


@SETTINGS
@given(base_and_edit())
def test_an_unchanged_bundle_keeps_every_local_edit(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    base, mine = pair
    assert_clean_in_every_mode(base, copy.deepcopy(base), mine, expected=mine)


@SETTINGS
@given(base_and_edit())
def test_without_local_edits_the_new_version_lands_cleanly(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    base, theirs = pair
    assert_clean_in_every_mode(base, theirs, copy.deepcopy(base), expected=theirs)


@SETTINGS
@given(base_and_edit(), sources())
def test_a_source_added_locally_survives_an_update(
    pair: tuple[dict[str, Any], dict[str, Any]], local: dict[str, Any]
) -> None:
    base, theirs = pair
    mine = copy.deepcopy(base)
    mine["sources"][LOCAL_KEY] = local
    expected = copy.deepcopy(theirs)
    expected["sources"][LOCAL_KEY] = local
    assert_clean_in_every_mode(base, theirs, mine, expected=expected)


@SETTINGS
@given(st.data())
def test_a_source_the_new_version_removes_and_nobody_edited_is_removed(data: st.DataObject) -> None:
    base, key, _ = data.draw(one_field())
    theirs = without_source(base, key)
    # Local edits elsewhere in the set stay; the removed source itself was left alone.
    mine = data.draw(edited(base))
    mine["sources"][key] = copy.deepcopy(base["sources"][key])
    for mode in OnConflict:
        result = merge(base, theirs, mine, mode)
        assert result.conflicts == []
        assert result.merged == without_source(mine, key)


@SETTINGS
@given(st.data())
def test_a_removed_source_that_was_edited_locally_is_one_conflict_at_the_source(data: st.DataObject) -> None:
    base, key, name = data.draw(one_field())
    mine = with_field(base, key, name, other_value(data, base["sources"][key], name))
    theirs = without_source(base, key)
    # merge.py does not go into a source one side deleted: the conflict is the whole source.
    for mode in OnConflict:
        assert merge(base, theirs, mine, mode).conflicts == [f"/sources/{key}"]
    assert merge(base, theirs, mine).merged == mine
    assert merge(base, theirs, mine, OnConflict.KEEP_MINE).merged == mine
    assert merge(base, theirs, mine, OnConflict.TAKE_THEIRS).merged == theirs


@SETTINGS
@given(st.data())
def test_a_source_removed_locally_that_the_bundle_changed_is_one_conflict_at_the_source(
    data: st.DataObject,
) -> None:
    base, key, name = data.draw(one_field())
    theirs = with_field(base, key, name, other_value(data, base["sources"][key], name))
    mine = without_source(base, key)
    for mode in OnConflict:
        assert merge(base, theirs, mine, mode).conflicts == [f"/sources/{key}"]
    assert merge(base, theirs, mine, OnConflict.KEEP_MINE).merged == mine
    assert merge(base, theirs, mine, OnConflict.TAKE_THEIRS).merged == theirs


@SETTINGS
@given(st.data())
def test_edits_to_different_fields_of_one_source_merge(data: st.DataObject) -> None:
    base, key, _ = data.draw(one_field())
    source = base["sources"][key]
    theirs_field, mine_field = data.draw(
        st.lists(st.sampled_from(editable_fields(source)), unique=True, min_size=2, max_size=2)
    )
    theirs_value = other_value(data, source, theirs_field)
    mine_value = other_value(data, source, mine_field)
    theirs = with_field(base, key, theirs_field, theirs_value)
    mine = with_field(base, key, mine_field, mine_value)
    expected = with_field(with_field(base, key, theirs_field, theirs_value), key, mine_field, mine_value)
    assert_clean_in_every_mode(base, theirs, mine, expected=expected)


@SETTINGS
@given(st.data())
def test_edits_to_one_field_with_different_values_conflict_at_its_pointer(data: st.DataObject) -> None:
    base, key, name = data.draw(one_field())
    source = base["sources"][key]
    theirs_value = other_value(data, source, name)
    mine_value = other_value(data, source, name, theirs_value)
    theirs = with_field(base, key, name, theirs_value)
    mine = with_field(base, key, name, mine_value)
    # Conflicts are reported in every mode (lists such as laws or credentials are one value);
    # the mode only decides which side the merged value takes.
    for mode in OnConflict:
        assert merge(base, theirs, mine, mode).conflicts == [f"/sources/{key}/{name}"]
    assert merge(base, theirs, mine).merged == mine
    assert merge(base, theirs, mine, OnConflict.KEEP_MINE).merged == mine
    assert merge(base, theirs, mine, OnConflict.TAKE_THEIRS).merged == theirs


@SETTINGS
@given(st.data())
def test_the_same_edit_on_both_sides_is_no_conflict(data: st.DataObject) -> None:
    base, key, name = data.draw(one_field())
    both = with_field(base, key, name, other_value(data, base["sources"][key], name))
    assert_clean_in_every_mode(base, both, copy.deepcopy(both), expected=both)


@pytest.mark.parametrize(
    ("mode", "severity", "kept"),
    [
        (OnConflict.FAIL, "blocking", "acme-mine"),
        (OnConflict.KEEP_MINE, "warning", "acme-mine"),
        (OnConflict.TAKE_THEIRS, "warning", "acme-theirs"),
    ],
)
def test_a_source_conflict_blocks_only_when_the_mode_is_fail(
    mode: OnConflict, severity: str, kept: str
) -> None:
    s3 = source_spec("s3", {"bucket": "acme", "prefix": "docs/"}, ["access_key_id"])
    base = {"set": {"name": "Law", "description": "", "data_description": ""}, "sources": {"s3-1": s3}}
    theirs = with_field(base, "s3-1", "bucket", "acme-theirs")
    mine = with_field(with_field(base, "s3-1", "bucket", "acme-mine"), "s3-1", "region", "eu-central-1")
    result = merge(base, theirs, mine, mode)
    assert result.conflicts == ["/sources/s3-1/bucket"]
    assert result.merged["sources"]["s3-1"]["bucket"] == kept
    assert result.merged["sources"]["s3-1"]["region"] == "eu-central-1"
    issues = _conflict_issues("knowledge_set:law", result.conflicts, mode)
    assert [(i.code, i.severity, i.path) for i in issues] == [
        ("update_conflict", severity, "/sources/s3-1/bucket")
    ]
