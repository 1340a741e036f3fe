"""Routes of an app's versions: list them, add one, archive or restore one."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bundle_operator.platform import kinds
from bundle_operator.platform.models import AppVersionCreate, AppVersionUpdate
from bundle_operator.reference_platform.app_rules import (
    VERSION,
    add_version,
    app_view,
    version_view,
    versions_of,
)
from bundle_operator.reference_platform.entity_routes import BASE
from bundle_operator.reference_platform.http import (
    context,
    existing,
    json_response,
    page_by_number,
    parse,
    read_json,
    whole_number,
    workspace,
)
from bundle_operator.reference_platform.problems import not_found, refused
from bundle_operator.reference_platform.storage import Row, Tx

APP = f"{BASE}/{kinds.APPS.path}/{{app_id}}"


def _app(tx: Tx, ws: str, app_id: str) -> Row:
    return existing(tx, ws, kinds.APPS.path, app_id)


async def list_versions(request: web.Request) -> web.Response:
    """GET .../versions: every version, oldest first."""
    ctx, ws = context(request), workspace(request)
    app_id = request.match_info["app_id"]

    def read(tx: Tx) -> list[dict[str, Any]]:
        return [version_view(row) for row in versions_of(tx, _app(tx, ws, app_id).id)]

    return page_by_number(request, await ctx.store.transact(read), lambda view: int(view["version"]))


async def add_app_version(request: web.Request) -> web.Response:
    """POST .../versions: add the next version; the answer is the app, which now shows it."""
    ctx, ws = context(request), workspace(request)
    app_id = request.match_info["app_id"]
    body = parse(AppVersionCreate, await read_json(request))

    def apply(tx: Tx) -> dict[str, Any]:
        app = _app(tx, ws, app_id)
        add_version(tx, ws, app.id, body.model_dump(mode="json")["document"])
        return app_view(tx, tx.update(app, app.data))

    shown = await ctx.store.transact(apply)
    return json_response(shown, status=201, revision=shown["revision"])


async def update_app_version(request: web.Request) -> web.Response:
    """PATCH .../versions/{version}: archive or restore a version; the app moves to a new revision."""
    ctx, ws = context(request), workspace(request)
    app_id = request.match_info["app_id"]
    number = whole_number(request.match_info["version"])
    if number is None:
        raise refused("version", "must be a version number")
    body = parse(AppVersionUpdate, await read_json(request))

    def apply(tx: Tx) -> dict[str, Any]:
        app = _app(tx, ws, app_id)
        version = tx.entry(app.id, VERSION, str(number))
        if version is None:
            raise not_found(f"version {number} of {app_id}")
        changed = tx.update(version, version.data | {"archived": body.archived})
        tx.update(app, app.data)
        return version_view(changed)

    return json_response(await ctx.store.transact(apply))


def register(app: web.Application) -> None:
    """Add the version routes of apps."""
    app.router.add_get(f"{APP}/versions", list_versions)
    app.router.add_post(f"{APP}/versions", add_app_version)
    app.router.add_patch(f"{APP}/versions/{{version}}", update_app_version)
