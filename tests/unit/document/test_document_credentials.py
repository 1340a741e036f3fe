"""Literal credentials in MCP configuration are blocked by analyze, by field and never by value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bundle_operator.engine.preview import Preview
from tests.unit.document.builders import BASE_SETUP, analyze, only_issue

SECRET = "hunter2hunter2"  # what no message may repeat
OPAQUE = "N2Y4ZTk3NjEtMmFhZi00MjRhLWE2Mj"


def command_mcp(**extra: Any) -> dict[str, Any]:
    return {"key": "db", "name": "Database", "type": "command", "command": "npx", **extra}


def url_mcp(**extra: Any) -> dict[str, Any]:
    return {"key": "db", "name": "Database", "type": "url", "endpoint_url": "https://db.example/mcp", **extra}


def assert_blocked(preview: Preview, code: str, path: str, value: str) -> None:
    issue = only_issue(preview, code)
    assert (issue.blocking, issue.path, issue.entity) == (True, path, "mcp:db")
    assert preview.blocking
    assert value not in json.dumps(preview.to_json())


@pytest.mark.parametrize(
    ("mcp", "path", "value"),
    [
        (command_mcp(env={"DB_PASSWORD": SECRET}), "/mcps/1/env/DB_PASSWORD", SECRET),
        (command_mcp(env={"OPENAI_API_KEY": SECRET}), "/mcps/1/env/OPENAI_API_KEY", SECRET),
        (command_mcp(env={"UPSTREAM": f"Bearer {SECRET}"}), "/mcps/1/env/UPSTREAM", SECRET),
        (
            command_mcp(env={"DATABASE_URL": f"postgresql://reader:{SECRET}@db.internal/analytics"}),
            "/mcps/1/env/DATABASE_URL",
            SECRET,
        ),
        (command_mcp(args=["-y", "server", f"--api-key={SECRET}"]), "/mcps/1/args/2", SECRET),
        (command_mcp(args=["--token", SECRET]), "/mcps/1/args/1", SECRET),
        (command_mcp(args=[f"GITHUB_TOKEN={SECRET}"]), "/mcps/1/args/0", SECRET),
        (command_mcp(args=["--header", f"Authorization: Bearer {SECRET}"]), "/mcps/1/args/1", SECRET),
        (
            command_mcp(args=[f"postgresql://reader:{SECRET}@db.internal/analytics"]),
            "/mcps/1/args/0",
            SECRET,
        ),
        (url_mcp(headers={"X-Api-Key": SECRET}), "/mcps/1/headers/X-Api-Key", SECRET),
        (url_mcp(headers={"Authorization": f"Basic {SECRET}"}), "/mcps/1/headers/Authorization", SECRET),
        (url_mcp(endpoint_url=f"https://admin:{SECRET}@db.example/mcp"), "/mcps/1/endpoint_url", SECRET),
        (url_mcp(endpoint_url=f"https://db.example/mcp?api_key={SECRET}"), "/mcps/1/endpoint_url", SECRET),
        (url_mcp(endpoint_url=f"https://mcp.example.com/s/{OPAQUE}/mcp"), "/mcps/1/endpoint_url", OPAQUE),
    ],
)
def test_a_credential_written_into_an_mcp_is_blocked_by_field(
    doc: dict[str, Any], mcp: dict[str, Any], path: str, value: str
) -> None:
    doc["mcps"].append(mcp)
    assert_blocked(analyze(doc), "credential_literal", path, value)


@pytest.mark.parametrize(
    "mcp",
    [
        command_mcp(
            env={"DB_PASSWORD": "${setup.pw}"}, args=["--api-key=${setup.pw}", "--token", "${setup.pw}"]
        ),
        command_mcp(env={"DATABASE_URL": "postgresql://reader:${setup.pw}@db.internal/analytics"}),
        command_mcp(env={"DB_PASSWORD": ""}),  # nothing written
        url_mcp(headers={"Authorization": "Bearer ${setup.pw}"}),
        url_mcp(endpoint_url="https://admin:${setup.pw}@db.example/mcp"),
        command_mcp(env={"LOG_LEVEL": "debug"}, args=["--port", "5432", "--verbose"]),
    ],
)
def test_credentials_from_secret_fields_and_plain_values_pass(
    doc: dict[str, Any], mcp: dict[str, Any]
) -> None:
    doc["setup"].append({"key": "pw", "label": "Password", "type": "secret"})
    doc["mcps"].append(mcp)
    preview = analyze(doc, {**BASE_SETUP, "pw": SECRET})
    assert [i.code for i in preview.issues if i.blocking] == []


def test_a_credential_taken_from_a_plain_setup_field_is_blocked(doc: dict[str, Any]) -> None:
    doc["setup"].append({"key": "pw", "label": "Password", "type": "string"})
    doc["mcps"].append(command_mcp(env={"DB_PASSWORD": "${setup.pw}"}))
    preview = analyze(doc, {**BASE_SETUP, "pw": SECRET})
    assert_blocked(preview, "credential_not_secret_field", "/mcps/1/env/DB_PASSWORD", SECRET)


@pytest.mark.parametrize(
    "mcp",
    [
        command_mcp(env={"MAX_TOKENS": "4096", "SESSION_TIMEOUT": "30", "TOKEN_CACHE": "false"}),
        command_mcp(args=["-y", "server", "--max-tokens=1000", "--token-refresh", "yes"]),
        url_mcp(headers={"X-Token-Budget": "2.5"}),
    ],
)
def test_a_number_or_yes_no_under_a_credential_name_is_a_setting_not_a_credential(
    doc: dict[str, Any], mcp: dict[str, Any]
) -> None:
    doc["mcps"].append(mcp)
    preview = analyze(doc, BASE_SETUP)
    assert [i.code for i in preview.issues if i.blocking] == []


SETTINGS_NAMED_LIKE_CREDENTIALS = {
    "TOKENIZER": "cl100k",
    "SESSION_DIR": "/tmp/s",
    "AUTH_TYPE": "oauth",
    "AUTH_METHOD": "basic",
    "TOKEN_LIMIT": "4k",
    "TOKEN_ENDPOINT": "https://auth.example.com/token",
    "SECRETS_PATH": "/run/secrets",
    "PASSWORD_FILE": "/run/pw",
    "MAX_OUTPUT_TOKENS": "8k",
    "PUBLIC_KEY": "ssh-ed25519 AAAA",
}


def test_settings_about_credentials_are_not_credentials(doc: dict[str, Any]) -> None:
    args = ["-y", "server", "--no-auth", "/data", "--token-file", "/run/t", "--tokenizer", "cl100k"]
    doc["mcps"].append(command_mcp(env=SETTINGS_NAMED_LIKE_CREDENTIALS, args=args))
    preview = analyze(doc, BASE_SETUP)
    assert [(i.code, i.path) for i in preview.issues if i.blocking] == []


@pytest.mark.parametrize(
    "name", ["OPENAI_KEY", "ANTHROPIC_KEY", "DB_PASS", "GITHUB_PAT", "AUTH_TOKEN", "SESSION_SECRET"]
)
def test_provider_keys_and_short_password_names_are_credentials(doc: dict[str, Any], name: str) -> None:
    doc["mcps"].append(command_mcp(env={name: SECRET}))
    assert_blocked(analyze(doc, BASE_SETUP), "credential_literal", f"/mcps/1/env/{name}", SECRET)


@pytest.mark.parametrize(
    ("field_type", "value", "blocked"),
    [
        ("string", f"postgres://admin:{SECRET}@db.internal/prod", True),
        ("secret", f"postgres://admin:{SECRET}@db.internal/prod", False),
        ("string", "postgres://db.internal/prod", False),
    ],
)
def test_a_credential_that_shows_only_once_setup_is_filled_in_needs_a_secret_field(
    doc: dict[str, Any], field_type: str, value: str, blocked: bool
) -> None:
    doc["setup"].append({"key": "conn", "label": "Connection", "type": field_type})
    doc["mcps"].append(command_mcp(args=["-y", "@modelcontextprotocol/server-postgres", "${setup.conn}"]))
    preview = analyze(doc, {**BASE_SETUP, "conn": value})
    if blocked:
        assert_blocked(preview, "credential_not_secret_field", "/mcps/1/args/2", SECRET)
    else:
        assert [i.code for i in preview.issues if i.blocking] == []
