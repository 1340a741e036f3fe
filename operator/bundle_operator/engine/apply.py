"""Install or update all-or-nothing by compensation.

``apply`` carries a plan (plan.py) out level by level, in the kinds' install order (kinds/),
creates within a level concurrently; when anything fails, everything this run created is deleted
again, newest first, and what it updated is put back, and the original error is raised.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bundle_operator.engine import artifacts
from bundle_operator.engine.artifacts import ArtifactUnavailable
from bundle_operator.engine.entities import (
    create_entity,
    planned_creates,
    remove_entity,
    restore_entity,
    update_entity,
)
from bundle_operator.engine.kinds import ALL, BY_NAME
from bundle_operator.engine.plan import Plan, Planned
from bundle_operator.engine.preview import EntityPlan, Preview
from bundle_operator.engine.record import (
    JournalEntry,
    Part,
    Record,
    RecordedEntity,
    primary_first,
)
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform.errors import PlatformError
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


@dataclass
class ApplyResult:
    """What an install or update did."""

    preview: Preview
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    calls: int = 0
    # The live state of the platform entities right after the run, from the plan's snapshot and
    # the platform's answers to the run's writes (the gateway's contents excepted).
    snapshot: Snapshot | None = None


class Blocked(Exception):
    """Analyze found something that blocks: nothing was written."""

    def __init__(self, preview: Preview) -> None:
        codes = sorted({str(i.code) for i in preview.issues if i.blocking})
        super().__init__(f"the install is blocked: {', '.join(codes)}")
        self.preview = preview


BUNDLE_INVALID = "bundle_invalid"
BUNDLE_INSTALL_FAILED = "bundle_install_failed"


class PersistFailed(Exception):
    """The record could not be stored. The run stops where it is, as a crash would, and rolls
    nothing back: a rollback would delete entities whose deletion the store could not record
    either. The next run resumes from what the store holds."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class InstallFailed(Exception):
    """A platform write failed and the run was rolled back; ``cause`` is the original error.

    ``entity`` is the bundle entity (``kind:key``) whose write failed, when one did;
    ``rolled_back`` what the rollback deleted (``kind:key (collection/id)``, newest first) and
    ``rollback_failures`` what it could not delete (``collection/id``, kept as leftovers that the
    next run deletes). ``code`` tells an invalid bundle or setup value (the platform refused an
    entity by its rules, 422) from a step that failed for another reason.
    """

    def __init__(
        self,
        cause: BaseException,
        rollback_failures: list[str],
        entity: str | None = None,
        rolled_back: list[str] | None = None,
    ) -> None:
        self.cause = cause
        self.rollback_failures = rollback_failures
        self.entity = entity
        self.rolled_back = rolled_back or []
        super().__init__(self.detail)

    @property
    def code(self) -> str:
        """``bundle_invalid`` when the platform refused what the bundle asked for (or the request
        could not even be built from it), else ``bundle_install_failed``."""
        if isinstance(self.cause, ValidationError):
            return BUNDLE_INVALID
        if isinstance(self.cause, PlatformError) and self.cause.status == 422:
            return BUNDLE_INVALID
        return BUNDLE_INSTALL_FAILED

    @property
    def fields(self) -> list[str]:
        """The platform's names of the fields it refused (from the problem's ``errors``)."""
        if isinstance(self.cause, PlatformError):
            return [e.field for e in self.cause.errors]
        if isinstance(self.cause, ValidationError):
            return list(dict.fromkeys(_loc(e["loc"]) for e in self.cause.errors()))
        return [str(f) for f in getattr(self.cause, "fields", [])]

    @property
    def detail(self) -> str:
        """What went wrong, never quoting a value: the platform's problem detail, or for a request
        the API models refused before it was sent, each field with the rule it broke."""
        cause = self.cause
        if isinstance(cause, PlatformError | ArtifactUnavailable):
            return str(cause)  # an archive's message names its digest and why, never a value
        if isinstance(cause, ValidationError):
            # str(ValidationError) repeats the input, which may be a secret: only the rules.
            rules = dict.fromkeys(f"{_loc(e['loc'])}: {e['msg']}" for e in cause.errors())
            return f"the platform's API does not take this value ({'; '.join(rules)})"
        return type(cause).__name__


_UNION_TAGS = frozenset({"str", "constrained-str", "int", "float", "bool", "SecretRef"})


def _loc(loc: tuple[int | str, ...]) -> str:
    # Union members show up in a location as their type names ("constrained-str"): not fields.
    return ".".join(str(part) for part in loc if part not in _UNION_TAGS)


