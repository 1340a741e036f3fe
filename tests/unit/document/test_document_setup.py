"""Setup fields, placeholders and the values an installer supplies. No message repeats a value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.document.builders import BASE, BASE_SETUP, analyze, analyze_data, issues_with, only_issue


def assert_no_value_leaks(preview: Any, *values: str) -> None:
    dumped = json.dumps(preview.to_json())
    for value in values:
        assert value not in dumped


def test_placeholder_to_undeclared_setup_key_blocks(doc: dict[str, Any]) -> None:
    doc["mcps"][0]["env"]["GITHUB_ORG"] = "${setup.org}"
    issue = only_issue(analyze(doc), "unknown_setup_reference")
    assert (issue.path, issue.entity) == ("/mcps/0/env/GITHUB_ORG", "mcp:github")
    assert "${setup.org}" in issue.message
    assert issue.line is not None


@pytest.mark.parametrize(
    ("mutate", "pointer"),
    [
        (lambda d: d["mcps"][0]["args"].append("--org=${setup.nope}"), "/mcps/0/args/2"),
        (lambda d: d["channels"][0].__setitem__("bot_token", "${setup.nope}"), "/channels/0/bot_token"),
        (lambda d: d["mcps"][0]["env"].__setitem__("X", "${setup.bad-key}"), "/mcps/0/env/X"),
        (lambda d: d["mcps"][0]["env"].__setitem__("X", "${setup.}"), "/mcps/0/env/X"),
    ],
)
def test_placeholders_are_found_wherever_they_may_stand(
    doc: dict[str, Any], mutate: Any, pointer: str
) -> None:
    mutate(doc)
    assert only_issue(analyze(doc), "unknown_setup_reference").path == pointer


def test_placeholders_in_url_mcp_fields(doc: dict[str, Any]) -> None:
    doc["mcps"].append(
        {
            "key": "remote",
            "name": "Remote",
            "type": "url",
            "endpoint_url": "https://${setup.host}/mcp",
            "headers": {"Authorization": "Bearer ${setup.remote_key}"},
        }
    )
    paths = sorted(i.path for i in issues_with(analyze(doc), "unknown_setup_reference"))
    assert paths == ["/mcps/1/endpoint_url", "/mcps/1/headers/Authorization"]


def test_placeholder_where_it_is_not_substituted_warns(doc: dict[str, Any]) -> None:
    doc["agents"][0]["instructions"] = "Work for ${setup.github_token}"
    preview = analyze(doc)
    issue = only_issue(preview, "placeholder_not_substituted")
    assert issue.path == "/agents/0/instructions"
    assert not preview.blocking


def test_missing_required_setup_blocks_and_names_the_field(doc: dict[str, Any]) -> None:
    preview = analyze(doc, {"bot_token": "123:abc"})
    issue = only_issue(preview, "missing_setup")
    assert (issue.path, issue.entity) == ("/setup/0", "setup:github_token")
    assert "GitHub token" in issue.message
    assert preview.blocking


def test_empty_value_for_required_field_counts_as_missing(doc: dict[str, Any]) -> None:
    assert only_issue(analyze(doc, {**BASE_SETUP, "github_token": ""}), "missing_setup")


def test_optional_field_may_be_left_out(doc: dict[str, Any]) -> None:
    doc["setup"].append({"key": "org", "label": "Org", "type": "string", "required": False})
    doc["mcps"][0]["env"]["ORG"] = "${setup.org}"
    assert not analyze(doc).blocking


def test_default_fills_a_missing_value(doc: dict[str, Any]) -> None:
    doc["setup"].append({"key": "org", "label": "Org", "type": "string", "default": "acme"})
    doc["mcps"][0]["env"]["ORG"] = "${setup.org}"
    assert not analyze(doc).blocking


def test_secret_field_takes_no_default(doc: dict[str, Any]) -> None:
    doc["setup"][0]["default"] = "ghp_shipped_in_the_document"
    issue = only_issue(analyze(doc), "invalid_setup_default")
    assert issue.path == "/setup/0/default"
    assert_no_value_leaks(analyze(doc), "ghp_shipped_in_the_document")


@pytest.mark.parametrize(
    ("field_type", "default"),
    [
        ("number", "eight"),
        ("boolean", "maybe"),
        ("url", "not a url"),
        ("url", "ftp://x.example"),
        ("string", 3),
    ],
)
def test_default_must_fit_its_type(doc: dict[str, Any], field_type: str, default: object) -> None:
    doc["setup"].append({"key": "extra", "label": "Extra", "type": field_type, "default": default})
    doc["mcps"][0]["env"]["EXTRA"] = "${setup.extra}"
    assert only_issue(analyze(doc), "invalid_setup_default").path == "/setup/2/default"


@pytest.mark.parametrize(
    ("field_type", "value", "ok"),
    [
        ("number", "42", True),
        ("number", "-1.5e3", True),
        ("number", "forty-two", False),
        ("boolean", "TRUE", True),
        ("boolean", "yes", False),
        ("url", "https://mcp.example.com/x", True),
        ("url", "mcp.example.com", False),
        ("url", "https://exa mple.com", False),
        ("string", "anything at all", True),
    ],
)
def test_supplied_values_must_fit_their_type(
    doc: dict[str, Any], field_type: str, value: str, ok: bool
) -> None:
    doc["setup"].append({"key": "extra", "label": "Extra", "type": field_type})
    doc["mcps"][0]["env"]["EXTRA"] = "${setup.extra}"
    preview = analyze(doc, {**BASE_SETUP, "extra": value})
    found = issues_with(preview, "invalid_setup_value")
    assert (not found) == ok
    if found:
        assert found[0].path == "/setup/2"
        assert_no_value_leaks(preview, value)


def test_unknown_supplied_key_warns(doc: dict[str, Any]) -> None:
    preview = analyze(doc, {**BASE_SETUP, "stray": "value"})
    issue = only_issue(preview, "unknown_setup_key")
    assert issue.severity == "warning"
    assert not preview.blocking


def test_unused_setup_field_warns(doc: dict[str, Any]) -> None:
    doc["setup"].append({"key": "unused", "label": "Unused", "type": "string", "required": False})
    issue = only_issue(analyze(doc), "unused_setup_field")
    assert issue.path == "/setup/2/key"
    assert issue.severity == "warning"


def test_secret_values_never_appear_in_any_issue(doc: dict[str, Any]) -> None:
    secret = "ghp_TOPSECRET_0123456789abcdefghijkl"
    doc["setup"].append({"key": "port", "label": "Port", "type": "number"})
    doc["mcps"][0]["env"]["PORT"] = "${setup.port}"
    preview = analyze(doc, {"github_token": secret, "bot_token": secret, "port": secret, "stray": secret})
    assert issues_with(preview, "invalid_setup_value")
    assert_no_value_leaks(preview, secret)


@pytest.mark.parametrize(
    "key", ["\ud800", "a\udcffb", "\x1b[2J", "k" * 5000, "evil\u202etxt.exe", "a\u2066b"]
)
def test_unknown_setup_keys_are_quoted_printable_and_short(key: str) -> None:
    issue = only_issue(analyze(BASE, {**BASE_SETUP, key: "v"}), "unknown_setup_key")
    assert issue.path is None
    for text in (issue.message, issue.entity or ""):
        text.encode("utf-8")
        assert text.isprintable()
    assert len(issue.message) < 300


@pytest.mark.parametrize("value", ["\ud800", "ghp_\udcff"])
def test_a_setup_value_that_is_not_text_blocks_without_being_shown(value: str) -> None:
    issue = only_issue(analyze(BASE, {**BASE_SETUP, "github_token": value}), "invalid_setup_value")
    assert issue.path == "/setup/0"
    assert value not in issue.message


@pytest.mark.parametrize(
    ("where", "pointer"),
    [(("description",), "/description"), (("mcps", 0, "env", "GITHUB_TOKEN"), "/mcps/0/env/GITHUB_TOKEN")],
)
def test_loaded_data_with_a_lone_surrogate_is_an_invalid_document(
    doc: dict[str, Any], where: tuple[Any, ...], pointer: str
) -> None:
    target: Any = doc
    for token in where[:-1]:
        target = target[token]
    target[where[-1]] = "x\ud800"
    preview = analyze_data(doc)
    issue = only_issue(preview, "invalid_document")
    assert preview.bundle is None and issue.path == pointer
    json.dumps(preview.to_json(), ensure_ascii=False).encode("utf-8")


def test_a_surrogate_in_a_loaded_key_is_an_invalid_document(doc: dict[str, Any]) -> None:
    doc["mcps"][0]["env"]["\ud800"] = "x"
    preview = analyze_data(doc)
    issue = only_issue(preview, "invalid_document")
    json.dumps(preview.to_json(), ensure_ascii=False).encode("utf-8")
    assert issue.path is not None and issue.path.startswith("/mcps/0/env")
