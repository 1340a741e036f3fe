"""Routes inside a gateway bundle: members, tool curation, members' prompts and resources,
the bundle's own prompts and resources, and rename.

A member's tools, prompts and resources are what discovery last found on it (see discovery.py;
a server spec's declared ``catalog`` stands in for discovery in tests). Curation may be stored for
an entry the member does not list, or lists no more: it is shown ``stale`` and kept until the
entry comes back. While a member fails discovery, all of its entries show stale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    GatewayEntryCuration,
    GatewayMemberOrder,
    GatewayMemberPut,
    GatewayPromptPut,
    GatewayRename,
    GatewayResourcePut,
    GatewayToolCuration,
    member_resource_id,
    parse_member_resource_id,
)
from bundle_operator.reference_platform import gateway_rules as rules
from bundle_operator.reference_platform.bundle_rules import check_bundle_name_free
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.gateway_catalog import (
    check_presented_names,
    entry_views,
    member_view,
    members_in_order,
    positions,
    shadowed,
    tool_views,
)
from bundle_operator.reference_platform.http import (
    context,
    existing,
    json_response,
    page,
    page_by_name,
    page_in_order,
    parse,
    read_json,
    workspace,
)
from bundle_operator.reference_platform.kind_rules import require_ref
from bundle_operator.reference_platform.mcp_rules import target_url
from bundle_operator.reference_platform.problems import conflict, not_found, refused
from bundle_operator.reference_platform.storage import Row, Tx, new_id

NamedPut = TypeVar("NamedPut", GatewayPromptPut, GatewayResourcePut)
BUNDLE = "/v1/workspaces/{workspace}/gateway-bundles/{bundle_id}"
_ENTRY_PREFIX = "gwe"


def _bundle(tx: Tx, ws: str, bundle_id: str) -> Row:
    return existing(tx, ws, kinds.GATEWAY_BUNDLES.path, bundle_id)


def _member(tx: Tx, bundle: Row, name: str) -> Row:
    row = tx.entry(bundle.id, rules.MEMBER, name)
    if row is None:
        raise not_found(f"the member '{name}'")
    return row


def _page_by_member(
    request: web.Request, views: list[dict[str, Any]], positions: dict[str, int]
) -> web.Response:
    return page_in_order(request, views, "id", lambda view: positions[view["member"]])


def _put_entry(tx: Tx, bundle: Row, kind: str, name: str, data: dict[str, Any]) -> None:
    existing = tx.entry(bundle.id, kind, name)
    if existing is None:
        tx.insert(bundle.workspace, kind, new_id(_ENTRY_PREFIX), data, name=name, parent=bundle.id)
    else:
        tx.update(existing, data)


class GatewayRoutes:
    """Handlers for everything under one gateway bundle."""

    def register(self, app: web.Application) -> None:
        """Add the gateway routes."""
        r = app.router
        r.add_post(f"{BUNDLE}/rename", self.rename)
        r.add_get(f"{BUNDLE}/members", self.list_members)
        r.add_put(f"{BUNDLE}/members:order", self.order_members)
        r.add_put(f"{BUNDLE}/members/{{member}}", self.put_member)
        r.add_delete(f"{BUNDLE}/members/{{member}}", self.delete_member)
        r.add_get(f"{BUNDLE}/tools", self.list_tools)
        r.add_get(f"{BUNDLE}/tools/{{tool_id}}", self.get_tool)
        r.add_put(f"{BUNDLE}/tools/{{tool_id}}", self.put_tool)
        r.add_get(f"{BUNDLE}/member-prompts", self.list_member_prompts)
        r.add_put(f"{BUNDLE}/member-prompts/{{entry_id}}", self.put_member_prompt)
        r.add_get(f"{BUNDLE}/member-resources", self.list_member_resources)
        r.add_put(f"{BUNDLE}/member-resources/{{entry_id}}", self.put_member_resource)
        r.add_get(f"{BUNDLE}/prompts", self.list_prompts)
        r.add_get(f"{BUNDLE}/prompts/{{name}}", self.get_prompt)
        r.add_put(f"{BUNDLE}/prompts/{{name}}", self.put_prompt)
        r.add_delete(f"{BUNDLE}/prompts/{{name}}", self.delete_prompt)
        r.add_get(f"{BUNDLE}/resources", self.list_resources)
        r.add_get(f"{BUNDLE}/resources/{{name:.+}}", self.get_resource)
        r.add_put(f"{BUNDLE}/resources/{{name:.+}}", self.put_resource)
        r.add_delete(f"{BUNDLE}/resources/{{name:.+}}", self.delete_resource)

    @staticmethod
    def _target(request: web.Request) -> tuple[Context, str, str]:
        return context(request), workspace(request), request.match_info["bundle_id"]

    # --- rename -------------------------------------------------------------------------------

    async def rename(self, request: web.Request) -> web.Response:
        """Rename a bundle in place; its id, entries and endpoint URLs stay."""
        ctx, ws, bundle_id = self._target(request)
        body = parse(GatewayRename, await read_json(request))

        def apply(tx: Tx) -> dict[str, Any]:
            bundle = _bundle(tx, ws, bundle_id)
            if body.name == bundle.name:
                return bundle.public()
            if not body.force:
                raise conflict(
                    "rename_needs_force",
                    f"renaming '{bundle.name}' to '{body.name}' leaves every document that still names "
                    f"'{bundle.name}' creating a new, empty bundle of that name; send force=true to rename",
                    field="force",
                )
            check_bundle_name_free(tx, ws, body.name)
            return tx.update(bundle, bundle.data | {"name": body.name}, name=body.name).public()

        shown = await ctx.store.transact(apply)
        return json_response(shown, revision=shown["revision"])

    # --- members ------------------------------------------------------------------------------

    async def list_members(self, request: web.Request) -> web.Response:
        """The members in their order."""
        ctx, ws, bundle_id = self._target(request)

        def read(tx: Tx) -> list[dict[str, Any]]:
            bundle = _bundle(tx, ws, bundle_id)
            tools = tool_views(tx, ws, bundle)
            return [member_view(tx, ws, m, tools) for m in members_in_order(tx, bundle)]

        members = await ctx.store.transact(read)
        return page_in_order(request, members, "name", lambda member: int(member["position"]))

    async def put_member(self, request: web.Request) -> web.Response:
        """Add a member at the end, or change its instance or enabled flag."""
        ctx, ws, bundle_id = self._target(request)
        name = request.match_info["member"]
        rules.check_member_name(name)
        body = parse(GatewayMemberPut, await read_json(request))

        def apply(tx: Tx) -> dict[str, Any]:
            bundle = _bundle(tx, ws, bundle_id)
            instance = require_ref(
                tx, ws, kinds.MCP_INSTANCES.path, body.mcp_instance_id, "mcp_instance_id", "MCP instance"
            )
            url = target_url(tx, ws, instance.data)
            if url is not None:
                rules.check_not_self(ctx, url, "mcp_instance_id")
            existing = tx.entry(bundle.id, rules.MEMBER, name)
            before = shadowed(tx, ws, bundle)
            data = {"mcp_instance_id": body.mcp_instance_id, "enabled": body.enabled}
            if existing is None:
                positions = [m.data["position"] for m in members_in_order(tx, bundle)]
                if len(positions) >= rules.MAX_MEMBERS:
                    raise rules.limit("member", f"a bundle holds at most {rules.MAX_MEMBERS} members")
                data["position"] = max(positions, default=-1) + 1
                tx.insert(ws, rules.MEMBER, new_id(_ENTRY_PREFIX), data, name=name, parent=bundle.id)
            else:
                tx.update(existing, existing.data | data)
            check_presented_names(tx, ws, bundle, lambda view: view["member"] == name, before)
            return member_view(tx, ws, _member(tx, bundle, name))

        return json_response(await ctx.store.transact(apply))

    async def delete_member(self, request: web.Request) -> web.Response:
        """Remove a member with its curation."""
        ctx, ws, bundle_id = self._target(request)
        name = request.match_info["member"]

        def apply(tx: Tx) -> None:
            bundle = _bundle(tx, ws, bundle_id)
            member = _member(tx, bundle, name)
            tx.delete(member.id)
            for kind in (rules.TOOL, rules.MEMBER_PROMPT, rules.MEMBER_RESOURCE):
                for entry in tx.entries(bundle.id, kind):
                    if entry.data["member"] == name:
                        tx.delete(entry.id)

        await ctx.store.transact(apply)
        return web.Response(status=204)

    async def order_members(self, request: web.Request) -> web.Response:
        """Set the whole order: every member exactly once, or 422 and nothing changes."""
        ctx, ws, bundle_id = self._target(request)
        body = parse(GatewayMemberOrder, await read_json(request))

        def apply(tx: Tx) -> list[dict[str, Any]]:
            bundle = _bundle(tx, ws, bundle_id)
            members = {m.key: m for m in members_in_order(tx, bundle)}
            named = body.members
            duplicates = sorted({n for n in named if named.count(n) > 1})
            unknown = sorted(set(named) - set(members))
            missing = sorted(set(members) - set(named))
            problems = []
            if duplicates:
                problems.append(f"named more than once: {', '.join(duplicates)}")
            if unknown:
                problems.append(f"not members: {', '.join(unknown)}")
            if missing:
                problems.append(f"missing: {', '.join(missing)}")
            if problems:
                raise refused("members", "must name every member exactly once; " + "; ".join(problems))
            for position, name in enumerate(named):
                member = members[name]
                if member.data["position"] != position:
                    tx.update(member, member.data | {"position": position})
            tools = tool_views(tx, ws, bundle)
            return [member_view(tx, ws, m, tools) for m in members_in_order(tx, bundle)]

        return page(await ctx.store.transact(apply), None)

    # --- tools --------------------------------------------------------------------------------

    async def list_tools(self, request: web.Request) -> web.Response:
        """Every tool the bundle can serve with its curation."""
        ctx, ws, bundle_id = self._target(request)

        def read(tx: Tx) -> tuple[list[dict[str, Any]], dict[str, int]]:
            bundle = _bundle(tx, ws, bundle_id)
            return tool_views(tx, ws, bundle), positions(tx, bundle)

        return _page_by_member(request, *await ctx.store.transact(read))

    async def get_tool(self, request: web.Request) -> web.Response:
        """One tool by ``member__tool``."""
        ctx, ws, bundle_id = self._target(request)
        tool_id = request.match_info["tool_id"]

        def read(tx: Tx) -> dict[str, Any]:
            for view in tool_views(tx, ws, _bundle(tx, ws, bundle_id)):
                if view["id"] == tool_id:
                    return view
            raise not_found(f"the tool '{tool_id}'")

        return json_response(await ctx.store.transact(read))

    async def put_tool(self, request: web.Request) -> web.Response:
        """Replace a tool's curation; a clash of presented names answers 409 naming the holder."""
        ctx, ws, bundle_id = self._target(request)
        tool_id = request.match_info["tool_id"]
        body = parse(GatewayToolCuration, await read_json(request))
        split = rules.split_entry_id(tool_id)
        if split is None:
            raise not_found(f"the tool '{tool_id}' (tool ids are member__tool)")
        member_name, tool = split

        def apply(tx: Tx) -> dict[str, Any]:
            bundle = _bundle(tx, ws, bundle_id)
            _member(tx, bundle, member_name)
            data = body.model_dump(mode="json") | {"member": member_name, "tool": tool}
            before = shadowed(tx, ws, bundle)
            _put_entry(tx, bundle, rules.TOOL, tool_id, data)
            check_presented_names(tx, ws, bundle, lambda view: view["id"] == tool_id, before)
            return next(v for v in tool_views(tx, ws, bundle) if v["id"] == tool_id)

        return json_response(await ctx.store.transact(apply))

    # --- members' prompts and resources -------------------------------------------------------

    async def list_member_prompts(self, request: web.Request) -> web.Response:
        """Members' prompts with their curation."""
        return await self._list_member_entries(request, "prompts", rules.MEMBER_PROMPT)

    async def put_member_prompt(self, request: web.Request) -> web.Response:
        """Curate a member's prompt (``member__prompt``) in this bundle."""
        entry_id = request.match_info["entry_id"]
        body = parse(GatewayEntryCuration, await read_json(request))
        split = rules.split_entry_id(entry_id)
        if split is None:
            raise not_found(f"the member prompt '{entry_id}' (ids are member__prompt)")
        member_name, prompt = split
        names = {"name": prompt}
        return await self._curate(request, body, "prompts", rules.MEMBER_PROMPT, member_name, names)

    async def list_member_resources(self, request: web.Request) -> web.Response:
        """Members' resources with their curation."""
        return await self._list_member_entries(request, "resources", rules.MEMBER_RESOURCE)

    async def put_member_resource(self, request: web.Request) -> web.Response:
        """Curate a member's resource in this bundle (id from ``member_resource_id``)."""
        entry_id = request.match_info["entry_id"]
        body = parse(GatewayEntryCuration, await read_json(request))
        split = parse_member_resource_id(entry_id)
        if split is None or member_resource_id(*split) != entry_id:
            raise not_found(f"the member resource '{entry_id}'")
        member_name, uri = split
        names = {"uri": uri}
        return await self._curate(request, body, "resources", rules.MEMBER_RESOURCE, member_name, names)

    async def _list_member_entries(self, request: web.Request, what: str, kind: str) -> web.Response:
        ctx, ws, bundle_id = self._target(request)

        def read(tx: Tx) -> tuple[list[dict[str, Any]], dict[str, int]]:
            bundle = _bundle(tx, ws, bundle_id)
            return entry_views(tx, ws, bundle, what, kind), positions(tx, bundle)

        return _page_by_member(request, *await ctx.store.transact(read))

    async def _curate(
        self,
        request: web.Request,
        body: GatewayEntryCuration,
        what: str,
        kind: str,
        member_name: str,
        names: dict[str, str],
    ) -> web.Response:
        """Put the curation of one member entry (``names`` say which) and answer its view."""
        ctx, ws, bundle_id = self._target(request)
        entry_id = request.match_info["entry_id"]

        def apply(tx: Tx) -> dict[str, Any]:
            bundle = _bundle(tx, ws, bundle_id)
            _member(tx, bundle, member_name)
            data = body.model_dump(mode="json") | {"member": member_name} | names
            _put_entry(tx, bundle, kind, entry_id, data)
            views = entry_views(tx, ws, bundle, what, kind)
            return next(v for v in views if v["id"] == entry_id)

        return json_response(await ctx.store.transact(apply))

    # --- the bundle's own prompts -------------------------------------------------------------

    async def list_prompts(self, request: web.Request) -> web.Response:
        """The bundle's prompts in name order."""
        return await self._list_own(request, rules.PROMPT)

    async def get_prompt(self, request: web.Request) -> web.Response:
        """One of the bundle's prompts."""
        return await self._get_own(request, rules.PROMPT, "prompt")

    async def put_prompt(self, request: web.Request) -> web.Response:
        """Create or replace a prompt by name."""
        ctx, ws, bundle_id, name, body = await self._named_body(request, GatewayPromptPut)

        def apply(tx: Tx) -> tuple[dict[str, Any], bool]:
            bundle = _bundle(tx, ws, bundle_id)
            existing = tx.entry(bundle.id, rules.PROMPT, name)
            resources = {row.name for row in tx.entries(bundle.id, rules.RESOURCE) if row.name}
            rules.check_prompt(body, resources)
            if existing is None and len(tx.entries(bundle.id, rules.PROMPT)) >= rules.MAX_PROMPTS:
                raise rules.limit("name", f"a bundle holds at most {rules.MAX_PROMPTS} prompts")
            data = body.model_dump(mode="json")
            _put_entry(tx, bundle, rules.PROMPT, name, data)
            return _own(_entry(tx, bundle, rules.PROMPT, name)), existing is None

        return await _put_answer(ctx, apply)

    async def delete_prompt(self, request: web.Request) -> web.Response:
        """Delete a prompt."""
        ctx, ws, bundle_id = self._target(request)
        name = request.match_info["name"]

        def apply(tx: Tx) -> None:
            tx.delete(_entry(tx, _bundle(tx, ws, bundle_id), rules.PROMPT, name).id)

        await ctx.store.transact(apply)
        return web.Response(status=204)

    # --- the bundle's own resources -----------------------------------------------------------

    async def list_resources(self, request: web.Request) -> web.Response:
        """The bundle's resources in name order."""
        return await self._list_own(request, rules.RESOURCE)

    async def get_resource(self, request: web.Request) -> web.Response:
        """One of the bundle's resources."""
        return await self._get_own(request, rules.RESOURCE, "resource")

    async def put_resource(self, request: web.Request) -> web.Response:
        """Create or replace a resource by name, within the size limits."""
        ctx, ws, bundle_id, name, body = await self._named_body(request, GatewayResourcePut)
        if any(segment in (".", "..") for segment in name.split("/")):
            # URLs normalise dot segments away, so such a name could never be read back by its path.
            raise refused("name", "must not have '.' or '..' segments")
        size = len(body.content.encode())
        if size > rules.MAX_RESOURCE:
            raise rules.limit("content", f"the resource is {size} bytes; the limit is {rules.MAX_RESOURCE}")

        def apply(tx: Tx) -> tuple[dict[str, Any], bool]:
            bundle = _bundle(tx, ws, bundle_id)
            others = [row for row in tx.entries(bundle.id, rules.RESOURCE) if row.name != name]
            existing = tx.entry(bundle.id, rules.RESOURCE, name)
            if existing is None and len(others) >= rules.MAX_RESOURCES:
                raise rules.limit("name", f"a bundle holds at most {rules.MAX_RESOURCES} resources")
            total = size + sum(row.data["size"] for row in others)
            if total > rules.MAX_RESOURCES_TOTAL:
                raise rules.limit(
                    "content",
                    f"the bundle's resources would total {total} bytes;"
                    f" the limit is {rules.MAX_RESOURCES_TOTAL}",
                )
            data = body.model_dump(mode="json") | {"uri": f"bundle://resources/{name}", "size": size}
            _put_entry(tx, bundle, rules.RESOURCE, name, data)
            return _own(_entry(tx, bundle, rules.RESOURCE, name)), existing is None

        return await _put_answer(ctx, apply)

    async def delete_resource(self, request: web.Request) -> web.Response:
        """Delete a resource, unless a prompt embeds it."""
        ctx, ws, bundle_id = self._target(request)
        name = request.match_info["name"]

        def apply(tx: Tx) -> None:
            bundle = _bundle(tx, ws, bundle_id)
            resource = _entry(tx, bundle, rules.RESOURCE, name)
            embedding = sorted(
                row.key
                for row in tx.entries(bundle.id, rules.PROMPT)
                if any(m.get("resource") == name for m in row.data["messages"])
            )
            if embedding:
                raise conflict(
                    "resource_in_use",
                    f"the resource '{name}' is embedded by the prompts {', '.join(embedding)}",
                    holders=embedding,
                )
            tx.delete(resource.id)

        await ctx.store.transact(apply)
        return web.Response(status=204)

    async def _list_own(self, request: web.Request, kind: str) -> web.Response:
        ctx, ws, bundle_id = self._target(request)

        def read(tx: Tx) -> list[dict[str, Any]]:
            return [_own(row) for row in tx.entries(_bundle(tx, ws, bundle_id).id, kind)]

        return page_by_name(request, await ctx.store.transact(read), "name")

    async def _named_body(
        self, request: web.Request, model: type[NamedPut]
    ) -> tuple[Context, str, str, str, NamedPut]:
        """The target and the body of a PUT by name, whose body must carry the path's name."""
        ctx, ws, bundle_id = self._target(request)
        name = request.match_info["name"]
        body = parse(model, await read_json(request))
        if body.name != name:
            raise refused("name", "must equal the name in the path")
        return ctx, ws, bundle_id, name, body

    async def _get_own(self, request: web.Request, kind: str, what: str) -> web.Response:
        ctx, ws, bundle_id = self._target(request)
        name = request.match_info["name"]

        def read(tx: Tx) -> dict[str, Any]:
            return _own(_entry(tx, _bundle(tx, ws, bundle_id), kind, name))

        return json_response(await ctx.store.transact(read))


async def _put_answer(ctx: Context, apply: Callable[[Tx], tuple[dict[str, Any], bool]]) -> web.Response:
    """Run a create-or-replace; 201 when it created, 200 when it replaced."""
    shown, created = await ctx.store.transact(apply)
    return json_response(shown, status=201 if created else 200)


def _entry(tx: Tx, bundle: Row, kind: str, name: str) -> Row:
    row = tx.entry(bundle.id, kind, name)
    if row is None:
        what = "prompt" if kind == rules.PROMPT else "resource"
        raise not_found(f"the {what} '{name}'")
    return row


def _own(row: Row) -> dict[str, Any]:
    return row.data | {"updated_at": row.updated_at}
