"""The views of one gateway bundle computed from its members, their offers and the curation.

Tools, prompts and resources in member order, each with its presented name, whether it is stale,
shadowed or served. The routes, the MCP endpoint and discovery's collision log read them here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bundle_operator.document.names import mcp_tool_name_problem
from bundle_operator.platform import kinds
from bundle_operator.platform.models import member_resource_id
from bundle_operator.reference_platform import gateway_rules as rules
from bundle_operator.reference_platform.mcp_rules import instance_url
from bundle_operator.reference_platform.member_offer import Offer, member_offer
from bundle_operator.reference_platform.problems import conflict
from bundle_operator.reference_platform.storage import Row, Tx


def members_in_order(tx: Tx, bundle: Row) -> list[Row]:
    return sorted(tx.entries(bundle.id, rules.MEMBER), key=lambda m: m.data["position"])


def positions(tx: Tx, bundle: Row) -> dict[str, int]:
    return {m.key: int(m.data["position"]) for m in members_in_order(tx, bundle)}


def offer_of(tx: Tx, ws: str, member: Row) -> Offer:
    return member_offer(tx, ws, str(member.data["mcp_instance_id"]))


def member_view(tx: Tx, ws: str, member: Row, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A member with its health; ``tools`` are the bundle's tool views, when already at hand."""
    instance = tx.get(ws, kinds.MCP_INSTANCES.path, member.data["mcp_instance_id"])
    offer = offer_of(tx, ws, member)
    if tools is None:
        bundle = tx.get(ws, kinds.GATEWAY_BUNDLES.path, member.parent or "")
        tools = tool_views(tx, ws, bundle) if bundle is not None else []
    unnamed = [v["tool"] for v in tools if v["member"] == member.key and name_problem(v) and not v["stale"]]
    notes = [offer.message] if offer.message else []
    if unnamed:
        shown = ", ".join(repr(name) for name in unnamed[:5]) + (
            f" and {len(unnamed) - 5} more" if len(unnamed) > 5 else ""
        )
        notes.append(
            f"{len(unnamed)} tool(s) cannot be presented as {member.key}{rules.SEPARATOR}<tool>, which "
            f"would not be an MCP tool name: {shown}; give each an override_name to serve it"
        )
    return {
        "name": member.key,
        "mcp_instance_id": member.data["mcp_instance_id"],
        "enabled": member.data["enabled"],
        "position": member.data["position"],
        "url": instance_url(tx, ws, instance) if instance else None,
        "healthy": offer.healthy,
        "message": "; ".join(notes),
    }


def name_problem(view: dict[str, Any]) -> str | None:
    """Why a tool view's presented name is not an MCP tool name, or None.

    An override is always one; a member's own name may not be, or may be too long once prefixed:
    such a tool is listed (seed 002 presents every tool) and served only under an override.
    """
    if view["override_name"]:
        return None
    problem = mcp_tool_name_problem(view["id"])
    return f"'{view['id']}' {problem}" if problem else None


def withheld_reason(view: dict[str, Any]) -> str | None:
    """Why a tool view is not served, as a sentence that follows "the tool 'name'"; None if served."""
    if not view["enabled"]:
        return "is disabled in this bundle"
    if not view["member_enabled"]:
        return f"belongs to the member '{view['member']}', which is disabled in this bundle"
    if view["stale"]:
        return f"is not offered by the member '{view['member']}' now"
    if view["shadowed_by"] is not None:
        return (
            f"is shadowed by {view['shadowed_by']}, whose override_name holds its name; clear or change "
            "that override to serve it"
        )
    problem = name_problem(view)
    if problem is not None:
        return f"cannot be presented under its own name: {problem}; give it an override_name to serve it"
    return None


