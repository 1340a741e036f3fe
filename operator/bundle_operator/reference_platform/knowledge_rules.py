"""Knowledge sets: named collections of sources that agents refer to by id.

A set's sources are entries under it (see ``knowledge_sources``); every source write moves the
set to a new revision, so a client that compares revisions sees it. Credentials given on a source
are stored as secrets the set owns; a secret no source uses any more is deleted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr

from bundle_operator.platform import kinds
from bundle_operator.platform.models import KnowledgeSetUpdate
from bundle_operator.reference_platform import cron
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored, merge_changes
from bundle_operator.reference_platform.knowledge_sources import credential_ids, source_view, sources_of
from bundle_operator.reference_platform.problems import refused
from bundle_operator.reference_platform.secret_store import delete_owned_secrets, store_owned_secret
from bundle_operator.reference_platform.storage import Row, Tx


class KnowledgeSetRules(KindRules):
    """Sets: agents hold them; a set shows its sources, and deleting it deletes them."""

    kind = kinds.KNOWLEDGE_SETS
    held_by = (kinds.AGENTS.path,)

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, KnowledgeSetUpdate)
        data = merge_changes(row, prepared, ("name",))
        for field in ("description", "data_description"):
            data[field] = data[field] or ""  # as for an agent's texts, null clears a description
        return data, data["name"]

    def after_delete(self, tx: Tx, ctx: Context, workspace: str, row: Row) -> None:
        # The sources went with the set (they are its entries); their credentials go now.
        delete_owned_secrets(tx, workspace, row.id)

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        return row.public() | {"sources": [source_view(source) for source in sources_of(tx, row.id)]}


def check_sync_schedule(schedule: str | None) -> None:
    """Refuse a sync schedule the platform's scheduler would not take, as for a cron trigger."""
    if schedule is None:
        return
    try:
        parsed = cron.parse_cron(schedule)
    except cron.CronError as exc:
        raise refused("sync_schedule", str(exc), code="invalid_schedule") from None
    if cron.next_run(parsed, cron.parse_timezone("UTC"), datetime.now(UTC)) is None:
        raise refused("sync_schedule", "the schedule never fires", code="invalid_schedule")


def store_credentials(
    tx: Tx,
    workspace: str,
    knowledge_set: Row,
    label: str,
    given: dict[str, SecretStr] | None,
    before: Row | None,
) -> dict[str, str]:
    """The secret ids of a source's credentials: those stored before when none are given, else
    the given values (one equal to the value stored under its name keeps that secret)."""
    stored: dict[str, str] = dict(before.data["credentials"]) if before is not None else {}
    if given is None:
        return stored
    ids: dict[str, str] = {}
    for name, value in given.items():
        plain = value.get_secret_value()
        earlier = stored.get(name)
        if earlier is not None and tx.secret(earlier) == plain:
            ids[name] = earlier  # an unchanged value keeps its id, so a re-apply changes nothing
        else:
            secret_name = f"{knowledge_set.name} {label} {name}"
            ids[name] = store_owned_secret(tx, workspace, knowledge_set.id, secret_name, plain)
    return ids


def after_source_write(tx: Tx, workspace: str, knowledge_set: Row) -> None:
    """Delete the credentials no source of the set uses now, and move the set to a new revision."""
    delete_owned_secrets(tx, workspace, knowledge_set.id, keep=credential_ids(tx, knowledge_set.id))
    tx.update(knowledge_set, knowledge_set.data)
