"""The hooks through which each kind of entity applies the platform's own rules.

The generic routes (``entity_routes``) handle ids, revisions, idempotency, paging and JSON;
a ``KindRules`` subclass turns a validated request into stored data, refuses what its service
would refuse, and decides what deleting an entity means for the entities around it.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel

from bundle_operator.platform.kinds import Kind
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.problems import conflict, refused
from bundle_operator.reference_platform.storage import Row, Tx

Stored = tuple[dict[str, Any], str | None]  # (data, name)


class KindRules:
    """Defaults: store the request as given, refuse deleting what other entities still refer to."""

    kind: Kind[Any, Any, Any]
    # Kinds whose entities may refer to one of this kind: a delete is refused while they do.
    held_by: tuple[str, ...] = ()

    async def prepare(self, ctx: Context, workspace: str, body: BaseModel, current: Row | None) -> Any:
        """Work done outside the transaction (network fetches); its result reaches create/update."""
        return body

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        """The data and name to store for a new entity."""
        assert isinstance(prepared, BaseModel)
        data = prepared.model_dump(mode="json")
        return data, data.get("name")

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        """The data and name after applying the fields set in an update."""
        assert isinstance(prepared, BaseModel)
        data = dict(row.data)
        dumped = prepared.model_dump(mode="json")
        for field in prepared.model_fields_set:
            if dumped[field] is None and not nullable(self.kind.entity, field):
                raise refused(field, "must not be null")
            data[field] = dumped[field]
        return data, data.get("name")

    def before_delete(self, tx: Tx, ctx: Context, workspace: str, row: Row) -> None:
        """Refuse the delete while another entity refers to this one."""
        if not self.held_by:
            return
        holders = tx.holders(workspace, self.held_by, row.id)
        if holders:
            ids = sorted({h.parent or h.id for h in holders})
            raise conflict(
                "in_use",
                f"{row.id} is still referred to by {', '.join(ids)}; delete or change those first",
                holders=ids,
            )

    def after_delete(self, tx: Tx, ctx: Context, workspace: str, row: Row) -> None:
        """Remove what the entity owned (secrets the platform stored for it)."""

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        """The response body; ``issued`` is true in a create's answer (and its idempotent replays)."""
        return row.public()


def nullable(model: type[BaseModel], field: str) -> bool:
    """Whether a response model allows null in a field."""
    info = model.model_fields.get(field)
    return info is not None and type(None) in get_args(info.annotation)


def merge_changes(row: Row, changes: BaseModel, not_null: tuple[str, ...]) -> dict[str, Any]:
    """The stored data with the fields an update set; null is refused for ``not_null`` fields."""
    merged = dict(row.data)
    dumped = changes.model_dump(mode="json")
    for field in changes.model_fields_set:
        if dumped[field] is None and field in not_null:
            raise refused(field, "must not be null")
        merged[field] = dumped[field]
    return merged


def require_ref(tx: Tx, workspace: str, kind: str, entity_id: str, field: str, what: str) -> Row:
    """The entity a field refers to, or a 422 naming the field."""
    row = tx.get(workspace, kind, entity_id)
    if row is None:
        raise refused(field, f"there is no {what} {entity_id} in this workspace", code="unknown_reference")
    return row


def require_fields(data: dict[str, Any], fields: tuple[str, ...]) -> None:
    """Refuse null for fields that must keep a value."""
    for field in fields:
        if data.get(field) is None:
            raise refused(field, "must not be null")


def owned_secret_key(entity_id: str, purpose: str) -> str:
    """Where the platform keeps a secret value it stored on an entity's behalf."""
    return f"{entity_id}:{purpose}"
