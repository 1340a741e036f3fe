"""The journaled writes of one run: idempotent creates, updates at the revision read, deletes.

Every create is journaled, with its idempotency key, and persisted before the call, so a crash
leaves enough behind to find the entity again instead of creating a second one. A run journals all
its creates ahead in one write (keys depend only on the run and the entity, not on ids), so an
install writes its record twice, not once per create; a create not journaled ahead (a secret an
update adds) is persisted on its own. Ids are noted in the journal after each call and reach the
store with the next persist: a crash before that costs one lookup by idempotency key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.engine import artifacts
from bundle_operator.engine.artifacts import ArtifactFiles, ArtifactUnavailable
from bundle_operator.engine.record import JournalEntry, Part, Record, idempotency_key
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import Conflict, NotFound, PlatformError
from bundle_operator.platform.kinds import Kind
from bundle_operator.platform.models import ApiModel, Entity
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)

Persist = Callable[[Record], Awaitable[None]]


@dataclass(frozen=True)
class Sending:
    """The setup secret values a write may send, and the sites whose value changed since the record.

    ``values`` None is a restore: secret values are never read back, so none is sent.
    """

    values: dict[str, str] | None
    changed: frozenset[str] = frozenset()


RESTORE = Sending(None)


@dataclass
class Writer:
    """One run's writes: which platform, which record, and how to persist it."""

    platform: PlatformAPI
    workspace: str
    record: Record
    persist: Persist
    fingerprint: str
    attempt: int
    bundle_name: str
    calls: int = 0
    # Bodies of creates still pending, kept in memory so a rollback can replay them to learn ids.
    pending_bodies: dict[str, tuple[Kind[Any, Any, Any], ApiModel]] = field(default_factory=dict)
    # Revisions as the plan read them (entity id -> revision), and as our own updates left them.
    revisions: dict[str, int] = field(default_factory=dict)
    # Parts an update stopped using: deleted once the whole run has worked.
    retired: list[tuple[Part, str]] = field(default_factory=list)
    # The platform's answers to this run's writes (path -> id -> entity) and what it deleted: the
    # live state right after the run, without listing again.
    written: dict[str, dict[str, Entity]] = field(default_factory=dict)
    gone: set[tuple[str, str]] = field(default_factory=set)
    # Keys this writer journaled ahead, and those it sent a create for: one journaled ahead and
    # never sent needs no lookup when the run is rolled back.
    ahead: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)
    # Sources an update dropped (set id, key, entity): deleted once the whole run has worked.
    retired_sources: list[tuple[str, str, str]] = field(default_factory=list)
    # The version each app got from this run (app id -> version), so a rollback archives it.
    app_versions: dict[str, int] = field(default_factory=dict)
    # Revisions of keyed sources as the plan read them, and as our own writes left them
    # ((set id, key) -> revision): a source edited since the plan fails its write (412).
    source_revisions: dict[tuple[str, str], int] = field(default_factory=dict)
    # Where the archives of MCPs made from an .mcpb come from, and this run's deliveries by digest
    # (two MCPs of one archive upload it once).
    artifact_files: ArtifactFiles | None = None
    deliveries: dict[str, asyncio.Task[Part | None]] = field(default_factory=dict)

    def saw(self, kind: Kind[Any, Any, Any], entity: Entity) -> Entity:
        """Keep the platform's answer to a write of ``entity``; returns it."""
        self.written.setdefault(kind.path, {})[entity.id] = entity
        self.gone.discard((kind.path, entity.id))
        return entity

    def journal_ahead(self, creates: list[tuple[str, str, Kind[Any, Any, Any]]]) -> bool:
        """Journal these creates (entity, role, collection) as pending, to be persisted in one write
        before the first of them (their keys do not depend on what earlier creates return).
        Returns whether anything was added."""
        known = {e.idempotency_key for e in self.record.journal}
        added = False
        for entity, role, kind in creates:
            key = idempotency_key(self.record, self.fingerprint, self.attempt, entity, role)
            if key not in known:
                self.record.journal.append(
                    JournalEntry(entity=entity, role=role, path=kind.path, idempotency_key=key)
                )
                known.add(key)
                self.ahead.add(key)
                added = True
        return added

    async def create(self, entity: str, role: str, kind: Kind[Any, Any, Any], body: ApiModel) -> Entity:
        """A journaled, idempotent create (persisted first unless journaled ahead)."""
        key = idempotency_key(self.record, self.fingerprint, self.attempt, entity, role)
        entry = next((e for e in self.record.journal if e.idempotency_key == key), None)
        if entry is None:
            entry = JournalEntry(entity=entity, role=role, path=kind.path, idempotency_key=key)
            self.record.journal.append(entry)
            await self.persist(self.record)
        self.pending_bodies[key] = (kind, body)
        self.sent.add(key)
        self.calls += 1
        created = self.saw(kind, await self.platform.create(self.workspace, kind, body, idempotency_key=key))
        entry.id = created.id
        entry.state = "created"
        entry.seq = self.record.next_seq()
        self.pending_bodies.pop(key, None)
        return created

    async def update(self, kind: Kind[Any, Any, Any], entity_id: str, body: ApiModel) -> Entity:
        """An update at the revision the plan read: an edit made since then fails (412) rather than
        being overwritten unseen."""
        revision = self.revisions.get(entity_id)
        if revision is None:
            self.calls += 1
            revision = (await self.platform.get(self.workspace, kind, entity_id)).revision
        self.calls += 1
        updated = self.saw(
            kind, await self.platform.update(self.workspace, kind, entity_id, body, revision=revision)
        )
        self.revisions[entity_id] = updated.revision
        return updated

    async def deliver_artifact(self, entity: str, digest: str) -> Part | None:
        """Make sure the platform holds the archive ``digest``; the part when this run uploaded it
        (once per digest: other callers get None, and so does an archive already there)."""
        task = self.deliveries.get(digest)
        if task is not None:
            await task
            return None
        task = asyncio.ensure_future(self._deliver(entity, digest))
        self.deliveries[digest] = task
        return await task

    async def _deliver(self, entity: str, digest: str) -> Part | None:
        self.calls += 1
        try:
            await self.platform.get_artifact(self.workspace, digest)
            return None  # there already (another installation's, or a person's): never this run's to delete
        except NotFound:
            pass
        if self.artifact_files is None:
            raise ArtifactUnavailable(digest, "this run was given no archives")
        data = await self.artifact_files.read(digest)
        # Journaled before the upload with its id (the digest), so a rollback after a crash finds it.
        key = idempotency_key(self.record, self.fingerprint, self.attempt, entity, "artifact")
        entry = JournalEntry(
            entity=entity, role="artifact", path=artifacts.PATH, idempotency_key=key, id=digest
        )
        self.record.journal.append(entry)
        await self.persist(self.record)
        self.calls += 1
        await self.platform.put_artifact(self.workspace, digest, data)
        entry.state = "created"
        entry.seq = self.record.next_seq()
        return Part(role="artifact", path=artifacts.PATH, id=digest)

    async def delete(self, path: str, entity_id: str) -> None:
        """Delete one platform entity; already gone counts as done."""
        if path == artifacts.PATH:
            await self._delete_artifact(entity_id)
            return
        kind = kinds.BY_PATH[path]
        self.calls += 1
        with contextlib.suppress(NotFound):
            await self.platform.delete(self.workspace, kind, entity_id)
        self.written.get(path, {}).pop(entity_id, None)
        self.gone.add((path, entity_id))

    async def _delete_artifact(self, digest: str) -> None:
        """Delete an archive this installation uploaded, unless an MCP server spec still runs from it."""
        self.calls += 1
        try:
            await self.platform.delete_artifact(self.workspace, digest)
        except NotFound:
            pass
        except Conflict as exc:
            if exc.code != "artifact_in_use":
                raise
            # Another installation's MCP runs from the same archive: it stays for that one.
            log.info("the archive %s stays: another MCP server spec still uses it", digest)

    async def failed_to_delete(self, part: Part, entity: str) -> bool:
        """Delete one part; log and answer True when the platform would not."""
        try:
            await self.delete(part.path, part.id)
        except PlatformError as exc:
            log.warning("could not delete %s %s of %s: %s", part.path, part.id, entity, exc.code)
            return True
        return False
