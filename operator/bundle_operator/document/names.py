"""The platform's name rules, defined once: the platform's API models and rules import them, and
analyze checks a document with the same patterns, so a name that passes analyze is one the
platform accepts (and the other way round).
"""

from __future__ import annotations

import re

# Names inside identifiers a client sees: gateway members, tool overrides, prompts, arguments.
SLUG_PATTERN = r"^[a-zA-Z0-9_-]+$"
SLUG_MAX = 128
# Gateway bundle and endpoint names end up in URLs.
URL_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$"
# Environment variable and header names an MCP server spec declares.
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$"
# A gateway resource name: folders split by '/', no part empty; the platform also refuses '.'
# and '..' parts (a URL would fold them away), which ``resource_name_problem`` checks.
RESOURCE_NAME_PATTERN = r"^[a-zA-Z0-9._-]+(/[a-zA-Z0-9._-]+)*$"
RESOURCE_NAME_MAX = 500
# Display names of stored entities (MCP servers and instances, agents, secrets).
DISPLAY_NAME_MAX = 200
# Separates a gateway member from the names of its tools and prompts.
SEPARATOR = "__"
MEMBER_NAME_MAX = 64
# A tool name as MCP (2025-11-25) defines it; a presented tool name must be one, so clients call it.
MCP_TOOL_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
MCP_TOOL_NAME_MAX = 128
# The longest name of a member's tool, prompt or prompt argument the gateway keeps; MCP sets no
# bound for prompts, and a longer tool name could never be presented under its own name anyway.
MEMBER_ENTRY_NAME_MAX = 500

_SLUG = re.compile(SLUG_PATTERN)
_URL_NAME = re.compile(URL_NAME_PATTERN)
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
_RESOURCE_NAME = re.compile(RESOURCE_NAME_PATTERN)
_MCP_TOOL_NAME = re.compile(MCP_TOOL_NAME_PATTERN)


def _full(pattern: re.Pattern[str], name: str) -> bool:
    # '$' also matches before a final newline; a name never ends in one.
    return "\n" not in name and pattern.match(name) is not None


def slug_problem(name: str) -> str | None:
    """Why ``name`` is not a slug, or None."""
    if not _full(_SLUG, name) or len(name) > SLUG_MAX:
        return f"must match [a-zA-Z0-9_-]+ and be at most {SLUG_MAX} characters"
    return None


def mcp_tool_name_problem(name: str) -> str | None:
    """Why ``name`` is not a tool name MCP allows, or None."""
    if not _full(_MCP_TOOL_NAME, name):
        return f"is not an MCP tool name (1 to {MCP_TOOL_NAME_MAX} letters, digits, '_', '-' and '.')"
    return None


def url_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a gateway bundle or endpoint name, or None."""
    if not _full(_URL_NAME, name):
        return "must start with a letter or digit and hold at most 64 letters, digits, '_' and '-'"
    return None


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an environment variable or header name of a server spec, or None."""
    if not _full(_ENV_NAME, name):
        return "must start with a letter or '_' and hold at most 128 letters, digits, '_' and '-'"
    return None


def member_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a gateway member name, or None: it prefixes presented names, so
    ``member__tool`` must split back one way only."""
    if not _full(_SLUG, name) or len(name) > MEMBER_NAME_MAX:
        return f"must match [a-zA-Z0-9_-]+ and be at most {MEMBER_NAME_MAX} characters"
    if SEPARATOR in name:
        return "must not contain '__', which separates the member from the tool"
    if name.startswith("_") or name.endswith("_"):
        # 'a_' + '__' + 'x' would read as 'a' + '__' + '_x'.
        return "must not start or end with '_', so that member__tool splits one way only"
    return None


def prompt_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the name of a gateway bundle's own prompt, or None."""
    if SEPARATOR in name:
        return "must not contain '__', which marks a member's prompts"
    return slug_problem(name)


def resource_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a gateway resource name, or None."""
    if not name or len(name) > RESOURCE_NAME_MAX:
        return f"must be 1 to {RESOURCE_NAME_MAX} characters"
    if not _full(_RESOURCE_NAME, name):
        return "must be parts of letters, digits, '.', '_' and '-' joined by '/', none of them empty"
    if any(part in (".", "..") for part in name.split("/")):
        return "must not have '.' or '..' parts"
    return None


def display_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the name of a stored entity, or None."""
    if not 1 <= len(name) <= DISPLAY_NAME_MAX:
        return f"must be 1 to {DISPLAY_NAME_MAX} characters"
    return None
