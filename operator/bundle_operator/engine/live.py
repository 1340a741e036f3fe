"""The live state of what an installation recorded: read with one list call per collection, and
projected by each entity's kind into the spec form the engine writes, so that live and recorded
compare field by field."""

from __future__ import annotations

from typing import Any

from bundle_operator.engine.kinds import BY_NAME
from bundle_operator.engine.record import Record, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform import kinds
from bundle_operator.platform.protocol import Listed, PlatformAPI


async def read_snapshot(platform: PlatformAPI, workspace: str, record: Record) -> Snapshot:
    """List every collection the record has entities in (one call per collection, pages aside),
    then what those lists do not show of the recorded entities that have more."""
    snapshot = Snapshot()
    # Secrets are never read back (their values are write-only), so they need no list call.
    owned = {part.path for recorded in record.entities for part in recorded.parts}
    paths = sorted((owned | {part.path for part in record.archived}) - {kinds.SECRETS.path})
    for path in paths:
        kind = kinds.BY_PATH.get(path)
        if kind is None:
            continue
        items = await platform.list_all(workspace, kind)
        snapshot.calls += 1
        # Shared lists come with their id map; the snapshot's maps are only read.
        snapshot.entities[path] = items.by_id() if isinstance(items, Listed) else {i.id: i for i in items}
    for recorded in record.entities:
        entity_kind = BY_NAME[recorded.kind]
        found = snapshot.get(entity_kind.collection.path, recorded.primary_id)
        if entity_kind.contents_reads and found is not None:
            snapshot.contents[recorded.entity] = await entity_kind.read_contents(platform, workspace, found)
            snapshot.calls += entity_kind.contents_reads
    return snapshot


def project(recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
    """The live state of a recorded entity in spec form, or None when it is gone (or archived)."""
    return BY_NAME[recorded.kind].project(recorded, snapshot)


def binding_changes(kind: str, spec: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """The binding fields (as JSON Pointers) where ``live`` no longer matches ``spec``."""
    return [f"/{name}" for name in BY_NAME[kind].binding if live.get(name) != spec.get(name)]
