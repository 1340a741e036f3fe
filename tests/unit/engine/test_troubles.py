"""What an installation reports of the MCP servers the platform cannot run (DESIGN.md §9.7)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bundle_operator.engine.drift import troubles
from bundle_operator.engine.record import Part, Record, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.k8s.installation.status import not_running_message
from bundle_operator.platform import kinds
from bundle_operator.platform.models import McpInstance

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _instance(health: dict[str, Any] | None) -> McpInstance:
    return McpInstance(
        id="mci_1",
        revision=1,
        created_at=NOW,
        updated_at=NOW,
        server_id="mcs_1",
        name="Echo",
        env={},
        headers={},
        args=None,
        endpoint_url=None,
        context_secret_id=None,
        context_signing=False,
        health=None if health is None else {**health, "checked_at": NOW},
    )


def _found(health: dict[str, Any] | None) -> dict[str, str]:
    record = Record(installation="ns/echo", workspace="w")
    record.entities.append(
        RecordedEntity(
            kind="mcp", key="echo", parts=[Part(role="primary", path=kinds.MCP_INSTANCES.path, id="mci_1")]
        )
    )
    snapshot = Snapshot(entities={kinds.MCP_INSTANCES.path: {"mci_1": _instance(health)}})
    return troubles(record, snapshot)


@pytest.mark.parametrize("state", ["tree_changed", "crashed", "failed"])
def test_a_server_the_platform_cannot_run_is_named_with_the_platforms_reason(state: str) -> None:
    assert _found({"state": state, "message": "server/index.js changed"}) == {
        "mcp:echo": f"{state}: server/index.js changed"
    }


@pytest.mark.parametrize(
    "health", [None, {"state": "running", "message": ""}, {"state": "idle", "message": ""}]
)
def test_a_running_idle_or_unmanaged_server_is_no_trouble(health: dict[str, Any] | None) -> None:
    assert _found(health) == {}


def test_the_ready_message_names_each_entity_and_escapes_what_the_platform_said() -> None:
    message = not_running_message(
        {"mcp:echo": "tree_changed: file\x1b[2K changed", "mcp:b": "crashed: exit 1"}
    )
    assert message.startswith("installed, but the platform cannot run 2 of them (mcp:b: crashed: exit 1; ")
    assert "mcp:echo: tree_changed: file\\x1b[2K changed" in message
