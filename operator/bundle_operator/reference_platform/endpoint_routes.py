"""Endpoint actions beyond CRUD: issuing a new API key."""

from __future__ import annotations

from aiohttp import web

from bundle_operator.platform import kinds
from bundle_operator.reference_platform.bundle_rules import API_KEY_PURPOSE, KEY_ROTATED, new_api_key
from bundle_operator.reference_platform.http import context, existing, json_response, workspace
from bundle_operator.reference_platform.kind_rules import owned_secret_key
from bundle_operator.reference_platform.problems import ApiError
from bundle_operator.reference_platform.storage import Tx


async def issue_api_key(request: web.Request) -> web.Response:
    """POST .../endpoints/{id}/api-key: replace an ApiKey endpoint's key and show the new one once."""
    ctx, ws = context(request), workspace(request)
    endpoint_id = request.match_info["entity_id"]

    def apply(tx: Tx) -> str:
        row = existing(tx, ws, kinds.ENDPOINTS.path, endpoint_id)
        if row.data["auth_mode"] != "ApiKey":
            raise ApiError(
                409, "not_api_key_endpoint", f"{endpoint_id} uses {row.data['auth_mode']}, not ApiKey"
            )
        key = new_api_key()
        tx.put_secret(owned_secret_key(row.id, API_KEY_PURPOSE), key)
        tx.set_hidden(row, KEY_ROTATED, True)
        return key

    return json_response({"api_key": await ctx.store.transact(apply)})


def register(app: web.Application) -> None:
    """Add the endpoint action routes."""
    app.router.add_post("/v1/workspaces/{workspace}/endpoints/{entity_id}/api-key", issue_api_key)
