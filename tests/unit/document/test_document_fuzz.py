"""Property tests: whatever text arrives, the parser answers with issues, never another exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_operator.commands.output import render_table
from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.analyze import analyze_offline
from tests.documents import bundle_document

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "examples").glob("*.yaml"))]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=30,
)


def check(text: str | bytes, setup: dict[str, object] | None = None) -> None:
    parsed = parse_bundle_text(text)
    preview = analyze_offline(parsed, setup or {})
    out = preview.to_json()
    # The contract is always serializable, and writable as UTF-8 the way the CLI writes it.
    json.dumps(out, indent=2, ensure_ascii=False).encode("utf-8")
    render_table(preview).encode("utf-8")
    if parsed.bundle is None:
        assert preview.blocking
    for issue in preview.issues:
        assert issue.message
        assert issue.path is None or issue.path == "" or issue.path.startswith("/")


@SETTINGS
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    check(text)


@SETTINGS
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=200))
def test_arbitrary_code_points_including_surrogates(text: str) -> None:
    check(text)
    check('{"schema_version": "0.1.0", "name": "a", "description": ' + json.dumps(text) + "}")


@SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data: bytes) -> None:
    check(data)


@SETTINGS
@given(json_values)
def test_arbitrary_json_and_yaml_values(value: Any) -> None:
    check(json.dumps(value))
    check(yaml.safe_dump(value))


@SETTINGS
@given(
    st.dictionaries(st.sampled_from(["name", "mcps", "agents", "gateway", "setup", "version"]), json_values)
)
def test_arbitrary_sections_under_the_right_schema_version(sections: dict[str, Any]) -> None:
    check(json.dumps({"schema_version": "0.1.0", **sections}))


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return [replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


@st.composite
def mutated_examples(draw: st.DrawFn) -> Any:
    document = draw(st.sampled_from(EXAMPLES))
    for _ in range(draw(st.integers(1, 4))):
        target = draw(st.sampled_from(paths(document)))
        document = replaced(document, target, draw(json_values))
    return document


# Setup keys and values as a setup file or the command line can carry them: any code point,
# lone surrogates (a "\ud800" escape in a setup file), control characters, and bytes that are
# not UTF-8 (argv and files decoded with surrogateescape).
any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=40)
control_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x9F), max_size=20)
undecodable = st.binary(max_size=20).map(lambda raw: raw.decode("utf-8", "surrogateescape"))
setup_texts = st.text(max_size=40) | any_text | control_text | undecodable
setup_keys = setup_texts | st.sampled_from(["github_token", "bot_token", "org", "db_url"])
setup_values = setup_texts | st.booleans() | st.integers() | st.floats(allow_nan=False)
setups = st.dictionaries(setup_keys, setup_values, max_size=6)


@SETTINGS
@given(mutated_examples(), setups)
def test_mutated_examples(document: Any, setup: dict[str, object]) -> None:
    check(yaml.safe_dump(document), setup)
    check(json.dumps(document), setup)


# Time zones: real names, names of the right form that do not exist, and long '/'-separated names
# of any parts (a few hundred parts once made zoneinfo recurse through the import system). Lone
# surrogates are left out here: any text holding one is refused as invalid_document before its
# field is looked at (test_mutated_examples covers them).
timezone_parts = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=6) | st.sampled_from(
    ["a", "Europe", "..", ".", "", "Berlin", "tzdata", "__init__.py"]
)
timezones = (
    st.sampled_from(["UTC", "Europe/Berlin", "America/Argentina/ComodRivadavia", "Etc/GMT+10"])
    | st.from_regex(r"[A-Za-z0-9_+.-]{1,12}(/[A-Za-z0-9_+.-]{1,12}){0,4}", fullmatch=True)
    | st.lists(timezone_parts, min_size=1, max_size=600).map("/".join)
    | st.integers(1, 2000).map(lambda n: "/".join(["a"] * n))
)


@SETTINGS
@given(timezones)
def test_any_time_zone_is_a_valid_zone_or_an_issue_at_its_path(zone: str) -> None:
    automation = {"key": "daily", "type": "cron", "agent": "bot", "schedule": "0 8 * * *", "message": "m"}
    document = bundle_document(
        "tz",
        version=None,
        automations=[{**automation, "timezone": zone}],
        agents=[{"key": "bot", "name": "Bot"}],
    )
    check(json.dumps(document))
    preview = analyze_offline(parse_bundle_text(json.dumps(document)), {})
    codes = {issue.code for issue in preview.issues}
    assert codes <= {"invalid_timezone", "unused_setup_field"}, codes
    for issue in preview.issues:
        if issue.code == "invalid_timezone":
            assert issue.path == "/automations/0/timezone"


@SETTINGS
@given(st.sampled_from(EXAMPLES), setups)
def test_examples_with_any_setup_keys_and_values(document: Any, setup: dict[str, object]) -> None:
    check(yaml.safe_dump(document), setup)