def tool_views(tx: Tx, ws: str, bundle: Row) -> list[dict[str, Any]]:
    """Every tool of every member in member order, then curated tools no member offers now."""
    curated = {row.name: row.data for row in tx.entries(bundle.id, rules.TOOL)}
    views: list[dict[str, Any]] = []
    for member in members_in_order(tx, bundle):
        offer = offer_of(tx, ws, member)
        offered = {tool["name"]: tool for tool in offer.tools}
        stale = [
            c["tool"] for c in curated.values() if c["member"] == member.key and c["tool"] not in offered
        ]
        for tool in [*offered, *stale]:
            tool_id = f"{member.key}{rules.SEPARATOR}{tool}"
            curation = curated.get(tool_id, {})
            override = curation.get("override_name")
            views.append(
                {
                    "id": tool_id,
                    "member": member.key,
                    "tool": tool,
                    "presented_name": override or tool_id,
                    "enabled": curation.get("enabled", True),
                    "member_enabled": member.data["enabled"],
                    "override_name": override,
                    "override_title": curation.get("override_title"),
                    "override_description": curation.get("override_description"),
                    "override_annotations": curation.get("override_annotations"),
                    "definition": offered.get(tool),
                    "stale": tool not in offered or not offer.fresh,
                    "shadowed_by": None,
                }
            )
    # Seed 002: discovery cannot be refused, so when an upstream adds a tool whose prefixed name
    # an override already holds, the override keeps the name and the new tool is not served.
    held = {v["override_name"]: v["id"] for v in views if v["override_name"]}
    for view in views:
        holder = held.get(view["id"])
        if view["override_name"] is None and holder is not None and holder != view["id"]:
            view["shadowed_by"] = holder
    for view in views:
        view["withheld_reason"] = withheld_reason(view)
        view["served"] = view["withheld_reason"] is None
    return views


def shadowed(tx: Tx, ws: str, bundle: Row) -> set[tuple[str, str]]:
    """(member, tool) of the tools an override keeps from being served, as the bundle stands."""
    return {(v["member"], v["tool"]) for v in tool_views(tx, ws, bundle) if v["shadowed_by"]}


def check_presented_names(
    tx: Tx,
    ws: str,
    bundle: Row,
    changed: Callable[[dict[str, Any]], bool],
    already_shadowed: set[tuple[str, str]],
) -> None:
    """409 when a changed tool's presented name is also presented by another tool of the bundle.

    Tools that discovery had already put under an override's name (``already_shadowed``) are left
    out: they are not served, and saving the override holder or their member again must work.
    """
    views = [
        v
        for v in tool_views(tx, ws, bundle)
        if not (v["shadowed_by"] and (v["member"], v["tool"]) in already_shadowed)
    ]
    for view in views:
        if not changed(view):
            continue
        mine = (view["member"], view["tool"])
        for other in views:
            if (other["member"], other["tool"]) != mine and other["presented_name"] == view["presented_name"]:
                # An override holds its name against a tool that was about to take it.
                holder = view["shadowed_by"] or other["id"]
                field = "override_name" if view["override_name"] else "member"
                raise conflict(
                    "presented_name_taken",
                    f"the presented name '{view['presented_name']}' is held by the tool {holder}",
                    holders=[holder],
                    field=field,
                )


def entry_views(tx: Tx, ws: str, bundle: Row, what: str, curated_kind: str) -> list[dict[str, Any]]:
    curated = {row.name: row.data for row in tx.entries(bundle.id, curated_kind)}
    views: list[dict[str, Any]] = []
    key = "name" if what == "prompts" else "uri"
    for member in members_in_order(tx, bundle):
        offer = offer_of(tx, ws, member)
        offered = {entry[key]: entry for entry in offer.entries(what)}
        stale = [c[key] for c in curated.values() if c["member"] == member.key and c[key] not in offered]
        for entry in [*offered, *stale]:
            if what == "prompts":
                entry_id = f"{member.key}{rules.SEPARATOR}{entry}"
            else:
                entry_id = member_resource_id(member.key, entry)
            curation = curated.get(entry_id, {})
            view = {
                "id": entry_id,
                "member": member.key,
                key: entry,
                "enabled": curation.get("enabled", True),
                "title": curation.get("title"),
                "description": curation.get("description"),
                "definition": offered.get(entry),
                "stale": entry not in offered or not offer.fresh,
            }
            if what == "prompts":
                view["presented_name"] = entry_id
            views.append(view)
    return views
