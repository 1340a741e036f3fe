"""The gateway bundle: texts, ordered members, curation of the members' tools, prompts and
resources, and the bundle's own prompts and resources. Its contents are read and written entry by
entry (each only where it differs), keyed by id so that a three-way merge works entry by entry."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from bundle_operator.document.gateway_rules import GATEWAY_ENTITY
from bundle_operator.document.issues import Code, Issue, warning
from bundle_operator.document.models import Bundle
from bundle_operator.document.pointer import join_pointer
from bundle_operator.engine.desired import Desired, Inputs, resolve
from bundle_operator.engine.export_report import ExportOut
from bundle_operator.engine.kinds.base import EntityKind, Holds, UniqueName, Write
from bundle_operator.engine.record import Part, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    Entity,
    GatewayBundle,
    GatewayBundleCreate,
    GatewayBundleUpdate,
    GatewayEntryCuration,
    GatewayMemberPut,
    GatewayPromptPut,
    GatewayResourcePut,
    GatewayToolCuration,
    member_resource_id,
    parse_member_resource_id,
)
from bundle_operator.platform.protocol import PlatformAPI

_DEFAULT_CURATION = {"enabled": True, "title": None, "description": None}
_DEFAULT_TOOL_CURATION = {
    "enabled": True,
    "override_name": None,
    "override_title": None,
    "override_description": None,
    "override_annotations": None,
}
_EMPTY: dict[str, Any] = {
    "members": [],
    "tools": {},
    "member_prompts": {},
    "member_resources": {},
    "prompts": {},
    "resources": {},
}


def gateway_name(bundle_name: str) -> str:
    """The gateway bundle's name on the platform: the bundle name in the URL-safe alphabet."""
    return bundle_name.replace(".", "-")[:64]


def _curation(entry: Any) -> dict[str, Any]:
    return {"enabled": entry.enabled, "title": entry.title, "description": entry.description}


def _tool_curation(entry: Any) -> dict[str, Any]:
    return {
        "enabled": entry.enabled,
        "override_name": entry.override_name,
        "override_title": entry.override_title,
        "override_description": entry.override_description,
        "override_annotations": entry.override_annotations,
    }


