"""Keys and references between entities."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.document.builders import analyze, analyze_data, issues_with, only_issue


@pytest.mark.parametrize("key", ["1abc", "_x", "with-dash", "has space", "ünï", ""])
def test_invalid_key_is_named(doc: dict[str, Any], key: str) -> None:
    doc["skills"][0]["key"] = key
    doc["agents"][0]["skills"] = [key]
    issue = only_issue(analyze(doc), "invalid_key")
    assert issue.path == "/skills/0/key"
    assert issue.line is not None


def test_invalid_setup_key(doc: dict[str, Any]) -> None:
    doc["setup"].append({"key": "bad-key", "label": "x", "type": "string", "required": False})
    issue = only_issue(analyze(doc), "invalid_key")
    assert issue.path == "/setup/2/key"


def test_duplicate_key_within_a_section(doc: dict[str, Any]) -> None:
    doc["mcps"].append(dict(doc["mcps"][0]))
    issue = only_issue(analyze(doc), "duplicate_key")
    assert issue.path == "/mcps/1/key"
    assert "/mcps/0" in issue.message


def test_duplicate_key_across_sections(doc: dict[str, Any]) -> None:
    doc["skills"][0]["key"] = "github"
    doc["agents"][0]["skills"] = ["github"]
    issue = only_issue(analyze(doc), "duplicate_key")
    assert issue.path == "/skills/0/key"
    assert "mcp 'github'" in issue.message


def test_duplicate_setup_key(doc: dict[str, Any]) -> None:
    doc["setup"].append(dict(doc["setup"][0]))
    issue = only_issue(analyze(doc), "duplicate_key")
    assert issue.path == "/setup/2/key"


@pytest.mark.parametrize(
    ("mutate", "pointer", "entity"),
    [
        (lambda d: d["agents"][0]["mcps"].append("slack"), "/agents/0/mcps/1", "agent:bot"),
        (lambda d: d["agents"][0]["skills"].append("nope"), "/agents/0/skills/1", "agent:bot"),
        (lambda d: d["channels"][0].__setitem__("agent", "ghost"), "/channels/0/agent", "channel:chat"),
        (
            lambda d: d["automations"][0].__setitem__("agent", "ghost"),
            "/automations/0/agent",
            "automation:daily",
        ),
        (lambda d: d["policies"][0].__setitem__("agent", "ghost"), "/policies/0/agent", "policy:cap"),
        (
            lambda d: d.__setitem__("gateway", {"members": ["github", "slack"]}),
            "/gateway/members/1",
            "gateway:gateway",
        ),
    ],
)
def test_unknown_reference_names_path_and_entity(
    doc: dict[str, Any], mutate: Any, pointer: str, entity: str
) -> None:
    mutate(doc)
    issue = only_issue(analyze(doc), "unknown_reference")
    assert (issue.path, issue.entity) == (pointer, entity)
    assert issue.blocking
    assert issue.line is not None


def test_references_are_by_key_not_by_name(doc: dict[str, Any]) -> None:
    doc["agents"][0]["mcps"] = ["GitHub"]  # the MCP's display name, not its key
    assert issues_with(analyze(doc), "unknown_reference")


def test_a_reference_to_an_agent_must_not_point_at_an_mcp(doc: dict[str, Any]) -> None:
    doc["channels"][0]["agent"] = "github"
    assert only_issue(analyze(doc), "unknown_reference").path == "/channels/0/agent"


@pytest.mark.parametrize("key", ["github\n", "gh\r\n"])
def test_a_trailing_newline_does_not_pass_for_a_key(doc: dict[str, Any], key: str) -> None:
    doc["mcps"][0]["key"] = key
    doc["agents"][0]["mcps"] = [key]
    assert only_issue(analyze_data(doc), "invalid_key").path == "/mcps/0/key"
