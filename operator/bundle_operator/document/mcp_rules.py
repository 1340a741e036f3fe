"""Rules for MCPs and channel credentials that need no platform: runtimes, context secrets, tokens."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bundle_operator.document import placeholders
from bundle_operator.document.issues import Code, Issue, blocking, warning
from bundle_operator.document.models import Bundle, CommandMcp, UrlMcp
from bundle_operator.document.pointer import join_pointer
from bundle_operator.document.runtimes import (
    plugin_root_argument,
    plugin_root_argument_reason,
    unsupported_runtime_reason,
)
from bundle_operator.document.urls import url_problem

# A Telegram bot token: the bot's numeric id, a colon, and the key.
TELEGRAM_TOKEN = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{1,200}\Z")
CONTEXT_SECRET_MIN = 32
CONTEXT_SECRET_MAX = 512


@dataclass
class McpFindings:
    """Issues, and the MCPs that will be skipped with the reason why."""

    issues: list[Issue] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def check_mcps(bundle: Bundle) -> McpFindings:
    """Runtimes, context secret references and literal endpoint URLs, without setup values."""
    findings = McpFindings()
    secret_fields = {f.key for f in bundle.setup if f.type == "secret"}
    declared = {f.key for f in bundle.setup}
    for index, mcp in enumerate(bundle.mcps):
        base = join_pointer("/mcps", index)
        entity = f"mcp:{mcp.key}"
        if isinstance(mcp, CommandMcp) and mcp.artifact is None:
            reason = unsupported_runtime_reason(mcp.command)
            pointer = join_pointer(base, "command")
            argument = plugin_root_argument(mcp.args)
            if reason is None and argument is not None:
                reason = plugin_root_argument_reason()
                pointer = join_pointer(base, "args", argument)
            if reason is not None:
                findings.skipped[entity] = reason
                findings.issues.append(
                    warning(
                        Code.UNSUPPORTED_RUNTIME,
                        f"MCP '{mcp.key}' will be skipped: {reason}",
                        pointer,
                        entity,
                    )
                )
        if isinstance(mcp, UrlMcp) and not placeholders.references(mcp.endpoint_url):
            problem = url_problem(mcp.endpoint_url)
            if problem is not None:
                findings.issues.append(
                    blocking(
                        Code.INVALID_URL,
                        f"endpoint_url of MCP '{mcp.key}' is not an http(s) URL: {problem}",
                        join_pointer(base, "endpoint_url"),
                        entity,
                    )
                )
        if mcp.context_secret is not None:
            findings.issues.extend(
                _context_secret(
                    mcp.context_secret,
                    isinstance(mcp, UrlMcp),
                    mcp.key,
                    base,
                    entity,
                    secret_fields,
                    declared,
                )
            )
    return findings


def _context_secret(
    value: str,
    on_url_mcp: bool,
    key: str,
    base: str,
    entity: str,
    secret_fields: set[str],
    declared: set[str],
) -> list[Issue]:
    pointer = join_pointer(base, "context_secret")
    ref = placeholders.whole_reference(value)
    if ref is None:
        return [
            blocking(
                Code.CONTEXT_SECRET_LITERAL,
                f"context_secret of MCP '{key}' must be a ${{setup.<key>}} reference to a secret setup "
                "field; a literal value is never accepted",
                pointer,
                entity,
            )
        ]
    issues: list[Issue] = []
    if not on_url_mcp:
        issues.append(
            blocking(
                Code.CONTEXT_SECRET_NOT_URL_MCP,
                f"context_secret is only for url MCPs; MCP '{key}' is not one",
                pointer,
                entity,
            )
        )
    subject = f"context_secret of MCP '{key}'"
    code = Code.CONTEXT_SECRET_NOT_SECRET_FIELD
    return issues + _not_secret(code, subject, ref, declared - secret_fields, pointer, entity)


def _not_secret(
    code: Code, subject: str, ref: str, not_secret: set[str], pointer: str, entity: str
) -> list[Issue]:
    """The issue when a credential's placeholder names a declared setup field not of type secret."""
    if ref not in not_secret:
        return []
    message = f"{subject} refers to setup field '{ref}', which is not of type secret"
    return [blocking(code, message, pointer, entity)]