async def apply(platform: PlatformAPI, planned: Plan, record: Record, persist: Persist) -> ApplyResult:
    """Carry ``planned`` out: install or update to the bundle, all or nothing.

    Raises Blocked (nothing written) for a plan that blocks, InstallFailed (rolled back) when a
    write fails, PersistFailed when the record cannot be stored (the next run resumes).
    """
    if planned.inputs is None or planned.preview.blocking:
        raise Blocked(planned.preview)
    if not planned.writes():
        # A re-run with nothing to write writes nothing, not even the record.
        result = ApplyResult(planned.preview, reused=[i.desired.entity for i in planned.items])
        result.calls = planned.snapshot.calls
        result.snapshot = planned.snapshot
        return result
    run = _Run(planned, record, await _start(platform, planned, record, GroupCommit(persist)))
    await delete_leftovers(run.writer)
    try:
        # Creates first, level by level: until every create has worked, nothing that already
        # existed has been touched, so a rollback only has to delete.
        for kind in ALL:
            await run.create_level(planned.settle(kind, run.ids))
        await run.update_levels()
    except BaseException as exc:
        if isinstance(exc, PersistFailed):
            raise
        await run.roll_back(exc)
        raise
    await run.remove()
    await run.retire()
    await run.commit()
    return run.result


async def _start(platform: PlatformAPI, planned: Plan, record: Record, persist: GroupCommit) -> Writer:
    """The run's writer, with every create of the run journaled in the same write that starts it.

    A run interrupted with other inputs cannot have its creates replayed: they are undone first.
    """
    if record.journal and record.inflight_fingerprint != planned.fingerprint:
        await roll_back_journal(writer_for(platform, record, persist, planned, record.inflight_attempt or 0))
    starting = record.inflight_fingerprint != planned.fingerprint
    if starting:
        record.attempt += 1
        record.inflight_fingerprint = planned.fingerprint
        record.inflight_attempt = record.attempt
    writer = writer_for(platform, record, persist, planned, record.inflight_attempt or record.attempt)
    ahead = [item.desired for item in planned.items if item.action == "CREATE"]
    if writer.journal_ahead(planned_creates(ahead)) or starting:
        await persist(record)
    return writer


