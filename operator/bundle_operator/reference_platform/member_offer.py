"""What a gateway member offers now: its server's declared catalog, or what discovery last stored.

Reading an offer needs only the store, so the gateway's views read it here without reaching
into the watchers that keep discovery fresh (discovery.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bundle_operator.platform import kinds
from bundle_operator.reference_platform.member_link import member_link, server_of
from bundle_operator.reference_platform.storage import Tx

# Where discovery keeps the latest listing of an MCP instance: entry kind and key.
DISCOVERY = "mcp-discovery"
LATEST = "latest"


@dataclass(frozen=True)
class Offer:
    """What a member offers the gateway now, and whether it is healthy."""

    tools: list[dict[str, Any]]
    prompts: list[dict[str, Any]]
    resources: list[dict[str, Any]]
    healthy: bool
    message: str
    # False when the entries are what an earlier discovery found: the member fails now.
    fresh: bool = True
    declared: bool = False
    # Resource templates found by discovery (a declared catalog has none).
    templates: list[dict[str, Any]] = field(default_factory=list)

    def entries(self, what: str) -> list[dict[str, Any]]:
        """The tools, prompts or resources."""
        entries: list[dict[str, Any]] = getattr(self, what)
        return entries


def declared_catalog(server_data: dict[str, Any]) -> dict[str, Any] | None:
    """The catalog a server spec declares, or None when it declares none (it is discovered)."""
    catalog = server_data.get("catalog") or {}
    if any(catalog.get(what) for what in ("tools", "prompts", "resources")):
        return {what: list(catalog.get(what) or []) for what in ("tools", "prompts", "resources")}
    return None


def member_offer(tx: Tx, workspace: str, instance_id: str) -> Offer:
    """The offer of the MCP instance behind a member, from its declared catalog or discovery."""
    instance = tx.get(workspace, kinds.MCP_INSTANCES.path, instance_id)
    if instance is None:
        return Offer([], [], [], False, "the MCP instance no longer exists")
    server = server_of(tx, workspace, instance)
    if server is None:
        return Offer([], [], [], False, "the MCP server spec no longer exists")
    declared = declared_catalog(server.data)
    if declared is not None:
        return Offer(declared["tools"], declared["prompts"], declared["resources"], True, "", declared=True)
    if member_link(tx, workspace, instance) is None:
        return Offer(
            [], [], [], False, "only url members can be discovered; the gateway cannot start this server"
        )
    found = tx.entry(instance.id, DISCOVERY, LATEST)
    if found is None:
        return Offer([], [], [], False, "discovery has not reached the member yet", fresh=False)
    data = found.data
    return Offer(
        data.get("tools", []),
        data.get("prompts", []),
        data.get("resources", []),
        bool(data["ok"]),
        str(data.get("message", "")),
        fresh=bool(data["ok"]),
        templates=data.get("templates", []),
    )
