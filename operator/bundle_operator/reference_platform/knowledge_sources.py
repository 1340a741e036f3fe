"""How a knowledge set's sources are stored and shown.

A source is an entry under its set (``parent`` is the set's id): ``name`` holds its key, or is
null for a source a user added themselves. Its credentials are secrets the set owns; the entry
keeps only their ids.
"""

from __future__ import annotations

from typing import Any

from bundle_operator.document.knowledge import ALL_SOURCE_FIELDS
from bundle_operator.platform.models import KnowledgeSourcePut
from bundle_operator.reference_platform.storage import Row, Tx

# The kind of the entries stored under a knowledge set, and its id prefix.
SOURCE = "knowledge-sources"
SOURCE_PREFIX = "src"
MAX_SOURCES = 200


def source_data(body: KnowledgeSourcePut, key: str | None, credentials: dict[str, str]) -> dict[str, Any]:
    """What an entry stores for ``body``: its type's fields as sent, and credential secret ids."""
    dumped = body.model_dump(mode="json", exclude={"credentials"})
    fields = {name: dumped[name] for name in ALL_SOURCE_FIELDS if dumped[name] is not None}
    return {
        "key": key,
        "type": body.type,
        **fields,
        "sync_schedule": body.sync_schedule,
        "credentials": credentials,
    }


def source_view(row: Row) -> dict[str, Any]:
    """A source as the API shows it: every field, null where the type has none."""
    data = row.data
    return {
        "id": row.id,
        "key": data["key"],
        "type": data["type"],
        **{name: data.get(name) for name in ALL_SOURCE_FIELDS},
        "sync_schedule": data.get("sync_schedule"),
        "credentials": dict(data.get("credentials", {})),
        "revision": row.revision,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def sources_of(tx: Tx, set_id: str) -> list[Row]:
    """A set's sources in creation order."""
    return tx.entries(set_id, SOURCE)


def credential_ids(tx: Tx, set_id: str) -> set[str]:
    """The ids of the secrets the set's sources use now."""
    return {ref for source in sources_of(tx, set_id) for ref in source.data["credentials"].values()}
