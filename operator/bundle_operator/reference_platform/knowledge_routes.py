"""Routes of a knowledge set's sources: list, put by key, add a user's own, delete."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bundle_operator.document.knowledge import source_key_problem
from bundle_operator.platform import kinds
from bundle_operator.platform.models import KnowledgeSourcePut
from bundle_operator.reference_platform.entity_routes import BASE
from bundle_operator.reference_platform.http import (
    check_revision,
    context,
    existing,
    if_match,
    json_response,
    page_by_number,
    parse,
    read_json,
    workspace,
)
from bundle_operator.reference_platform.knowledge_rules import (
    after_source_write,
    check_sync_schedule,
    store_credentials,
)
from bundle_operator.reference_platform.knowledge_sources import (
    MAX_SOURCES,
    SOURCE,
    SOURCE_PREFIX,
    source_data,
    source_view,
    sources_of,
)
from bundle_operator.reference_platform.problems import ApiError, not_found, refused
from bundle_operator.reference_platform.storage import Row, Tx, new_id

SET = f"{BASE}/{kinds.KNOWLEDGE_SETS.path}/{{set_id}}"


def _set(tx: Tx, ws: str, set_id: str) -> Row:
    return existing(tx, ws, kinds.KNOWLEDGE_SETS.path, set_id)


def _check_room(tx: Tx, knowledge_set: Row) -> None:
    if len(sources_of(tx, knowledge_set.id)) >= MAX_SOURCES:
        message = f"a knowledge set holds at most {MAX_SOURCES} sources"
        raise refused("sources", message, code="limit_exceeded")


async def _body(request: web.Request) -> KnowledgeSourcePut:
    body = parse(KnowledgeSourcePut, await read_json(request))
    check_sync_schedule(body.sync_schedule)
    return body


async def list_sources(request: web.Request) -> web.Response:
    """GET .../sources: the set's sources in creation order."""
    ctx, ws = context(request), workspace(request)
    set_id = request.match_info["set_id"]

    def read(tx: Tx) -> tuple[list[dict[str, Any]], dict[str, int]]:
        rows = sources_of(tx, _set(tx, ws, set_id).id)
        return [source_view(row) for row in rows], {row.id: row.seq for row in rows}

    views, seqs = await ctx.store.transact(read)
    return page_by_number(request, views, lambda view: seqs[view["id"]])


async def put_source(request: web.Request) -> web.Response:
    """PUT .../sources/{key}: create or replace the source with this key."""
    ctx, ws = context(request), workspace(request)
    set_id, key = request.match_info["set_id"], request.match_info["source"]
    problem = source_key_problem(key)
    if problem is not None:
        raise refused("key", problem)
    body = await _body(request)
    expected = if_match(request, required=False)

    def apply(tx: Tx) -> tuple[dict[str, Any], bool]:
        knowledge_set = _set(tx, ws, set_id)
        existing = tx.entry(knowledge_set.id, SOURCE, key)
        _check_source_revision(key, existing, expected)
        if existing is None:
            _check_room(tx, knowledge_set)
        credentials = store_credentials(tx, ws, knowledge_set, key, body.credentials, existing)
        data = source_data(body, key, credentials)
        if existing is None:
            row = tx.insert(ws, SOURCE, new_id(SOURCE_PREFIX), data, name=key, parent=knowledge_set.id)
        else:
            row = tx.update(existing, data)
        after_source_write(tx, ws, knowledge_set)
        return source_view(row), existing is None

    shown, created = await ctx.store.transact(apply)
    return json_response(shown, status=201 if created else 200)


async def add_source(request: web.Request) -> web.Response:
    """POST .../sources: add a source of the user's own, which has no key."""
    ctx, ws = context(request), workspace(request)
    set_id = request.match_info["set_id"]
    body = await _body(request)

    def apply(tx: Tx) -> dict[str, Any]:
        knowledge_set = _set(tx, ws, set_id)
        _check_room(tx, knowledge_set)
        source_id = new_id(SOURCE_PREFIX)
        credentials = store_credentials(tx, ws, knowledge_set, source_id, body.credentials, None)
        row = tx.insert(ws, SOURCE, source_id, source_data(body, None, credentials), parent=knowledge_set.id)
        after_source_write(tx, ws, knowledge_set)
        return source_view(row)

    return json_response(await ctx.store.transact(apply), status=201)


async def delete_source(request: web.Request) -> web.Response:
    """DELETE .../sources/{ref}: remove a source by its key or its id, with its credentials."""
    ctx, ws = context(request), workspace(request)
    set_id, ref = request.match_info["set_id"], request.match_info["source"]
    expected = if_match(request, required=False)

    def apply(tx: Tx) -> None:
        knowledge_set = _set(tx, ws, set_id)
        if ref.startswith(f"{SOURCE_PREFIX}_"):  # '_' is in no key
            source = tx.get(ws, SOURCE, ref)
            if source is not None and source.parent != knowledge_set.id:
                source = None
        else:
            source = tx.entry(knowledge_set.id, SOURCE, ref)
        if source is None:
            raise not_found(f"the source '{ref}'")
        check_revision(ref, source.revision, expected)
        tx.delete(source.id)
        after_source_write(tx, ws, knowledge_set)

    await ctx.store.transact(apply)
    return web.Response(status=204)


def _check_source_revision(key: str, existing: Row | None, expected: int | None) -> None:
    """412 when the caller based its change on a revision of the source it no longer has (or on a
    source that is gone)."""
    if expected is None:
        return
    if existing is None:
        raise ApiError(412, "revision_mismatch", f"the source '{key}' no longer exists; read the set again")
    check_revision(key, existing.revision, expected)


def register(app: web.Application) -> None:
    """Add the source routes of knowledge sets."""
    app.router.add_get(f"{SET}/sources", list_sources)
    app.router.add_post(f"{SET}/sources", add_source)
    app.router.add_put(f"{SET}/sources/{{source}}", put_source)
    app.router.add_delete(f"{SET}/sources/{{source}}", delete_source)
