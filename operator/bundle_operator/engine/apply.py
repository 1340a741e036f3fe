"""Install or update all-or-nothing by compensation.

``apply`` carries a plan (plan.py) out level by level (MCPs, skills, agents, channels,
automations, policies, gateway), creates within a level concurrently; when anything fails,
everything this run created is deleted again, newest first, and the original error is raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.desired import LEVELS, desired_level
from bundle_operator.engine.plan import Options, Plan, Planned, alias_ids, decide, plan
from bundle_operator.engine.preview import EntityPlan, Preview
from bundle_operator.engine.record import (
    JournalEntry,
    Part,
    Record,
    RecordedEntity,
)
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import PlatformError
from bundle_operator.platform.models import KnowledgeSet
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
        if isinstance(cause, PlatformError):
            return str(cause)
        if isinstance(cause, ValidationError):
            # str(ValidationError) repeats the input, which may be a secret: only the rules.
            rules = dict.fromkeys(f"{_loc(e['loc'])}: {e['msg']}" for e in cause.errors())
            return f"the platform's API does not take this value ({'; '.join(rules)})"
        return type(cause).__name__


_UNION_TAGS = frozenset({"str", "constrained-str", "int", "float", "bool", "SecretRef"})


def _loc(loc: tuple[int | str, ...]) -> str:
    # Union members show up in a location as their type names ("constrained-str"): not fields.
    return ".".join(str(part) for part in loc if part not in _UNION_TAGS)


async def apply(
    platform: PlatformAPI,
    workspace: str,
    parsed: ParsedBundle,
    setup: Mapping[str, object],
    record: Record,
    persist: Persist,
    options: Options | None = None,
    planned: Plan | None = None,
) -> ApplyResult:
    """Install or update to the bundle; raises Blocked (nothing written) or InstallFailed (rolled back).

    ``planned`` is a plan the caller just made with the same arguments; without one, apply plans.
    """
    options = options or Options()
    persist_locked = GroupCommit(persist)

    first = planned or await plan(platform, workspace, parsed, setup, record, options)
    if first.inputs is None or first.preview.blocking:
        raise Blocked(first.preview)
    nothing_to_do = (
        not record.journal
        and not record.leftovers
        and not record.unresolved
        and not first.removals
        and record.digest == parsed.digest
        and all(item.action == "REUSE" for item in first.items)
    )
    if nothing_to_do:
        # A re-run with nothing to write writes nothing, not even the record.
        result = ApplyResult(first.preview, reused=[i.desired.entity for i in first.items])
        result.calls = first.snapshot.calls
        result.snapshot = first.snapshot
        return result
    if record.journal and record.inflight_fingerprint != first.fingerprint:
        # A run was interrupted with other inputs: its creates cannot be replayed, so undo them.
        writer = writer_for(platform, workspace, record, persist_locked, first, record.inflight_attempt or 0)
        await roll_back_journal(writer)
    starting = record.inflight_fingerprint != first.fingerprint
    if starting:
        record.attempt += 1
        record.inflight_fingerprint = first.fingerprint
        record.inflight_attempt = record.attempt
    writer = writer_for(
        platform, workspace, record, persist_locked, first, record.inflight_attempt or record.attempt
    )
    # Every create of the run is journaled in the same write that starts it.
    ahead = [item.desired for item in first.items if item.action == "CREATE"]
    if writer.journal_ahead(ahead) or starting:
        await persist_locked(record)
    result = ApplyResult(first.preview)
    result.calls = first.snapshot.calls
    await delete_leftovers(writer)
    ids: dict[str, str] = dict(first.bound)
    before = list(record.entities)
    entities: dict[str, RecordedEntity] = {r.entity: r for r in record.entities}
    superseded: list[Planned] = []
    updates: list[Planned] = []
    undo: list[tuple[dict[str, Any], RecordedEntity, dict[str, Any]]] = []
    failing: str | None = None  # the bundle entity whose write failed
    try:
        # Creates first, level by level: until every create has worked, nothing that already
        # existed has been touched, so a rollback only has to delete.
        for level in LEVELS:
            alias_ids(ids, first.aliases)
            decided = [
                decide(d, record, first.snapshot, options)
                for d in desired_level(level, first.inputs, ids, first.skipped)
            ]
            creates = [item for item in decided if item.action == "CREATE"]
            outcomes = await asyncio.gather(
                *(writer.create_entity(i.desired) for i in creates), return_exceptions=True
            )
            failed = _first_failure(creates, outcomes)
            if failed is not None:
                failing = failed[0].desired.entity
                raise failed[1]
            for item, outcome in zip(creates, outcomes, strict=True):
                assert isinstance(outcome, RecordedEntity)
                entities[item.desired.entity] = outcome
                result.created.append(item.desired.entity)
                if item.recorded is not None:
                    superseded.append(item)  # what is left of the old one goes once the run succeeds
            for item in decided:
                entity = item.desired.entity
                ids[entity] = entities[entity].primary_id or ""
                if item.action == "UPDATE":
                    updates.append(item)
                elif item.action == "REUSE":
                    result.reused.append(entity)
        # Then updates, level by level; a failure puts back what was updated before deleting creates.
        for level in LEVELS:
            batch = [item for item in updates if item.desired.kind == level]
            outcomes = await asyncio.gather(
                *(_update(writer, item) for item in batch), return_exceptions=True
            )
            for item, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, RecordedEntity):
                    assert item.recorded is not None and item.live is not None and item.merge is not None
                    undo.append((item.live, outcome, item.merge.merged))
                    entities[item.desired.entity] = outcome
            failed = _first_failure(batch, outcomes)
            if failed is not None:
                failing = failed[0].desired.entity
                raise failed[1]
        for item in updates:
            result.updated.append(item.desired.entity)
            if item.merge is not None and item.merge.conflicts:
                result.conflicts[item.desired.entity] = item.merge.conflicts
    except BaseException as exc:
        if isinstance(exc, PersistFailed):
            raise
        for live, written, merged in reversed(undo):
            await _restore(writer, live, written, merged)
        record.entities = before
        rolled_back: list[str] = []
        failures = await roll_back_journal(writer, rolled_back)
        result.calls += writer.calls
        if isinstance(exc, Exception):
            raise InstallFailed(exc, failures, getattr(exc, "entity", None) or failing, rolled_back) from exc
        raise
    # Removals last. An entity whose delete fails (in use by something kept, or the platform
    # refuses) stays recorded and owned, and the next run tries again.
    for removal in first.removals:
        entity = removal.recorded.entity
        if not removal.delete:
            result.kept.append(entity)
            entities.pop(entity, None)
            continue
        if await writer.delete_entity(removal.recorded):
            result.kept.append(entity)
        else:
            result.deleted.append(entity)
            entities.pop(entity, None)
    # What the run stopped using (the parts of a re-created entity, secrets an update dropped)
    # goes last; a part that will not go stays owned as a leftover.
    retired = [
        (part, item.desired.entity)
        for item in superseded
        if item.recorded is not None
        for part in sorted(item.recorded.parts, key=lambda p: (p.role != "primary", p.role != "server"))
        # A gone primary needs no delete; an archived agent stays archived; a replaced one goes.
        if part.role != "primary" or item.replaces
    ]
    for part, owner in [*retired, *writer.retired]:
        if await writer.failed_to_delete(part, owner):
            record.leftovers.append(part)
    await writer.delete_retired_sources()
    for item in superseded:
        # An app archived on the platform and installed again stays the installation's own.
        archived = item.recorded.primary if item.desired.kind == "app" and item.recorded else None
        if archived is not None and first.snapshot.get(archived.path, archived.id) is not None:
            record.keep_archived(archived)
    record.entities = sorted(entities.values(), key=lambda e: e.seq)
    record.journal = []
    record.inflight_fingerprint = None
    record.inflight_attempt = None
    assert parsed.bundle is not None and parsed.digest is not None
    record.bundle_name = parsed.bundle.name
    record.bundle_version = parsed.bundle.version
    record.digest = parsed.digest
    await persist_locked(record)
    result.calls += writer.calls
    result.snapshot = _after(first.snapshot, writer)
    result.preview = Preview(
        first.preview.bundle,
        [
            EntityPlan(p.kind, p.key, p.action, p.reason, ids.get(p.entity) or p.id)
            for p in first.preview.entities
        ],
        first.preview.issues,
    )
    return result


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


def _after(before: Snapshot, writer: Writer) -> Snapshot:
    """The plan's snapshot with the run's writes and deletes applied (the gateway's contents left out)."""
    entities = {path: dict(items) for path, items in before.entities.items()}
    for path, written in writer.written.items():
        entities.setdefault(path, {}).update(written)
    for path, entity_id in writer.gone:
        entities.get(path, {}).pop(entity_id, None)
    return Snapshot(entities=entities)


def _first_failure(items: list[Planned], outcomes: list[Any]) -> tuple[Planned, BaseException] | None:
    """The first item of a concurrent batch whose write raised, with what it raised."""
    for item, outcome in zip(items, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            return item, outcome
    return None


async def _update(writer: Writer, item: Planned) -> RecordedEntity:
    assert item.recorded is not None and item.merge is not None and item.live is not None
    return await writer.update_entity(item.recorded, item.desired, item.merge.merged, item.live)


async def _restore(
    writer: Writer, live: dict[str, Any], written: RecordedEntity, merged: dict[str, Any]
) -> None:
    """Put an updated entity back as it was live before the run (secret values cannot be put back)."""
    try:
        await writer.restore_entity(written, live, merged)
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
    platform: PlatformAPI, workspace: str, record: Record, persist: Persist, planned: Plan, attempt: int
) -> Writer:
    """A writer for a planned run, at the revisions the plan read."""
    assert planned.inputs is not None
    writer = Writer(
        platform, workspace, record, persist, planned.fingerprint, attempt, planned.inputs.bundle.name
    )
    writer.revisions = {
        i: e.revision for items in planned.snapshot.entities.values() for i, e in items.items()
    }
    writer.source_revisions = {
        (entity.id, source.key): source.revision
        for entity in planned.snapshot.entities.get(kinds.KNOWLEDGE_SETS.path, {}).values()
        if isinstance(entity, KnowledgeSet)
        for source in entity.sources
        if source.key is not None
    }
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
