"""Builders for bundle documents and helpers to look issues up in results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from bundle_operator.document import parse_bundle_data, parse_bundle_text
from bundle_operator.document.issues import Issue
from bundle_operator.engine.analyze import analyze_offline
from bundle_operator.engine.preview import Preview
from tests.documents import bundle_document

GOOD_SECRET = "s" * 40

BASE: dict[str, Any] = bundle_document(
    "triage-kit",
    setup=[
        {"key": "github_token", "label": "GitHub token", "type": "secret"},
        {"key": "bot_token", "label": "Bot token", "type": "secret"},
    ],
    mcps=[
        {
            "key": "github",
            "name": "GitHub",
            "type": "command",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${setup.github_token}"},
        }
    ],
    skills=[
        {
            "key": "triage",
            "source_type": "inline",
            "content": "---\nname: triage\ndescription: Label issues\n---\n# Triage\n",
        }
    ],
    agents=[{"key": "bot", "name": "Triage Bot", "mcps": ["github"], "skills": ["triage"]}],
    channels=[{"key": "chat", "type": "telegram", "agent": "bot", "bot_token": "${setup.bot_token}"}],
    automations=[
        {"key": "daily", "type": "cron", "agent": "bot", "schedule": "0 8 * * 1-5", "message": "Digest"}
    ],
    policies=[{"key": "cap", "type": "spend_cap", "agent": "bot", "config": {"limit_usd": 50}}],
)
BASE_SETUP = {"github_token": "ghp_" + "x" * 36, "bot_token": "123:abc"}


def analyze(document: Mapping[str, Any] | str, setup: Mapping[str, object] | None = None) -> Preview:
    """Parse (dict documents via YAML text, so lines are known) and analyze offline."""
    text = document if isinstance(document, str) else yaml.safe_dump(dict(document), sort_keys=False)
    return analyze_offline(parse_bundle_text(text), BASE_SETUP if setup is None else setup)


def analyze_data(document: Mapping[str, Any], setup: Mapping[str, object] | None = None) -> Preview:
    """Analyze already-loaded data (no source lines)."""
    return analyze_offline(parse_bundle_data(dict(document)), BASE_SETUP if setup is None else setup)


def issues_with(preview: Preview, code: str) -> list[Issue]:
    """The issues of one code."""
    return [issue for issue in preview.issues if issue.code == code]


def only_issue(preview: Preview, code: str) -> Issue:
    """The single issue of a code; fails when there is none or several."""
    found = issues_with(preview, code)
    assert len(found) == 1, f"expected one {code}, got {[i.to_json() for i in preview.issues]}"
    return found[0]


def action_of(preview: Preview, entity: str) -> tuple[str, str | None]:
    """The action and reason of ``kind:key``."""
    for plan in preview.entities:
        if plan.entity == entity:
            return plan.action, plan.reason
    raise AssertionError(f"{entity} not in {[p.entity for p in preview.entities]}")
