"""MCP rules: command runtimes, context secrets, credentials in channels, endpoint URLs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bundle_operator.document.runtimes import ALLOWED_COMMAND_RUNTIMES
from tests.unit.document.builders import BASE_SETUP, GOOD_SECRET, action_of, analyze, issues_with, only_issue


@pytest.mark.parametrize("runtime", sorted(ALLOWED_COMMAND_RUNTIMES))
def test_the_eight_runtimes_are_created(doc: dict[str, Any], runtime: str) -> None:
    doc["mcps"][0]["command"] = runtime
    preview = analyze(doc)
    assert action_of(preview, "mcp:github") == ("CREATE", None)
    assert not preview.issues


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("./server.js", "local path"),
        ("/usr/local/bin/mcp-github", "local path"),
        ("${CLAUDE_PLUGIN_ROOT}/bin/server", "CLAUDE_PLUGIN_ROOT"),
        ("ruby", "not an allowed runtime"),
        ("C:\\tools\\server.exe", "local path"),
    ],
)
def test_other_commands_are_skipped_with_a_warning_not_a_block(
    doc: dict[str, Any], command: str, words: str
) -> None:
    doc["mcps"][0]["command"] = command
    preview = analyze(doc)
    action, reason = action_of(preview, "mcp:github")
    assert action == "SKIPPED"
    assert reason is not None and words in reason
    issue = only_issue(preview, "unsupported_runtime")
    assert (issue.severity, issue.path, issue.entity) == ("warning", "/mcps/0/command", "mcp:github")
    # The agent that uses the skipped MCP is still created, and says so.
    assert action_of(preview, "agent:bot") == ("CREATE", None)
    assert only_issue(preview, "dependency_skipped").entity == "agent:bot"
    assert not preview.blocking


@pytest.mark.parametrize(
    ("args", "index"),
    [
        (["${CLAUDE_PLUGIN_ROOT}/servers/github.js"], 0),
        (["-y", "--config", "${CLAUDE_PLUGIN_ROOT}/config.json"], 2),
        (["--root=${CLAUDE_PLUGIN_ROOT}"], 0),
    ],
)
def test_plugin_root_in_an_argument_skips_the_mcp(doc: dict[str, Any], args: list[str], index: int) -> None:
    # The usual plugin form: an allowed runtime that runs a file inside the plugin.
    doc["mcps"][0]["command"] = "node"
    doc["mcps"][0]["args"] = args
    preview = analyze(doc)
    action, reason = action_of(preview, "mcp:github")
    assert action == "SKIPPED"
    assert reason is not None and "CLAUDE_PLUGIN_ROOT" in reason
    issue = only_issue(preview, "unsupported_runtime")
    assert (issue.severity, issue.path, issue.entity) == ("warning", f"/mcps/0/args/{index}", "mcp:github")
    assert not preview.blocking


def test_plugin_root_in_a_docker_argument_is_not_a_command_runtime(doc: dict[str, Any]) -> None:
    doc["mcps"][0] = {
        "key": "github",
        "name": "GitHub",
        "type": "docker",
        "image": "ghcr.io/github/github-mcp-server",
        "args": ["-v", "${CLAUDE_PLUGIN_ROOT}/data:/data"],
    }
    assert action_of(analyze(doc), "mcp:github") == ("CREATE", None)


def url_mcp(**extra: Any) -> dict[str, Any]:
    return {
        "key": "notes",
        "name": "Notes",
        "type": "url",
        "endpoint_url": "https://notes.example/mcp",
        **extra,
    }


def with_signing_field(doc: dict[str, Any], field_type: str = "secret") -> None:
    doc["setup"].append({"key": "signing", "label": "Signing key", "type": field_type})


def test_context_secret_reference_to_secret_field_on_url_mcp_is_accepted(doc: dict[str, Any]) -> None:
    with_signing_field(doc)
    doc["mcps"].append(url_mcp(context_secret="${setup.signing}"))
    preview = analyze(doc, {**BASE_SETUP, "signing": GOOD_SECRET})
    assert preview.issues == []


def test_context_secret_literal_is_refused_without_echoing_it(doc: dict[str, Any]) -> None:
    literal = "k" * 40
    doc["mcps"].append(url_mcp(context_secret=literal))
    preview = analyze(doc)
    issue = only_issue(preview, "context_secret_literal")
    assert (issue.path, issue.entity, issue.blocking) == ("/mcps/1/context_secret", "mcp:notes", True)
    assert literal not in json.dumps(preview.to_json())


def test_context_secret_must_refer_to_a_secret_field(doc: dict[str, Any]) -> None:
    with_signing_field(doc, "string")
    doc["mcps"].append(url_mcp(context_secret="${setup.signing}"))
    issue = only_issue(
        analyze(doc, {**BASE_SETUP, "signing": GOOD_SECRET}), "context_secret_not_secret_field"
    )
    assert issue.path == "/mcps/1/context_secret"


@pytest.mark.parametrize("index", [0])
def test_context_secret_only_on_url_mcps(doc: dict[str, Any], index: int) -> None:
    with_signing_field(doc)
    doc["mcps"][index]["context_secret"] = "${setup.signing}"
    issue = only_issue(analyze(doc, {**BASE_SETUP, "signing": GOOD_SECRET}), "context_secret_not_url_mcp")
    assert issue.path == "/mcps/0/context_secret"


def test_context_secret_to_undeclared_field(doc: dict[str, Any]) -> None:
    doc["mcps"].append(url_mcp(context_secret="${setup.signing}"))
    assert only_issue(analyze(doc), "unknown_setup_reference").path == "/mcps/1/context_secret"


@pytest.mark.parametrize(("length", "ok"), [(31, False), (32, True), (512, True), (513, False)])
def test_context_secret_value_length(doc: dict[str, Any], length: int, ok: bool) -> None:
    with_signing_field(doc)
    doc["mcps"].append(url_mcp(context_secret="${setup.signing}"))
    value = "q" * length
    preview = analyze(doc, {**BASE_SETUP, "signing": value})
    found = issues_with(preview, "context_secret_length")
    assert (not found) == ok
    if found:
        assert found[0].path == "/mcps/1/context_secret"
        assert "'signing'" in found[0].message
        assert value not in json.dumps(preview.to_json())


def test_channel_bot_token_literal_is_refused(doc: dict[str, Any]) -> None:
    token = "123456:AAH-real-looking-token"
    doc["channels"][0]["bot_token"] = token
    preview = analyze(doc)
    issue = only_issue(preview, "credential_literal")
    assert issue.path == "/channels/0/bot_token"
    assert token not in json.dumps(preview.to_json())


def test_channel_bot_token_from_non_secret_field_is_refused(doc: dict[str, Any]) -> None:
    doc["setup"][1]["type"] = "string"
    issue = only_issue(analyze(doc), "credential_not_secret_field")
    assert issue.path == "/channels/0/bot_token"


@pytest.mark.parametrize("url", ["notes.example/mcp", "ftp://notes.example/mcp", "https://", "https://a b/"])
def test_literal_endpoint_url_must_be_http(doc: dict[str, Any], url: str) -> None:
    doc["mcps"].append(url_mcp(endpoint_url=url))
    assert only_issue(analyze(doc), "invalid_url").path == "/mcps/1/endpoint_url"


def test_endpoint_url_from_setup_is_checked_once_filled(doc: dict[str, Any]) -> None:
    doc["setup"].append({"key": "host", "label": "Host", "type": "string"})
    doc["mcps"].append(url_mcp(endpoint_url="${setup.host}/mcp"))
    assert only_issue(analyze(doc, {**BASE_SETUP, "host": "notes.example"}), "invalid_url")
    assert not issues_with(analyze(doc, {**BASE_SETUP, "host": "https://notes.example"}), "invalid_url")


def test_docker_mcps_are_always_accepted(doc: dict[str, Any]) -> None:
    doc["mcps"].append(
        {"key": "charts", "name": "Charts", "type": "docker", "image": "ghcr.io/acme/charts:1"}
    )
    preview = analyze(doc)
    assert action_of(preview, "mcp:charts") == ("CREATE", None)
    assert preview.issues == []


@pytest.mark.parametrize(
    ("token", "ok"), [("123456:AAH-abc_DEF", True), ("not-a-token", False), ("123:", False)]
)
def test_bot_token_value_must_look_like_a_telegram_token(doc: dict[str, Any], token: str, ok: bool) -> None:
    preview = analyze(doc, {**BASE_SETUP, "bot_token": token})
    found = issues_with(preview, "invalid_setup_value")
    assert (not found) == ok
    if found:
        assert (found[0].path, found[0].entity) == ("/channels/0/bot_token", "channel:chat")
        assert token not in json.dumps(preview.to_json())
