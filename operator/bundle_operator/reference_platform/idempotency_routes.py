"""Looking up what a create made from its Idempotency-Key.

An installer that crashed between sending a create and recording the answer finds the entity
again by the key it sent, instead of creating a second one.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bundle_operator.reference_platform import catalog_routes
from bundle_operator.reference_platform.entity_routes import BASE, idempotency_key_text
from bundle_operator.reference_platform.http import context, json_response, workspace
from bundle_operator.reference_platform.problems import not_found
from bundle_operator.reference_platform.storage import Tx


async def find_by_key(request: web.Request) -> web.Response:
    """GET .../idempotency-keys/{key}: the entity a create with this key made, or 404."""
    ctx, ws = context(request), workspace(request)
    key = idempotency_key_text(request.match_info["key"], "key")

    def read(tx: Tx) -> dict[str, Any]:
        found = tx.idempotency_record(ws, key)
        if found is None:
            raise not_found("a create with this Idempotency-Key in this workspace")
        kind, entity_id = found
        exists = tx.get(ws, kind, entity_id) is not None
        return {"key": key, "kind": kind, "id": entity_id, "exists": exists}

    return json_response(await ctx.store.transact(read))


def register(app: web.Application) -> None:
    """Add the workspace-level lookups: a create by its idempotency key, and the model catalog."""
    # A key may hold '/', which some clients send unescaped, and a bad one must reach the check.
    app.router.add_get(f"{BASE}/idempotency-keys/{{key:[\\s\\S]+}}", find_by_key)
    # Registered from here so the application module (app.py) need not change.
    catalog_routes.register(app)
