"""Gateway bundles and the endpoints that expose them."""

from __future__ import annotations

import secrets
from typing import Any

from bundle_operator.platform import kinds
from bundle_operator.platform.models import EndpointCreate, EndpointUpdate, GatewayBundleCreate
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored, owned_secret_key, require_ref
from bundle_operator.reference_platform.problems import conflict, refused
from bundle_operator.reference_platform.storage import Row, Tx

API_KEY_PURPOSE = "api_key"
# Set on an endpoint once its key was issued again: replays of its create then show no key.
KEY_ROTATED = "_api_key_rotated"


def check_bundle_name_free(tx: Tx, workspace: str, name: str, field: str = "name") -> None:
    """Bundle names are the natural key within a workspace."""
    holder = tx.find_name(kinds.GATEWAY_BUNDLES.path, name, workspace)
    if holder is not None:
        raise conflict(
            "name_taken",
            f"the gateway bundle {holder.id} is already named '{name}'",
            holders=[holder.id],
            field=field,
        )


class GatewayBundleRules(KindRules):
    """Bundles: unique names; deleting one deletes its entries and every endpoint serving it."""

    kind = kinds.GATEWAY_BUNDLES

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, GatewayBundleCreate)
        check_bundle_name_free(tx, workspace, prepared.name)
        return prepared.model_dump(mode="json"), prepared.name

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        data, _ = super().update(tx, ctx, workspace, row, prepared)
        for field in ("description", "overview"):
            data[field] = data[field] or ""
        return data, row.name

    def after_delete(self, tx: Tx, ctx: Context, workspace: str, row: Row) -> None:
        for endpoint in tx.select(workspace, kinds.ENDPOINTS.path, equals={"gateway_bundle_id": row.id}):
            tx.delete(endpoint.id)


def new_api_key() -> str:
    """A fresh endpoint API key."""
    return "bok_" + secrets.token_urlsafe(32)


def endpoint_url(ctx: Context, name: str) -> str:
    """Where clients reach an endpoint."""
    return f"{ctx.public_url.rstrip('/')}/{name}/mcp"


class EndpointRules(KindRules):
    """Endpoints: names are unique across the gateway (they are URL paths); keys are issued once."""

    kind = kinds.ENDPOINTS

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, EndpointCreate)
        require_ref(
            tx,
            workspace,
            kinds.GATEWAY_BUNDLES.path,
            prepared.gateway_bundle_id,
            "gateway_bundle_id",
            "gateway bundle",
        )
        holder = tx.find_name(kinds.ENDPOINTS.path, prepared.name)
        if holder is not None:
            shown = [holder.id] if holder.workspace == workspace else []
            raise conflict(
                "name_taken", f"an endpoint is already named '{prepared.name}'", holders=shown, field="name"
            )
        if prepared.auth_mode == "OAuth" and prepared.oauth is None:
            raise refused("oauth", "required when auth_mode is OAuth: the issuer whose tokens it accepts")
        if prepared.auth_mode == "ApiKey" and prepared.oauth is not None:
            raise refused("oauth", "only for auth_mode OAuth; an ApiKey endpoint takes its key")
        if prepared.auth_mode == "ApiKey":
            tx.put_secret(owned_secret_key(entity_id, API_KEY_PURPOSE), new_api_key())
        return prepared.model_dump(mode="json"), prepared.name

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, EndpointUpdate)
        if "oauth" in prepared.model_fields_set:
            if row.data["auth_mode"] != "OAuth":
                raise refused("oauth", "only for auth_mode OAuth; an ApiKey endpoint takes its key")
            if prepared.oauth is None:
                raise refused("oauth", "an OAuth endpoint needs its issuer; it cannot be removed")
        return super().update(tx, ctx, workspace, row, prepared)

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        body = row.public() | {"url": endpoint_url(ctx, row.data["name"])}
        if issued and row.data["auth_mode"] == "ApiKey" and not row.data.get(KEY_ROTATED):
            # The create answer (and a replay of it under the same Idempotency-Key) carries the key,
            # until a new key is issued: an old Idempotency-Key must not read the current key.
            body["api_key"] = tx.secret(owned_secret_key(row.id, API_KEY_PURPOSE))
        return body
