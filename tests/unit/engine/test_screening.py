"""The credential screening rules (seed 000) that export and analyze share, with examples for each."""

from __future__ import annotations

import pytest

from bundle_operator.document.credentials import (
    ArgFinding,
    is_authorization_value,
    is_credentialed_url,
    name_looks_like_credential,
    screen_args,
    value_is_credential,
)


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "api_key",
        "OPENAI_API_KEY",
        "apiKey",
        "X-Api-Key",
        "DB_PASSWORD",
        "client_secret",
        "Authorization",
        "SLACK_SIGNING_SECRET",
        "accessKey",
        "PRIVATE_KEY",
        "key",
        "Cookie",
        "passwd",
        "PGPASSWORD",
        "APITOKEN",
        "AUTHTOKEN",
    ],
)
def test_credential_names(name: str) -> None:
    assert name_looks_like_credential(name)


@pytest.mark.parametrize(
    "name", ["GITHUB_ORG", "REGION", "LOG_LEVEL", "author", "KEYBOARD_LAYOUT", "monkey", "PORT"]
)
def test_ordinary_names(name: str) -> None:
    assert not name_looks_like_credential(name)


@pytest.mark.parametrize("value", ["Bearer abc.def", "basic dXNlcjpwYXNz", "Token 123", "  Bearer x"])
def test_authorization_values(value: str) -> None:
    assert is_authorization_value(value)
    assert value_is_credential("X-Anything", value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://reader:s3cret@db.internal:5432/analytics",
        "https://api.example.com/v1?api_key=abc",
        "https://api.example.com/v1?foo=1&access_token=abc",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX1",
        "https://mcp.zapier.com/api/mcp/s/N2Y4ZTk3NjEtMmFhZi00MjRhLWE2Mj/mcp",
    ],
)
def test_credentialed_urls(url: str) -> None:
    assert is_credentialed_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/services/abcdefghijklmnopqrstuvwx",  # 24 letters
        "https://hooks.example.com/services/ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef",
        "https://hooks.example.com/services/123456789012345678901234",  # 24 digits
        "https://docs.example.com/documentationandreferencesguide",
    ],
)
def test_a_long_run_of_letters_or_of_digits_alone_is_an_opaque_segment(url: str) -> None:
    # Seed 000: "an opaque path segment of 24 or more letters and digits"; a mix is not required.
    assert is_credentialed_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.github.com/repos/acme/widgets",
        "postgresql://reader@db.internal:5432/analytics",
        "https://example.com/hooks/abcdefghijklmnopqrstuvw",  # 23 letters: one short of opaque
        "https://example.com/hooks/12345678901234567890123",  # 23 digits
        "https://example.com/agents/customer-support-assistant-v2/mcp",  # a readable slug
        "https://example.com/?page=2",
        "not a url",
    ],
)
def test_plain_urls(url: str) -> None:
    assert not is_credentialed_url(url)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--api-key=abc"], [ArgFinding(0, "--api-key=")]),
        (["--token", "abc", "--verbose"], [ArgFinding(1, "")]),
        (["-y", "server", "postgresql://u:p@h/db"], [ArgFinding(2, "")]),
        (["TOKEN=abc"], [ArgFinding(0, "TOKEN=")]),
        (["--header", "Authorization: Bearer abc"], [ArgFinding(1, "Authorization: Bearer ")]),
        (["X-Api-Key: abc"], [ArgFinding(0, "X-Api-Key: ")]),
        (["--port", "8080", "--region=eu"], []),
        (["--token"], []),  # a flag with no value has nothing to hide
        (["short-positional-abc123"], []),  # heuristic: an unnamed short token is exported as written
        (["--connection-string=postgresql://app:pw@db/app"], [ArgFinding(0, "--connection-string=")]),
        (["DATABASE_URL=postgres://app:pw@db/app"], [ArgFinding(0, "DATABASE_URL=")]),
        (["--header=Authorization: Bearer abc"], [ArgFinding(0, "--header=Authorization: Bearer ")]),
        (["PGPASSWORD=hunter2"], [ArgFinding(0, "PGPASSWORD=")]),
        (["--authtoken", "tok_abc"], [ArgFinding(1, "")]),
        (["--url=https://example.com/mcp"], []),
    ],
)
def test_screen_args(args: list[str], expected: list[ArgFinding]) -> None:
    assert screen_args(args) == expected
