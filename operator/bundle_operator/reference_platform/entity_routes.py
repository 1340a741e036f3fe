"""The CRUD routes every entity kind shares: create (idempotent), get, list, update, delete."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from bundle_operator.reference_platform.http import (
    check_revision,
    context,
    encode_cursor,
    existing,
    fingerprint,
    if_match,
    json_response,
    page,
    parse,
    read_json,
    seq_page,
    workspace,
)
from bundle_operator.reference_platform.kind_rules import KindRules
from bundle_operator.reference_platform.problems import ApiError, refused
from bundle_operator.reference_platform.storage import Tx, new_id

_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
BASE = "/v1/workspaces/{workspace}"


def idempotency_key_text(key: str, field: str = "Idempotency-Key") -> str:
    """``key`` when it is a valid Idempotency-Key; 422 naming ``field`` otherwise."""
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise refused(field, "must be 1 to 255 visible ASCII characters")
    return key


def _idempotency_key(request: web.Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    return None if key is None else idempotency_key_text(key)


def _filters(request: web.Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    for field in allowed:
        value = request.query.get(field)
        if value is None:
            continue
        if field == "archived":
            if value not in ("true", "false"):
                raise refused(field, "must be true or false")
            filters[field] = 1 if value == "true" else 0
        else:
            filters[field] = value
    return filters


class EntityRoutes:
    """The five routes of one kind, applying that kind's rules."""

    def __init__(self, rules: KindRules) -> None:
        self.rules = rules
        self.kind = rules.kind

    def register(self, app: web.Application) -> None:
        """Add the kind's routes to the app."""
        collection = f"{BASE}/{self.kind.path}"
        item = f"{collection}/{{entity_id}}"
        app.router.add_post(collection, self.create)
        app.router.add_get(collection, self.list)
        app.router.add_get(item, self.get)
        app.router.add_patch(item, self.update)
        app.router.add_delete(item, self.delete)

    def _location(self, ws: str, entity_id: str) -> str:
        return f"/v1/workspaces/{ws}/{self.kind.path}/{entity_id}"

    async def create(self, request: web.Request) -> web.Response:
        """POST a new entity; a repeated Idempotency-Key returns the entity it created."""
        ctx, ws = context(request), workspace(request)
        key = _idempotency_key(request)
        raw = await read_json(request)
        body = parse(self.kind.create, raw)
        digest = fingerprint(raw)
        path = self.kind.path

        def replay(tx: Tx) -> dict[str, Any] | None:
            if key is None:
                return None
            hit = tx.idempotent(ws, path, key)
            if hit is None:
                return None
            if hit[0] != digest:
                raise ApiError(
                    422,
                    "idempotency_key_reused",
                    "this Idempotency-Key was used for a different request; use a new key",
                )
            row = tx.get(ws, path, hit[1])
            if row is None:
                raise ApiError(404, "not_found", f"{hit[1]}, created with this Idempotency-Key, was deleted")
            return self.rules.render(tx, ctx, row, issued=True)

        # A replay answers before any outside work (a GitHub fetch) is repeated.
        earlier = await ctx.store.transact(replay)
        if earlier is None:
            prepared = await self.rules.prepare(ctx, ws, body, None)

            def create(tx: Tx) -> tuple[dict[str, Any], bool]:
                # Checked again inside the writing transaction: a concurrent retry may have won.
                again = replay(tx)
                if again is not None:
                    return again, False
                entity_id = new_id(self.kind.prefix)
                data, name = self.rules.create(tx, ctx, ws, entity_id, prepared)
                row = tx.insert(ws, path, entity_id, data, name=name)
                if key is not None:
                    tx.remember(ws, path, key, digest, entity_id)
                return self.rules.render(tx, ctx, row, issued=True), True

            shown, created = await ctx.store.transact(create)
        else:
            shown, created = earlier, False
        headers = {"Location": self._location(ws, shown["id"])}
        if not created:
            headers["Idempotent-Replayed"] = "true"
        return json_response(
            shown, status=201 if created else 200, revision=shown["revision"], headers=headers
        )

    async def get(self, request: web.Request) -> web.Response:
        """GET one entity."""
        ctx, ws = context(request), workspace(request)
        entity_id = request.match_info["entity_id"]

        def read(tx: Tx) -> dict[str, Any]:
            row = existing(tx, ws, self.kind.path, entity_id)
            return self.rules.render(tx, ctx, row, issued=False)

        shown = await ctx.store.transact(read)
        return json_response(shown, revision=shown["revision"])

    async def list(self, request: web.Request) -> web.Response:
        """GET a page of entities in creation order."""
        ctx, ws = context(request), workspace(request)
        limit, after_seq = seq_page(request)
        filters = _filters(request, self.kind.filters)

        def read(tx: Tx) -> tuple[list[dict[str, Any]], str | None]:
            rows = tx.select(ws, self.kind.path, equals=filters, after_seq=after_seq, limit=limit + 1)
            shown = [self.rules.render(tx, ctx, row, issued=False) for row in rows[:limit]]
            more = len(rows) > limit
            return shown, encode_cursor(str(rows[limit - 1].seq)) if more else None

        items, cursor = await ctx.store.transact(read)
        return page(items, cursor)

    async def update(self, request: web.Request) -> web.Response:
        """PATCH the fields given; If-Match is required."""
        ctx, ws = context(request), workspace(request)
        entity_id = request.match_info["entity_id"]
        expected = if_match(request, required=True)
        body = parse(self.kind.update, await read_json(request))

        def current(tx: Tx) -> Any:
            row = existing(tx, ws, self.kind.path, entity_id)
            check_revision(entity_id, row.revision, expected)
            return row

        before = await ctx.store.transact(current)
        prepared = await self.rules.prepare(ctx, ws, body, before)

        def write(tx: Tx) -> dict[str, Any]:
            row = current(tx)
            data, name = self.rules.update(tx, ctx, ws, row, prepared)
            return self.rules.render(tx, ctx, tx.update(row, data, name=name), issued=False)

        shown = await ctx.store.transact(write)
        return json_response(shown, revision=shown["revision"])

    async def delete(self, request: web.Request) -> web.Response:
        """DELETE an entity (at the If-Match revision when given)."""
        ctx, ws = context(request), workspace(request)
        entity_id = request.match_info["entity_id"]
        expected = if_match(request, required=False)

        def remove(tx: Tx) -> None:
            row = existing(tx, ws, self.kind.path, entity_id)
            check_revision(entity_id, row.revision, expected)
            self.rules.before_delete(tx, ctx, ws, row)
            tx.delete(row.id)
            self.rules.after_delete(tx, ctx, ws, row)

        await ctx.store.transact(remove)
        return web.Response(status=204)