@dataclass
class _Run:
    """One run's progress: what it created, updated and must undo if it fails."""

    planned: Plan
    record: Record
    writer: Writer
    result: ApplyResult = field(init=False)
    ids: dict[str, str] = field(init=False)
    before: list[RecordedEntity] = field(init=False)
    entities: dict[str, RecordedEntity] = field(init=False)
    superseded: list[Planned] = field(default_factory=list)
    updates: list[Planned] = field(default_factory=list)
    undo: list[tuple[dict[str, Any], RecordedEntity, dict[str, Any]]] = field(default_factory=list)
    failing: str | None = None  # the bundle entity whose write failed

    def __post_init__(self) -> None:
        self.result = ApplyResult(self.planned.preview, calls=self.planned.snapshot.calls)
        self.ids = dict(self.planned.bound)
        self.before = list(self.record.entities)
        self.entities = {r.entity: r for r in self.record.entities}

    async def create_level(self, decided: list[Planned]) -> None:
        """Create one level's new entities at once; note its ids, updates and reuses."""
        creates = [item for item in decided if item.action == "CREATE"]
        outcomes = await asyncio.gather(
            *(create_entity(self.writer, i.desired) for i in creates), return_exceptions=True
        )
        self._raise_first(creates, outcomes)
        for item, outcome in zip(creates, outcomes, strict=True):
            assert isinstance(outcome, RecordedEntity)
            self.entities[item.desired.entity] = outcome
            self.result.created.append(item.desired.entity)
            if item.recorded is not None:
                self.superseded.append(item)  # what is left of the old one goes once the run succeeds
            if item.kept:
                self.result.kept.append(item.desired.entity)  # the old one, edited, stays on the platform
        for item in decided:
            entity = item.desired.entity
            self.ids[entity] = self.entities[entity].primary_id or ""
            if item.action == "UPDATE":
                self.updates.append(item)
            elif item.action == "REUSE":
                self.result.reused.append(entity)

    async def update_levels(self) -> None:
        """Then the updates, level by level; each is undone if a later write fails."""
        for kind in ALL:
            batch = [item for item in self.updates if item.desired.kind == kind.name]
            outcomes = await asyncio.gather(*(self._update(item) for item in batch), return_exceptions=True)
            for item, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, RecordedEntity):
                    assert item.live is not None and item.merge is not None
                    self.undo.append((item.live, outcome, item.merge.merged))
                    self.entities[item.desired.entity] = outcome
            self._raise_first(batch, outcomes)
        for item in self.updates:
            self.result.updated.append(item.desired.entity)
            if item.merge is not None and item.merge.conflicts:
                self.result.conflicts[item.desired.entity] = item.merge.conflicts

    async def _update(self, item: Planned) -> RecordedEntity:
        assert item.recorded is not None and item.merge is not None and item.live is not None
        return await update_entity(self.writer, item.recorded, item.desired, item.merge.merged, item.live)

    def _raise_first(self, items: list[Planned], outcomes: list[Any]) -> None:
        """Raise what the first item of a concurrent batch whose write failed raised."""
        for item, outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                self.failing = item.desired.entity
                raise outcome

    async def roll_back(self, exc: BaseException) -> None:
        """Put back what was updated, delete what was created; raise InstallFailed for a failure."""
        for live, written, merged in reversed(self.undo):
            await _restore(self.writer, live, written, merged)
        self.record.entities = self.before
        rolled_back: list[str] = []
        failures = await roll_back_journal(self.writer, rolled_back)
        self.result.calls += self.writer.calls
        if isinstance(exc, Exception):
            entity = getattr(exc, "entity", None) or self.failing
            raise InstallFailed(exc, failures, entity, rolled_back) from exc

    async def remove(self) -> None:
        """Removals last. An entity whose delete fails (in use by something kept, or the platform
        refuses) stays recorded and owned, and the next run tries again."""
        for removal in self.planned.removals:
            entity = removal.recorded.entity
            if removal.delete and not await remove_entity(self.writer, removal.recorded):
                self.result.deleted.append(entity)
                self.entities.pop(entity, None)
                continue
            self.result.kept.append(entity)
            if not removal.delete:
                self.entities.pop(entity, None)

    async def retire(self) -> None:
        """What the run stopped using (the parts of a re-created entity, secrets an update dropped)
        goes last; a part that will not go stays owned as a leftover."""
        retired = [
            (part, item.desired.entity)
            for item in self.superseded
            if item.recorded is not None
            for part in primary_first(item.recorded.parts)
            # A gone primary needs no delete; an archived agent stays archived; a replaced one goes
            # unless it was edited (then it is left to whoever edited it).
            if part.role != "primary" or (item.replaces and not item.kept)
        ]
        for part, owner in [*retired, *self.writer.retired]:
            if await self.writer.failed_to_delete(part, owner):
                self.record.leftovers.append(part)
        for kind in ALL:
            await kind.finish(self.writer)
        for item in self.superseded:
            if item.recorded is not None:
                BY_NAME[item.desired.kind].superseded(self.record, item.recorded, self.planned.snapshot)

    async def commit(self) -> None:
        """Record the run as done, and report the ids it ended with."""
        record, planned = self.record, self.planned
        record.entities = sorted(self.entities.values(), key=lambda e: e.seq)
        record.journal = []
        record.inflight_fingerprint = None
        record.inflight_attempt = None
        assert planned.inputs is not None
        record.bundle_name = planned.inputs.bundle.name
        record.bundle_version = planned.inputs.bundle.version
        record.digest = planned.digest
        await self.writer.persist(record)
        self.result.calls += self.writer.calls
        self.result.snapshot = _after(planned.snapshot, self.writer, record)
        self.result.preview = Preview(
            planned.preview.bundle,
            [
                EntityPlan(p.kind, p.key, p.action, p.reason, self.ids.get(p.entity) or p.id)
                for p in planned.preview.entities
            ],
            planned.preview.issues,
        )


class GroupCommit:
    """Persists one record for concurrent writers, one write at a time; a caller whose change a
    write that started after it already carried does not write again (the record is one object,
    serialized as each write starts)."""

    def __init__(self, persist: Persist) -> None:
        self._persist = persist
        self._lock = asyncio.Lock()
        self._changes = 0
        self._stored = 0

    async def __call__(self, record: Record) -> None:
        self._changes += 1
        mine = self._changes
        async with self._lock:
            if self._stored >= mine:
                return
            upto = self._changes
            try:
                await self._persist(record)
            except Exception as exc:
                raise PersistFailed(exc) from exc
            self._stored = upto


def _after(before: Snapshot, writer: Writer, record: Record) -> Snapshot | None:
    """The plan's snapshot with the run's writes and deletes applied; None when a recorded entity
    has contents the writes' answers do not show (a gateway's): then only a read tells."""
    if any(BY_NAME[r.kind].contents_reads for r in record.entities):
        return None
    entities = {path: dict(items) for path, items in before.entities.items()}
    for path, written in writer.written.items():
        entities.setdefault(path, {}).update(written)
    for path, entity_id in writer.gone:
        entities.get(path, {}).pop(entity_id, None)
    return Snapshot(entities=entities)


async def _restore(
    writer: Writer, live: dict[str, Any], written: RecordedEntity, merged: dict[str, Any]
) -> None:
    """Put an updated entity back as it was live before the run (secret values cannot be put back)."""
    try:
        await restore_entity(writer, written, live, merged)
    except Exception as exc:  # a rollback keeps going whatever one restore does
        log.warning("rollback: could not restore %s: %s", written.entity, type(exc).__name__)


