"""Apps: small UIs the platform serves, each a JSON document kept in numbered versions.

An app shows its latest unarchived version. Archiving the app is how an uninstall removes it
(running instances keep working); deleting it removes it and its versions for good.
"""

from __future__ import annotations

from typing import Any

from bundle_operator.platform import kinds
from bundle_operator.platform.models import AppCreate, AppUpdate
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored, merge_changes, require_ref
from bundle_operator.reference_platform.problems import refused
from bundle_operator.reference_platform.storage import Row, Tx, new_id

# The kind of the entries stored under an app (``name`` is the version number), and its prefix.
VERSION = "app-versions"
VERSION_PREFIX = "apv"
MAX_VERSIONS = 1000


def versions_of(tx: Tx, app_id: str) -> list[Row]:
    """An app's versions, oldest first (creation order is version order)."""
    return tx.entries(app_id, VERSION)


def version_view(row: Row) -> dict[str, Any]:
    """A version as the API shows it."""
    return {
        "version": row.data["version"],
        "document": row.data["document"],
        "archived": row.data["archived"],
        "created_at": row.created_at,
    }


def add_version(tx: Tx, workspace: str, app_id: str, document: dict[str, Any]) -> Row:
    """Store ``document`` as the app's next version; numbers are never reused."""
    versions = versions_of(tx, app_id)
    if len(versions) >= MAX_VERSIONS:
        raise refused("document", f"an app keeps at most {MAX_VERSIONS} versions", code="limit_exceeded")
    number = max((int(v.data["version"]) for v in versions), default=0) + 1
    data = {"version": number, "document": document, "archived": False}
    return tx.insert(workspace, VERSION, new_id(VERSION_PREFIX), data, name=str(number), parent=app_id)


def app_view(tx: Tx, row: Row) -> dict[str, Any]:
    """An app as the API shows it, with its latest unarchived version's number and document."""
    live = [v for v in versions_of(tx, row.id) if not v.data["archived"]]
    latest = live[-1] if live else None
    return row.public() | {
        "latest_version": latest.data["version"] if latest else None,
        "document": latest.data["document"] if latest else None,
    }


class AppRules(KindRules):
    """Apps: their MCP instances must exist (and are held by them, as by agents)."""

    kind = kinds.APPS

    def _check(self, tx: Tx, workspace: str, data: dict[str, Any]) -> None:
        for i, ref in enumerate(data["mcp_instance_ids"]):
            require_ref(tx, workspace, kinds.MCP_INSTANCES.path, ref, f"mcp_instance_ids.{i}", "MCP instance")

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, AppCreate)
        dumped = prepared.model_dump(mode="json")
        data = {
            "name": dumped["name"],
            "description": dumped["description"],
            "mcp_instance_ids": dumped["mcp_instance_ids"],
            "archived": False,
        }
        self._check(tx, workspace, data)
        add_version(tx, workspace, entity_id, dumped["document"])
        return data, data["name"]

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, AppUpdate)
        data = merge_changes(row, prepared, ("name", "archived"))
        # As for an agent, null clears the description and the instance list.
        data["description"] = data["description"] or ""
        data["mcp_instance_ids"] = data["mcp_instance_ids"] or []
        self._check(tx, workspace, data)
        return data, data["name"]

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        return app_view(tx, row)
