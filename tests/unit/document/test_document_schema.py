"""Shape and type rules: schema version, unknown fields, closed literals, strict scalars."""

from __future__ import annotations

from typing import Any

import pytest

from bundle_operator.document import parse_bundle_text
from tests.unit.document.builders import analyze, analyze_data, only_issue


def test_valid_document_has_no_issues(doc: dict[str, Any]) -> None:
    preview = analyze(doc)
    assert preview.issues == []
    assert not preview.blocking
    assert preview.bundle is not None and preview.bundle.name == "triage-kit"


@pytest.mark.parametrize("version", ["0.3.0", "1.0.0", "0.1", 0.1, "0.2"])
def test_other_schema_versions_are_refused_outright(doc: dict[str, Any], version: object) -> None:
    doc["schema_version"] = version
    doc["surprise"] = True  # never looked at: the document is not read at all
    preview = analyze(doc)
    assert [i.code for i in preview.issues] == ["unsupported_schema_version"]
    issue = preview.issues[0]
    assert issue.path == "/schema_version"
    assert issue.line == 1
    assert preview.bundle is None and preview.entities == []


def test_missing_schema_version_is_named(doc: dict[str, Any]) -> None:
    del doc["schema_version"]
    issue = only_issue(analyze(doc), "invalid_document")
    assert issue.path == "/schema_version"


def test_top_level_must_be_a_mapping() -> None:
    result = parse_bundle_text("- a\n- b\n")
    assert result.issues[0].code == "invalid_document"
    assert "mapping" in result.issues[0].message


@pytest.mark.parametrize(
    ("where", "pointer"),
    [
        (lambda d: d.__setitem__("surprise", 1), "/surprise"),
        (lambda d: d["mcps"][0].__setitem__("surprise", 1), "/mcps/0/surprise"),
        (lambda d: d["skills"][0].__setitem__("surprise", 1), "/skills/0/surprise"),
        (lambda d: d["agents"][0].__setitem__("tools", []), "/agents/0/tools"),
        (lambda d: d["setup"][0].__setitem__("secret", True), "/setup/0/secret"),
        (lambda d: d["channels"][0].__setitem__("chat_id", 1), "/channels/0/chat_id"),
        (lambda d: d["automations"][0].__setitem__("cron", "x"), "/automations/0/cron"),
        (lambda d: d.__setitem__("gateway", {"members": [], "upstreams": []}), "/gateway/upstreams"),
    ],
)
def test_unknown_field_anywhere_is_an_error_with_its_path(
    doc: dict[str, Any], where: Any, pointer: str
) -> None:
    where(doc)
    preview = analyze(doc)
    issue = only_issue(preview, "unknown_field")
    assert issue.path == pointer
    assert issue.blocking
    assert issue.line is not None
    assert preview.bundle is None


def test_unknown_field_line_is_the_fields_own_line() -> None:
    text = (
        'schema_version: "0.1.0"\nname: a\nmcps:\n  - key: m\n    name: M\n    type: url\n'
        "    endpoint_url: https://x.example/mcp\n    headerz: {}\n"
    )
    issue = only_issue(analyze(text), "unknown_field")
    assert (issue.path, issue.line, issue.entity) == ("/mcps/0/headerz", 8, "mcp:m")


def test_fields_of_another_mcp_type_are_unknown(doc: dict[str, Any]) -> None:
    doc["mcps"][0]["image"] = "ghcr.io/x/y:1"
    issue = only_issue(analyze(doc), "unknown_field")
    assert issue.path == "/mcps/0/image"


@pytest.mark.parametrize(
    ("mutate", "pointer"),
    [
        (lambda d: d["mcps"][0].__setitem__("type", "stdio"), "/mcps/0"),
        (lambda d: d["channels"][0].__setitem__("type", "slack"), "/channels/0/type"),
        (lambda d: d["automations"][0].__setitem__("type", "webhook"), "/automations/0/type"),
        (lambda d: d["skills"][0].__setitem__("source_type", "zip"), "/skills/0"),
        (lambda d: d["policies"][0].__setitem__("type", "rate_limit"), "/policies/0/type"),
        (lambda d: d["setup"][0].__setitem__("type", "password"), "/setup/0/type"),
    ],
)
def test_closed_literals_refuse_other_values(doc: dict[str, Any], mutate: Any, pointer: str) -> None:
    mutate(doc)
    issue = only_issue(analyze(doc), "invalid_document")
    assert issue.path == pointer
    assert "must be one of" in issue.message or "type must be one of" in issue.message


def test_missing_required_fields_are_named(doc: dict[str, Any]) -> None:
    del doc["mcps"][0]["command"]
    del doc["agents"][0]["name"]
    preview = analyze(doc)
    paths = sorted(i.path for i in preview.issues if i.code == "invalid_document")
    assert paths == ["/agents/0/name", "/mcps/0/command"]
    assert all("required" in i.message for i in preview.issues)


@pytest.mark.parametrize(
    ("mutate", "pointer"),
    [
        (lambda d: d.__setitem__("version", 1.0), "/version"),
        (lambda d: d["mcps"][0]["args"].append(3), "/mcps/0/args/2"),
        (lambda d: d["mcps"][0]["env"].__setitem__("PORT", 8080), "/mcps/0/env/PORT"),
        (lambda d: d["channels"][0].__setitem__("enabled", "yes"), "/channels/0/enabled"),
        (lambda d: d["setup"][0].__setitem__("required", "no"), "/setup/0/required"),
    ],
)
def test_scalars_are_not_coerced(doc: dict[str, Any], mutate: Any, pointer: str) -> None:
    mutate(doc)
    issue = only_issue(analyze_data(doc), "invalid_document")
    assert issue.path == pointer


def test_missing_type_of_mcp_is_explained(doc: dict[str, Any]) -> None:
    del doc["mcps"][0]["type"]
    issue = only_issue(analyze(doc), "invalid_document")
    assert issue.path == "/mcps/0"
    assert "'type' is required" in issue.message


@pytest.mark.parametrize("name", ["has space", "-leading", "trailing-", "x" * 64, "a/b"])
def test_bundle_name_must_be_label_safe(doc: dict[str, Any], name: str) -> None:
    doc["name"] = name
    issue = only_issue(analyze(doc), "invalid_name")
    assert issue.path == "/name"


@pytest.mark.parametrize("version", ["1", "1.0", "v1.0.0", "01.0.0", "1.0.0-"])
def test_version_must_be_semver(doc: dict[str, Any], version: str) -> None:
    doc["version"] = version
    assert only_issue(analyze(doc), "invalid_version").path == "/version"


@pytest.mark.parametrize("version", ["0.0.0", "1.4.0", "2.0.0-rc.1", "1.0.0+build.5"])
def test_semver_versions_are_accepted(doc: dict[str, Any], version: str) -> None:
    doc["version"] = version
    assert not analyze(doc).blocking


def test_other_formats_are_not_adapted_a_plugin_manifest_is_refused() -> None:
    plugin = '{"name": "triage", "version": "1.0.0", "mcpServers": {"gh": {"command": "npx"}}}'
    preview = analyze(plugin)
    assert preview.bundle is None
    assert preview.blocking
    assert [i.path for i in preview.issues] == ["/schema_version"]