async def resolve_unconfirmed(writer: Writer) -> None:
    """Look up the creates a rolled-back run could not confirm, and delete those that landed."""
    record = writer.record
    still: list[JournalEntry] = []
    for entry in record.unresolved:
        try:
            found = await writer.platform.find_by_idempotency_key(writer.workspace, entry.idempotency_key)
        except PlatformError:
            still.append(entry)
            continue
        if found is None or not found.exists:
            continue
        if await writer.failed_to_delete(Part(role=entry.role, path=entry.path, id=found.id), entry.entity):
            still.append(entry)
    if still != record.unresolved:
        record.unresolved = still
        await writer.persist(record)


async def delete_leftovers(writer: Writer) -> None:
    """Retry deleting parts an earlier run could not delete, and resolve unconfirmed creates."""
    record = writer.record
    if record.unresolved:
        await resolve_unconfirmed(writer)
    remaining = []
    for part in record.leftovers:
        if await writer.failed_to_delete(part, "an earlier run"):
            remaining.append(part)
    if remaining != record.leftovers:
        record.leftovers = remaining
        await writer.persist(record)


def writer_for(
    platform: PlatformAPI, record: Record, persist: Persist, planned: Plan, attempt: int
) -> Writer:
    """A writer for a planned run, at the revisions the plan read."""
    assert planned.inputs is not None
    writer = Writer(
        platform, planned.workspace, record, persist, planned.fingerprint, attempt, planned.inputs.bundle.name
    )
    writer.revisions = {
        i: e.revision for items in planned.snapshot.entities.values() for i, e in items.items()
    }
    writer.artifact_files = planned.options.artifacts
    for kind in ALL:
        kind.begin(writer, planned.snapshot)
    return writer


async def roll_back_journal(writer: Writer, deleted: list[str] | None = None) -> list[str]:
    """Delete everything the journal says this run created, newest first; replay pending creates
    first so an entity created behind a lost response is found and deleted too.

    Returns what could not be deleted (``collection/id``); ``deleted``, when given, is extended
    with what was (``kind:key (collection/id)``)."""
    record = writer.record
    for entry in list(record.journal):
        if entry.state != "pending":
            continue
        if entry.idempotency_key in writer.ahead and entry.idempotency_key not in writer.sent:
            entry.state = "deleted"  # journaled ahead by this run and never sent: nothing to undo
            continue
        if entry.path == artifacts.PATH:
            # An upload is named by its digest, not found by key: delete it (the platform keeps it
            # while anything runs from it, and a missing one is already undone).
            entry.state, entry.seq = "created", record.next_seq()
            continue
        # Did the create land? Ask the platform by idempotency key: that works after a crash too,
        # when the request body is gone with the process that built it.
        try:
            found = await writer.platform.find_by_idempotency_key(writer.workspace, entry.idempotency_key)
        except PlatformError:
            found = None
            if entry.idempotency_key in writer.pending_bodies:
                # Cannot ask: replay the create itself, which returns the entity if it landed.
                kind, body = writer.pending_bodies[entry.idempotency_key]
                try:
                    entity = await writer.platform.create(
                        writer.workspace, kind, body, idempotency_key=entry.idempotency_key
                    )
                    entry.id, entry.state = entity.id, "created"
                    entry.seq = record.next_seq()
                except PlatformError:
                    pass
            continue
        if found is not None and found.exists:
            entry.id, entry.state = found.id, "created"
            entry.seq = record.next_seq()
        else:
            entry.state = "deleted"  # never created, or already gone: nothing to undo
    failures: list[str] = []
    for entry in sorted(record.journal, key=lambda e: -e.seq):
        if entry.state != "created" or entry.id is None:
            if entry.state == "pending":
                log.warning(
                    "rollback: %s %s of %s was never confirmed created; the next run looks it up",
                    entry.path,
                    entry.role,
                    entry.entity,
                )
                record.unresolved.append(entry)
            continue
        try:
            failed = await writer.failed_to_delete(
                Part(role=entry.role, path=entry.path, id=entry.id), entry.entity
            )
        except Exception as exc:  # a rollback keeps going whatever one delete does
            log.warning("rollback: could not delete %s %s of %s: %r", entry.path, entry.id, entry.entity, exc)
            failed = True
        if failed:
            # Still ours: kept as a leftover, so the next run (or uninstall) deletes it.
            failures.append(f"{entry.path}/{entry.id}")
            record.leftovers.append(Part(role=entry.role, path=entry.path, id=entry.id))
        else:
            entry.state = "deleted"
            if deleted is not None:
                deleted.append(f"{entry.entity} ({entry.path}/{entry.id})")
    record.journal = []
    record.inflight_fingerprint = None
    record.inflight_attempt = None
    await writer.persist(record)
    return failures
