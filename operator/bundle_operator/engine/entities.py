"""A bundle entity written as a whole: each step asks the entity's kind, and returns what to record."""

from __future__ import annotations

from typing import Any

from bundle_operator.engine.desired import Desired
from bundle_operator.engine.kinds import BY_NAME
from bundle_operator.engine.kinds.base import Write
from bundle_operator.engine.record import RecordedEntity, secret_hash
from bundle_operator.engine.writer import RESTORE, Sending, Writer
from bundle_operator.platform.kinds import Kind


def planned_creates(desired: list[Desired]) -> list[tuple[str, str, Kind[Any, Any, Any]]]:
    """Every platform create these new entities make: (entity, role, collection), in their order."""
    return [(d.entity, role, kind) for d in desired for role, kind in BY_NAME[d.kind].parts(d)]


async def create_entity(writer: Writer, desired: Desired) -> RecordedEntity:
    """Create every platform entity a bundle entity needs; returns what to record."""
    parts = await BY_NAME[desired.kind].create(writer, desired)
    return RecordedEntity(
        kind=desired.kind,
        key=desired.key,
        parts=parts,
        spec=desired.spec,
        secrets={site: secret_hash(writer.record, v) for site, v in desired.secrets.items()},
        seq=writer.record.next_seq(),
    )


async def update_entity(
    writer: Writer, recorded: RecordedEntity, desired: Desired, merged: dict[str, Any], live: dict[str, Any]
) -> RecordedEntity:
    """Write the merged spec where it differs from live, and changed secret values; returns the record.

    The record keeps what the bundle asked for (``desired.spec``), not the merge: a local edit the
    merge kept stays a visible difference, so drift reports it, later merges keep it, and
    uninstall does not take it for unmodified.
    """
    hashes = {site: secret_hash(writer.record, v) for site, v in desired.secrets.items()}
    changed = frozenset(site for site, h in hashes.items() if recorded.secrets.get(site) != h)
    step = Write(recorded, merged, live, Sending(desired.secrets, changed))
    parts = await BY_NAME[recorded.kind].write(writer, step)
    return RecordedEntity(
        kind=recorded.kind, key=recorded.key, parts=parts, spec=desired.spec, secrets=hashes, seq=recorded.seq
    )


async def restore_entity(
    writer: Writer, written: RecordedEntity, live_before: dict[str, Any], merged: dict[str, Any]
) -> None:
    """Put an updated entity back to its live state before the run. Secret values cannot be put back
    (they are never read); a changed one stays, and the old hash in the record makes the next run
    write it again."""
    await BY_NAME[written.kind].write(writer, Write(written, live_before, merged, RESTORE))


async def remove_entity(writer: Writer, recorded: RecordedEntity) -> list[str]:
    """Delete (or archive) every part of a recorded entity; returns the parts that would not go."""
    return await BY_NAME[recorded.kind].remove(writer, recorded)