def check_context_secret_values(bundle: Bundle, values: dict[str, str]) -> list[Issue]:
    """A supplied context secret must be 32 to 512 characters long."""
    issues: list[Issue] = []
    for index, mcp in enumerate(bundle.mcps):
        if mcp.context_secret is None:
            continue
        ref = placeholders.whole_reference(mcp.context_secret)
        if ref is None or ref not in values:
            continue
        length = len(values[ref])
        if not CONTEXT_SECRET_MIN <= length <= CONTEXT_SECRET_MAX:
            issues.append(
                blocking(
                    Code.CONTEXT_SECRET_LENGTH,
                    f"the value of setup field '{ref}' (context_secret of MCP '{mcp.key}') is {length} "
                    f"characters; it must be {CONTEXT_SECRET_MIN} to {CONTEXT_SECRET_MAX}",
                    join_pointer("/mcps", index, "context_secret"),
                    f"mcp:{mcp.key}",
                )
            )
    return issues


def check_endpoint_values(bundle: Bundle, values: dict[str, str]) -> list[Issue]:
    """An endpoint_url built from setup values must still be an http(s) URL."""
    issues: list[Issue] = []
    for index, mcp in enumerate(bundle.mcps):
        if not isinstance(mcp, UrlMcp) or not placeholders.references(mcp.endpoint_url):
            continue
        refs = [r.strip() for r in placeholders.references(mcp.endpoint_url)]
        if not all(r in values for r in refs):
            continue
        problem = url_problem(placeholders.substitute(mcp.endpoint_url, lambda k: values.get(k, "")))
        if problem is not None:
            issues.append(
                blocking(
                    Code.INVALID_URL,
                    f"endpoint_url of MCP '{mcp.key}', with setup values filled in, is not an http(s) "
                    f"URL: {problem}",
                    join_pointer("/mcps", index, "endpoint_url"),
                    f"mcp:{mcp.key}",
                )
            )
    return issues


def check_channel_tokens(bundle: Bundle) -> list[Issue]:
    """A bot token is a credential: it must come from a secret setup field, never the document."""
    not_secret = {f.key for f in bundle.setup} - {f.key for f in bundle.setup if f.type == "secret"}
    issues: list[Issue] = []
    for index, channel in enumerate(bundle.channels):
        pointer = join_pointer("/channels", index, "bot_token")
        entity = f"channel:{channel.key}"
        ref = placeholders.whole_reference(channel.bot_token)
        if ref is None:
            issues.append(
                blocking(
                    Code.CREDENTIAL_LITERAL,
                    f"bot_token of channel '{channel.key}' must be a ${{setup.<key>}} reference to a secret "
                    "setup field; credentials never travel in the document",
                    pointer,
                    entity,
                )
            )
        else:
            subject = f"bot_token of channel '{channel.key}'"
            issues += _not_secret(Code.CREDENTIAL_NOT_SECRET_FIELD, subject, ref, not_secret, pointer, entity)
    return issues


def check_channel_token_values(bundle: Bundle, values: dict[str, str]) -> list[Issue]:
    """A supplied bot token must look like a Telegram bot token (the platform refuses others)."""
    issues: list[Issue] = []
    for index, channel in enumerate(bundle.channels):
        ref = placeholders.whole_reference(channel.bot_token)
        if ref is None or ref not in values or TELEGRAM_TOKEN.match(values[ref]):
            continue
        issues.append(
            blocking(
                Code.INVALID_SETUP_VALUE,
                f"the value of setup field '{ref}' (bot_token of channel '{channel.key}') is not a "
                "Telegram bot token: digits, ':' and the key",
                join_pointer("/channels", index, "bot_token"),
                f"channel:{channel.key}",
            )
        )
    return issues
