"""Reading YAML and JSON text: what is refused, with which line."""

from __future__ import annotations

import json

import pytest

from bundle_operator.document import parse_bundle_text
from bundle_operator.document.source import MAX_SOURCE_BYTES
from tests.documents import bundle_document


def single(text: str | bytes) -> tuple[str, str, int | None]:
    result = parse_bundle_text(text)
    assert result.bundle is None
    assert len(result.issues) == 1, [i.to_json() for i in result.issues]
    issue = result.issues[0]
    assert issue.blocking
    return str(issue.code), issue.message, issue.line


def test_empty_document_is_refused() -> None:
    assert single("")[:1] == ("invalid_document",)
    assert single("   \n# only a comment\n")[0] == "invalid_document"


def test_invalid_yaml_names_the_line() -> None:
    code, message, line = single('schema_version: "0.1.0"\nname: x\nmcps: [\n  {key: a\n')
    assert code == "invalid_document"
    assert "invalid YAML" in message
    assert line is not None and line >= 4


@pytest.mark.parametrize(
    ("text", "said", "at"),
    [
        pytest.param(
            'schema_version: "0.1.0"\nname: a\n---\nname: b\n',
            "more than one",
            4,
            id="more_than_one_yaml_document_is_refused_at_the_second",
        ),
        pytest.param(
            'schema_version: "0.1.0"\nname: a\nname: b\n',
            "'name' appears twice",
            3,
            id="duplicate_mapping_key_names_key_and_line",
        ),
        pytest.param(
            '{\n  "schema_version": "0.1.0",\n  "name": "a",,\n}',
            "invalid JSON",
            3,
            id="json_errors_name_the_line",
        ),
    ],
)
def test_a_broken_document_is_invalid_naming_the_line(text: str, said: str, at: int) -> None:
    code, message, line = single(text)
    assert code == "invalid_document"
    assert said in message
    assert line == at


def test_non_string_keys_are_refused() -> None:
    code, message, line = single('schema_version: "0.1.0"\nname: a\n12: b\n')
    assert (code, line) == ("invalid_document", 3)
    assert "keys must be plain strings" in message


@pytest.mark.parametrize(
    "value",
    ["!!binary aGVsbG8=", "!custom thing", "!!set {a: null}", "!!python/object:os.system {}"],
)
def test_tags_beyond_json_are_refused(value: str) -> None:
    code, message, line = single(f'schema_version: "0.1.0"\nname: a\ndescription: {value}\n')
    assert (code, line) == ("invalid_document", 3)
    assert "tag" in message


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_numbers_are_refused(value: str) -> None:
    code, message, line = single(f'schema_version: "0.1.0"\nname: a\ndescription: {value}\n')
    assert (code, line) == ("invalid_document", 3)
    assert "finite" in message


def test_dates_stay_text_and_then_fail_as_wrong_type_not_crash() -> None:
    result = parse_bundle_text('schema_version: "0.1.0"\nname: 2024-01-01\n')
    assert result.bundle is not None  # a date-looking name is the text the author wrote
    assert result.bundle.name == "2024-01-01"


def test_alias_bomb_is_refused() -> None:
    lines = ['schema_version: "0.1.0"', "name: bomb", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    code, message, _ = single("\n".join(lines) + "\n")
    assert code == "invalid_document"
    assert "aliases expand" in message


def test_deep_nesting_is_refused_not_a_crash() -> None:
    deep = "[" * 5000 + "]" * 5000
    code, message, _ = single(f'schema_version: "0.1.0"\nname: a\ndescription: {deep}\n')
    assert code == "invalid_document"
    assert "nest" in message
    code, message, _ = single('{"schema_version": "0.1.0", "x": ' + deep + "}")
    assert code == "invalid_document"
    assert "nest" in message


def test_document_over_five_mib_is_refused_with_its_own_code() -> None:
    text = 'schema_version: "0.1.0"\nname: big\ndescription: "' + "x" * MAX_SOURCE_BYTES + '"\n'
    code, message, _ = single(text)
    assert code == "document_too_large"
    assert str(MAX_SOURCE_BYTES) in message
    code, _, _ = single(text.encode())
    assert code == "document_too_large"


def test_document_just_under_the_cap_is_read() -> None:
    head = 'schema_version: "0.1.0"\nname: big\ndescription: "'
    text = head + "x" * (MAX_SOURCE_BYTES - len(head) - 2) + '"\n'
    assert len(text.encode()) == MAX_SOURCE_BYTES
    assert parse_bundle_text(text).bundle is not None


def test_bytes_must_be_utf8_and_a_bom_is_accepted() -> None:
    code, message, _ = single(b'schema_version: "0.1.0"\nname: \xff\xfe\n')
    assert code == "invalid_document"
    assert "UTF-8" in message
    assert parse_bundle_text('\ufeffschema_version: "0.1.0"\nname: a\n'.encode()).bundle is not None


def test_json_duplicate_keys_and_nan_are_refused() -> None:
    code, message, line = single('{"schema_version": "0.1.0",\n "name": "a",\n "name": "b"}')
    assert (code, "'name' appears twice" in message, line) == ("invalid_document", True, 3)
    code, message, _ = single('{"schema_version": "0.1.0", "name": "a", "description": NaN}')
    assert (code, "NaN" in message) == ("invalid_document", True)


def test_json_issues_carry_lines() -> None:
    text = json.dumps(bundle_document("a", version=None, surprise=1), indent=2)
    result = parse_bundle_text(text)
    issue = result.issues[0]
    assert (issue.code, issue.path, issue.line) == ("unknown_field", "/surprise", 4)


def test_huge_integers_are_refused_not_a_crash() -> None:
    code, _, _ = single('{"schema_version": "0.1.0", "name": "a", "description": ' + "9" * 5000 + "}")
    assert code == "invalid_document"
    code, _, line = single('schema_version: "0.1.0"\nname: a\ndescription: ' + "9" * 5000 + "\n")
    assert (code, line) == ("invalid_document", 3)


def test_lone_surrogate_escapes_are_refused_with_their_path() -> None:
    code, message, _ = single('{"schema_version": "0.1.0", "name": "a", "description": "x\\ud800y"}')
    assert code == "invalid_document"
    assert message.startswith("/description: ")
    assert parse_bundle_text(
        '{"schema_version": "0.1.0", "name": "a", "description": "\\ud83d\\ude00"}'
    ).bundle


def test_text_that_is_not_valid_unicode_is_refused() -> None:
    code, message, _ = single('schema_version: "0.1.0"\nname: a\ndescription: \ud800\n')
    assert code == "invalid_document"
    assert "Unicode" in message


def test_parsing_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    assert gc.isenabled()
    parse_bundle_text('schema_version: "0.1.0"\nname: a\n')
    parse_bundle_text("not: [valid")
    assert gc.isenabled()
    gc.disable()
    try:
        parse_bundle_text('schema_version: "0.1.0"\nname: a\n')
        assert not gc.isenabled()
    finally:
        gc.enable()
