"""Bundle documents for tests: the header every document carries, and the sections a test gives."""

from __future__ import annotations

from typing import Any


def bundle_document(
    name: str, *, version: str | None = "1.0.0", schema_version: str = "0.1.0", **sections: Any
) -> dict[str, Any]:
    """A bundle document as a dict: schema version, name and version (None leaves it out), then
    ``sections`` in the order given."""
    header = {"schema_version": schema_version, "name": name}
    return header | ({"version": version} if version is not None else {}) | sections


# A secret setup field named token, and a command MCP that gets it in its environment.
TOKEN_SETUP: list[dict[str, Any]] = [{"key": "token", "label": "Token", "type": "secret"}]


def github_mcp(key: str = "gh") -> dict[str, Any]:
    """A command MCP (npx) whose GITHUB_TOKEN is the setup field ``token``."""
    return {
        "key": key,
        "name": "GitHub",
        "type": "command",
        "command": "npx",
        "args": ["-y", "gh-mcp"],
        "env": {"GITHUB_TOKEN": "${setup.token}"},
    }
