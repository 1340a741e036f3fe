"""The fleet bench/scale.py and the chaos runs apply: Bundles of 12 entities, each installed into every
workspace."""

from __future__ import annotations

from typing import Any

NAMESPACE = "fleet"
CREDENTIALS = "fleet-credentials"


def bundle_document(name: str) -> dict[str, Any]:
    """12 entities: 2 URL MCPs, 3 inline skills, 2 agents, 1 channel, 2 automations, 2 policies.

    Every name the platform shows carries the bundle's name, so bundles never collide in a
    workspace; nothing needs a live peer at install time.
    """
    skills = [
        {
            "key": key,
            "source_type": "inline",
            "content": f"---\nname: {name}-{key}\ndescription: {text}\n---\n# {text}\n\n{body}\n",
        }
        for key, text, body in (
            ("triage", "Label an issue", "Pick one of bug, feature or question; add an area label."),
            ("digest", "Summarize the day", "Group new issues by label; list unlabeled ones first."),
            ("reply", "Answer a maintainer", "Be brief, link issues by number, never close one."),
        )
    ]
    return {
        "schema_version": "0.1.0",
        "name": name,
        "version": "1.0.0",
        "description": f"Fleet benchmark bundle {name}.",
        "setup": [{"key": "telegram_bot_token", "label": "Telegram bot token", "type": "secret"}],
        "mcps": [
            {
                "key": "issues",
                "name": f"{name} issues",
                "type": "url",
                "endpoint_url": "https://mcp.example.com/issues",
            },
            {
                "key": "docs",
                "name": f"{name} docs",
                "type": "url",
                "endpoint_url": "https://mcp.example.com/docs",
            },
        ],
        "skills": skills,
        "agents": [
            {
                "key": "triage_bot",
                "name": f"{name} triage bot",
                "description": "Labels new issues.",
                "model": "gpt-5",
                "instructions": "Triage every new issue with the triage skill.",
                "mcps": ["issues", "docs"],
                "skills": ["triage", "reply"],
            },
            {
                "key": "digest_bot",
                "name": f"{name} digest bot",
                "description": "Posts the morning digest.",
                "model": "gpt-5",
                "instructions": "Summarize what happened since yesterday.",
                "mcps": ["issues"],
                "skills": ["digest"],
            },
        ],
        "channels": [
            {
                "key": "maintainers",
                "type": "telegram",
                "agent": "triage_bot",
                "bot_token": "${setup.telegram_bot_token}",
                "enabled": True,
            }
        ],
        "automations": [
            {
                "key": "morning_digest",
                "type": "cron",
                "agent": "digest_bot",
                "schedule": "0 8 * * 1-5",
                "timezone": "Europe/Berlin",
                "message": "Summarize the issues opened since yesterday.",
                "enabled": True,
            },
            {
                "key": "weekly_sweep",
                "type": "cron",
                "agent": "triage_bot",
                "schedule": "0 9 * * 1",
                "timezone": "Europe/Berlin",
                "message": "List issues without a label.",
                "enabled": True,
            },
        ],
        "policies": [
            {
                "key": "spend_cap",
                "type": "spend_cap",
                "agent": "triage_bot",
                "config": {"period": "month", "limit_usd": 50},
            },
            {
                "key": "answer_check",
                "type": "answer_check",
                "agent": "digest_bot",
                "config": {"criteria": "Every issue is linked by number.", "max_retries": 1},
            },
        ],
    }


def workspace_names(count: int) -> list[str]:
    return [f"fleet-ws-{w}" for w in range(count)]


def fleet(
    count: int, workspaces: list[str], interval: str, namespace: str = NAMESPACE
) -> tuple[list[dict[str, Any]], list[str]]:
    """The Bundles, then every installation (bundle x workspace), and the installations' names."""
    bundles = [f"fleet-{b:03d}" for b in range(count // len(workspaces))]
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "bundle-operator.dev/v1alpha1",
            "kind": "Bundle",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"inline": bundle_document(name)}},
        }
        for name in bundles
    ]
    names: list[str] = []
    for w, ws in enumerate(workspaces):
        for name in bundles:
            names.append(f"{name}-w{w}")
            objects.append(
                {
                    "apiVersion": "bundle-operator.dev/v1alpha1",
                    "kind": "BundleInstallation",
                    "metadata": {"name": names[-1], "namespace": namespace},
                    "spec": {
                        "bundleRef": {"name": name},
                        "workspace": ws,
                        "setup": [
                            {
                                "key": "telegram_bot_token",
                                "secretKeyRef": {"name": CREDENTIALS, "key": "telegram_bot_token"},
                            }
                        ],
                        "activate": False,
                        "driftPolicy": {"interval": interval, "mode": "Warn"},
                    },
                }
            )
    return objects, names
