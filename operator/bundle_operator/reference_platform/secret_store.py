"""The workspace secret store: secret entities whose values are kept apart and never shown."""

from __future__ import annotations

from typing import Any

from bundle_operator.platform import kinds
from bundle_operator.platform.models import SecretCreate, SecretUpdate
from bundle_operator.reference_platform import gateway_rules
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored, require_ref
from bundle_operator.reference_platform.knowledge_sources import SOURCE
from bundle_operator.reference_platform.problems import refused
from bundle_operator.reference_platform.storage import Row, Tx, new_id

SECRETS = kinds.SECRETS.path


def store_owned_secret(tx: Tx, workspace: str, owner_id: str, name: str, value: str) -> str:
    """Store a value the platform keeps on an entity's behalf; it is deleted with the entity."""
    secret_id = new_id(kinds.SECRETS.prefix)
    tx.insert(workspace, SECRETS, secret_id, {"name": name, "_owner": owner_id}, name=name)
    tx.put_secret(secret_id, value)
    return secret_id


def delete_owned_secrets(tx: Tx, workspace: str, owner_id: str, keep: set[str] | None = None) -> None:
    """Delete the secrets the platform stored for ``owner_id`` (except those in ``keep``)."""
    for row in tx.select(workspace, SECRETS, equals={"_owner": owner_id}):
        if keep is None or row.id not in keep:
            tx.delete(row.id)


def secret_value(tx: Tx, workspace: str, secret_id: str, field: str) -> str:
    """The value behind a secret reference, or a 422 naming the field that refers to it."""
    require_ref(tx, workspace, SECRETS, secret_id, field, "secret")
    value = tx.secret(secret_id)
    if value is None:
        raise refused(field, f"the secret {secret_id} has no value", code="unknown_reference")
    return value


def _check_member_urls(tx: Tx, ctx: Context, workspace: str, secret: Row, value: str) -> None:
    """Refuse a new value that would make a gateway member whose URL is this secret call the gateway."""
    for instance in tx.holders(workspace, (kinds.MCP_INSTANCES.path,), secret.id):
        if instance.data.get("endpoint_url") != {"secret_id": secret.id}:
            continue
        if tx.holders(workspace, (gateway_rules.MEMBER,), instance.id):
            gateway_rules.check_not_self(ctx, value, "value")


class SecretRules(KindRules):
    """Secrets: the value goes to ``secret_values``; only id and name are ever shown."""

    kind = kinds.SECRETS
    # A source holds the secrets of its credentials (stored under the set, like a channel's token).
    held_by = (kinds.MCP_INSTANCES.path, kinds.CHANNELS.path, SOURCE)

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, SecretCreate)
        tx.put_secret(entity_id, prepared.value.get_secret_value())
        return {"name": prepared.name}, prepared.name

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, SecretUpdate)
        data = dict(row.data)
        if "name" in prepared.model_fields_set:
            if prepared.name is None:
                raise refused("name", "must not be null")
            data["name"] = prepared.name
        if "value" in prepared.model_fields_set:
            if prepared.value is None:
                raise refused("value", "must not be null")
            value = prepared.value.get_secret_value()
            _check_member_urls(tx, ctx, workspace, row, value)
            tx.put_secret(row.id, value)
        return data, data["name"]

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        return {
            k: v
            for k, v in row.public().items()
            if k in ("id", "revision", "created_at", "updated_at", "name")
        }