class GatewayKind(EntityKind):
    """The one gateway bundle of a bundle document (key ``gateway``)."""

    name = "gateway"
    section = "gateway"
    collection = kinds.GATEWAY_BUNDLES
    reads = (kinds.GATEWAY_BUNDLES, kinds.ENDPOINTS)
    contents_reads = 6

    def items(self, inputs: Inputs) -> Sequence[Any]:
        return [] if inputs.bundle.gateway is None else [inputs.bundle.gateway]

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        gateway = item
        members = [m for m in gateway.members if f"mcp:{m}" not in skipped]
        spec: dict[str, Any] = {
            "bundle": {
                "name": gateway_name(inputs.bundle.name),
                "description": gateway.description or "",
                "overview": gateway.overview or "",
            },
            "members": [
                {"name": m, "mcp_instance_id": resolve(ids, f"mcp:{m}"), "enabled": True} for m in members
            ],
            "tools": {
                f"{t.member}__{t.tool}": _tool_curation(t) for t in gateway.tools if t.member in members
            },
            "member_prompts": {
                f"{p.member}__{p.name}": _curation(p) for p in gateway.member_prompts if p.member in members
            },
            "member_resources": {
                member_resource_id(r.member, r.uri): _curation(r)
                for r in gateway.member_resources
                if r.member in members
            },
            "prompts": {
                p.name: {
                    "name": p.name,
                    "title": p.title,
                    "description": p.description or "",
                    "arguments": [
                        {"name": a.name, "description": "", "required": a.required, "values": list(a.values)}
                        for a in p.arguments
                    ],
                    "messages": [
                        {"role": m.role, "text": m.text, "resource": m.resource} for m in p.messages
                    ],
                }
                for p in gateway.prompts
            },
            "resources": {
                r.name: {"name": r.name, "title": r.title, "mime_type": r.mime_type, "content": r.content}
                for r in gateway.resources
            },
        }
        return Desired(self.name, "gateway", spec)

    async def read_contents(self, platform: PlatformAPI, workspace: str, found: Entity) -> dict[str, Any]:
        assert isinstance(found, GatewayBundle)
        bid = found.id
        members, tools, member_prompts, member_resources, prompts, resources = await asyncio.gather(
            platform.list_members(workspace, bid),
            platform.list_tools(workspace, bid),
            platform.list_member_prompts(workspace, bid),
            platform.list_member_resources(workspace, bid),
            platform.list_prompts(workspace, bid),
            platform.list_resources(workspace, bid),
        )
        return {
            "bundle": {"name": found.name, "description": found.description, "overview": found.overview},
            "members": [
                {"name": m.name, "mcp_instance_id": m.mcp_instance_id, "enabled": m.enabled}
                for m in sorted(members, key=lambda m: m.position)
            ],
            "tools": {t.id: _tool_curation(t) for t in tools},
            # Not curation, so never drift (live_spec drops it): tool -> the tool whose override
            # holds its name since discovery found it, for the installation's warnings.
            "shadowed": {t.id: t.shadowed_by for t in tools if t.shadowed_by},
            "member_prompts": {p.id: _curation(p) for p in member_prompts},
            "member_resources": {r.id: _curation(r) for r in member_resources},
            "prompts": {
                p.name: {
                    "name": p.name,
                    "title": p.title,
                    "description": p.description,
                    "arguments": [a.model_dump(mode="json") for a in p.arguments],
                    "messages": [m.model_dump(mode="json") for m in p.messages],
                }
                for p in prompts
            },
            "resources": {
                r.name: {"name": r.name, "title": r.title, "mime_type": r.mime_type, "content": r.content}
                for r in resources
            },
        }

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        """The gateway as recorded sees it: curation entries the bundle set, plus any entry someone
        curated on the platform. Entries discovery found and nobody curated are not drift."""
        live = snapshot.contents.get(recorded.entity)
        if live is None:
            return None
        out = dict(live)
        out.pop("shadowed", None)
        for section, default in (
            ("tools", _DEFAULT_TOOL_CURATION),
            ("member_prompts", _DEFAULT_CURATION),
            ("member_resources", _DEFAULT_CURATION),
        ):
            known = recorded.spec.get(section, {})
            out[section] = {k: v for k, v in live[section].items() if k in known or v != default}
        return out

    async def create(self, writer: Writer, desired: Desired) -> list[Part]:
        spec = desired.spec
        bundle = await writer.create(
            desired.entity, "primary", self.collection, GatewayBundleCreate(**spec["bundle"])
        )
        writer.calls += await write_contents(writer.platform, writer.workspace, bundle.id, spec, None)
        return [Part(role="primary", path=self.collection.path, id=bundle.id)]

    async def write(self, writer: Writer, step: Write) -> list[Part]:
        if step.differs("bundle"):
            texts = step.target["bundle"]
            body = GatewayBundleUpdate(description=texts["description"], overview=texts["overview"])
            await writer.update(self.collection, step.primary, body)
        writer.calls += await write_contents(
            writer.platform, writer.workspace, step.primary, step.target, step.current
        )
        return list(step.recorded.parts)

    def unique_name(self, desired: Desired) -> UniqueName | None:
        # A gateway bundle's name is its natural key in the workspace, derived from the bundle's.
        return UniqueName(desired.spec["bundle"]["name"], "gateway bundle", "/name")

    async def holds(self, platform: PlatformAPI, workspace: str, item: Entity) -> Holds:
        members = await platform.list_members(workspace, item.id)
        return Holds({m.mcp_instance_id: f"member {m.name}" for m in members})

    def claim_keys(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        # A member is named by its MCP's key and its tools are presented as <member>__<tool>: the
        # MCP of a member keeps the member's name as its key, so the tools keep their names.
        exported = self._exported(listed, out)
        if exported is None:
            return
        for member in _usable_members(out.contents.get(exported.id, _EMPTY)):
            out.claim(member["mcp_instance_id"], member["name"])

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        """The gateway bundle named after the document (seed 002: names are the natural key);
        any other is reported, as are the endpoints, which a bundle document never carries."""
        path = self.collection.path
        exported = self._exported(listed, out)
        for gateway in listed.get(path, []):
            if gateway is not exported:
                assert isinstance(gateway, GatewayBundle)
                out.drop(
                    f"{path}/{gateway.id}",
                    f"a document holds one gateway bundle, the one named after it "
                    f"('{gateway_name(out.name)}'); export with --name {gateway.name} to write this one",
                )
        if exported is None:
            return
        for endpoint in listed.get(kinds.ENDPOINTS.path, []):
            if getattr(endpoint, "gateway_bundle_id", None) == exported.id:
                out.drop(
                    f"{kinds.ENDPOINTS.path}/{endpoint.id}",
                    "an endpoint: a bundle document carries none; an Endpoint resource makes one",
                )
        out.objects[self.section] = _export_gateway(exported, out.contents.get(exported.id, _EMPTY), out)

    def _exported(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> GatewayBundle | None:
        wanted = gateway_name(out.name)
        for gateway in listed.get(self.collection.path, []):
            if isinstance(gateway, GatewayBundle) and gateway.name == wanted:
                return gateway
        return None


def shadowed_tool_issues(bundle: Bundle, snapshot: Snapshot) -> list[Issue]:
    """A warning for each member tool an override keeps from being served.

    The platform refuses an override that takes a name already presented, but not discovery: a
    tool found after the override took its name stays unserved (seed 002), so say so here.
    """
    contents = snapshot.contents.get(GATEWAY_ENTITY) or {}
    gateway = bundle.gateway
    issues: list[Issue] = []
    for tool_id, holder in sorted((contents.get("shadowed") or {}).items()):
        pointer = None
        for index, tool in enumerate(gateway.tools if gateway is not None else []):
            if f"{tool.member}__{tool.tool}" == holder and tool.override_name:
                pointer = join_pointer("/gateway/tools", index, "override_name")
        message = (
            f"the member tool {tool_id} is not served: the override_name of {holder} holds that name, "
            "and discovery found the tool after the override took it; change or clear the override "
            "to serve both"
        )
        issues.append(warning(Code.GATEWAY_TOOL_SHADOWED, message, pointer, GATEWAY_ENTITY))
    return issues


async def write_contents(
    p: PlatformAPI, ws: str, bundle_id: str, spec: dict[str, Any], live: dict[str, Any] | None
) -> int:
    """Bring a gateway bundle's members, curation, resources and prompts to ``spec``.

    Only what differs from ``live`` is written; resources go before the prompts that embed them
    and are deleted after the prompts that embedded them. Returns how many calls it made.
    """
    old = live or _EMPTY
    calls = await _write_members(p, ws, bundle_id, spec["members"], old["members"])
    for tool_id, curation in spec["tools"].items():
        if old["tools"].get(tool_id) != curation:
            calls += 1
            await p.put_tool(ws, bundle_id, tool_id, GatewayToolCuration(**curation))
    for entry_id, curation in spec["member_prompts"].items():
        if old["member_prompts"].get(entry_id) != curation:
            member, _, name = entry_id.partition("__")
            calls += 1
            await p.put_member_prompt(ws, bundle_id, member, name, GatewayEntryCuration(**curation))
    for entry_id, curation in spec["member_resources"].items():
        parsed = parse_member_resource_id(entry_id)
        if old["member_resources"].get(entry_id) != curation and parsed is not None:
            calls += 1
            await p.put_member_resource(ws, bundle_id, parsed[0], parsed[1], GatewayEntryCuration(**curation))
    for name, resource in spec["resources"].items():
        if old["resources"].get(name) != resource:
            calls += 1
            await p.put_resource(ws, bundle_id, GatewayResourcePut(**resource))
    for name, prompt in spec["prompts"].items():
        if old["prompts"].get(name) != prompt:
            calls += 1
            await p.put_prompt(ws, bundle_id, GatewayPromptPut(**_prompt_body(prompt)))
    for name in old["prompts"]:
        if name not in spec["prompts"]:
            calls += 1
            await p.delete_prompt(ws, bundle_id, name)
    for name in old["resources"]:
        if name not in spec["resources"]:
            calls += 1
            await p.delete_resource(ws, bundle_id, name)
    return calls


async def _write_members(
    p: PlatformAPI, ws: str, bundle_id: str, members: list[dict[str, Any]], before: list[dict[str, Any]]
) -> int:
    """Put the members that differ, delete the ones gone, then order them; returns the calls."""
    calls = 0
    old = {m["name"]: m for m in before}
    for member in members:
        if old.get(member["name"]) != member:
            calls += 1
            body = GatewayMemberPut(mcp_instance_id=member["mcp_instance_id"], enabled=member["enabled"])
            await p.put_member(ws, bundle_id, member["name"], body)
    wanted = [m["name"] for m in members]
    for name in old:
        if name not in wanted:
            calls += 1
            await p.delete_member(ws, bundle_id, name)
    order = [m["name"] for m in before if m["name"] in wanted]
    order += [n for n in wanted if n not in order]
    if wanted and order != wanted:
        calls += 1
        await p.order_members(ws, bundle_id, wanted)
    return calls


def _prompt_body(prompt: dict[str, Any]) -> dict[str, Any]:
    body = dict(prompt)
    body["messages"] = [{k: v for k, v in m.items() if v is not None} for m in prompt["messages"]]
    return body


# Why the export left a part of the gateway out (the wording of the report).
_DISABLED_MEMBER = (
    "a disabled member: a document's members are all enabled, so it is left out (its tools, prompts "
    "and resources are not presented now either)"
)
_SAME_MCP = "a second member for the same MCP: a document names each MCP once among the members"


def _usable_members(contents: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The members a document can carry: enabled ones, each MCP instance once, in member order."""
    seen: set[str] = set()
    usable = []
    for member in contents["members"]:
        if member["enabled"] and member["mcp_instance_id"] not in seen:
            seen.add(member["mcp_instance_id"])
            usable.append(member)
    return usable


def _export_gateway(gateway: GatewayBundle, contents: Mapping[str, Any], out: ExportOut) -> dict[str, Any]:
    """One gateway bundle as the document's ``gateway``: members as the keys of the exported MCPs,
    only the curation someone set, and the bundle's own prompts and resources."""
    where = f"{kinds.GATEWAY_BUNDLES.path}/{gateway.id}"
    mcp_keys = out.keys.get("mcp", {})
    usable = {m["name"] for m in _usable_members(contents)}
    keys: dict[str, str] = {}  # member name on the platform -> member (MCP key) in the document
    for member in contents["members"]:
        name, key = member["name"], mcp_keys.get(member["mcp_instance_id"])
        if not member["enabled"]:
            out.drop(f"{where}/members/{name}", _DISABLED_MEMBER)
        elif name not in usable:
            out.drop(f"{where}/members/{name}", _SAME_MCP)
        elif key is None:
            reason = f"its MCP instance {member['mcp_instance_id']} is not exported"
            out.drop(f"{where}/members/{name}", reason)
        else:
            keys[name] = key
            if key != name:
                reason = (
                    f"the member name is no document key: it installs as member '{key}', whose tools are "
                    f"presented as {key}__<tool>"
                )
                out.drop(f"{where}/members/{name}", reason)
    doc: dict[str, Any] = {}
    if gateway.description:
        doc["description"] = gateway.description
    if gateway.overview:
        doc["overview"] = gateway.overview
    doc["members"] = list(keys.values())
    tools = _curated(contents["tools"], _DEFAULT_TOOL_CURATION, keys, _split_prompt_id, "tool")
    prompts = _curated(contents["member_prompts"], _DEFAULT_CURATION, keys, _split_prompt_id, "name")
    resources = _curated(
        contents["member_resources"], _DEFAULT_CURATION, keys, parse_member_resource_id, "uri"
    )
    for section, items in (("tools", tools), ("member_prompts", prompts), ("member_resources", resources)):
        if items:
            doc[section] = items
    own_prompts = [_export_prompt(i, p, out) for i, p in enumerate(contents["prompts"].values())]
    if own_prompts:
        doc["prompts"] = own_prompts
    own_resources = [_export_resource(r) for r in contents["resources"].values()]
    if own_resources:
        doc["resources"] = own_resources
    return doc


def _split_prompt_id(entry_id: str) -> tuple[str, str] | None:
    member, sep, name = entry_id.partition("__")
    return (member, name) if sep else None


def _curated(
    entries: Mapping[str, dict[str, Any]],
    default: Mapping[str, Any],
    keys: Mapping[str, str],
    split: Any,
    field: str,
) -> list[dict[str, Any]]:
    """The entries someone curated (differing from ``default``) of the exported members, in member
    order and then by entry id; each names its member by document key and its ``field``."""
    order = list(keys)
    found = []
    for entry_id, curation in entries.items():
        parts = split(entry_id)
        if parts is None or parts[0] not in keys or curation == default:
            continue
        item: dict[str, Any] = {"member": keys[parts[0]], field: parts[1]}
        item.update({k: v for k, v in curation.items() if v != default[k]})
        found.append((order.index(parts[0]), entry_id, item))
    return [item for _, _, item in sorted(found, key=lambda f: (f[0], f[1]))]


def _export_prompt(index: int, prompt: Mapping[str, Any], out: ExportOut) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": prompt["name"]}
    if prompt["title"] is not None:
        doc["title"] = prompt["title"]
    if prompt["description"]:
        doc["description"] = prompt["description"]
    arguments = []
    for position, argument in enumerate(prompt["arguments"]):
        item: dict[str, Any] = {"name": argument["name"]}
        if argument["required"]:
            item["required"] = True
        if argument["values"]:
            item["values"] = list(argument["values"])
        if argument.get("description"):
            pointer = f"/gateway/prompts/{index}/arguments/{position}/description"
            out.drop(pointer, "a document's prompt argument has no description")
        arguments.append(item)
    if arguments:
        doc["arguments"] = arguments
    doc["messages"] = [{k: v for k, v in m.items() if v is not None} for m in prompt["messages"]]
    return doc


def _export_resource(resource: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": resource["name"]}
    if resource["title"] is not None:
        doc["title"] = resource["title"]
    doc["mime_type"] = resource["mime_type"]
    doc["content"] = resource["content"]
    return doc
