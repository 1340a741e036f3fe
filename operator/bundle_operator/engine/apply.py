"""Analyze against a live platform, then install or update all-or-nothing by compensation.

``plan`` reads (the record, one list per kind) and writes nothing: every entity CREATE, REUSE,
UPDATE or SKIPPED, the three-way merge of each update with its conflicts, the entities the bundle
dropped, the requirements. ``apply`` carries a plan out level by level (MCPs, skills, agents,
channels, automations, policies, gateway), creates within a level concurrently; when anything
fails, everything this run created is deleted again, newest first, and the original error is
raised.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.document.issues import Code, Issue, blocking, warning
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.analyze import analyze_with_values
from bundle_operator.engine.desired import LEVELS, Desired, Inputs, desired_level
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.merge import MergeResult, OnConflict, merge
from bundle_operator.engine.preview import Action, EntityPlan, Preview
from bundle_operator.engine.record import (
    JournalEntry,
    Part,
    Record,
    RecordedEntity,
    deletion_order,
    secret_hash,
)
from bundle_operator.engine.snapshot import Snapshot, project, read_snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import PlatformError
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """How to install: activation, requirement substitutions, and what to do on a conflict."""

    activate: bool = False
    substitutions: Mapping[str, str] = field(default_factory=dict)
    on_conflict: OnConflict = OnConflict.FAIL


@dataclass
class Planned:
    """The decision for one entity, with what it was decided from."""

    desired: Desired
    action: Action
    reason: str | None = None
    recorded: RecordedEntity | None = None
    live: dict[str, Any] | None = None
    merge: MergeResult | None = None
    replaces: bool = False  # a CREATE that replaces a live entity the platform cannot change in place
    blocked: str | None = None  # why this entity cannot be brought to the bundle at all


# Fields the platform cannot change in place: a change replaces the entity, if nobody edited it.
IMMUTABLE: dict[str, tuple[str, ...]] = {
    "policy": ("/type",),
    "skill": ("/source_type",),
    "mcp": ("/server/type",),
}


def _at(spec: Any, pointer: str) -> Any:
    for token in pointer.strip("/").split("/"):
        spec = spec.get(token) if isinstance(spec, dict) else None
    return spec


@dataclass
class Removal:
    """A recorded entity the bundle no longer has: deleted when unmodified, else kept."""

    recorded: RecordedEntity
    delete: bool
    edited_paths: list[str]


@dataclass
class Plan:
    """Everything an install would do, and the preview that reports it."""

    preview: Preview
    items: list[Planned]
    removals: list[Removal]
    inputs: Inputs | None
    snapshot: Snapshot
    fingerprint: str
    drift: dict[str, list[str]] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)


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


class Blocked(Exception):
    """Analyze found something that blocks: nothing was written."""

    def __init__(self, preview: Preview) -> None:
        codes = sorted({str(i.code) for i in preview.issues if i.blocking})
        super().__init__(f"the install is blocked: {', '.join(codes)}")
        self.preview = preview


class InstallFailed(Exception):
    """A platform write failed and the run was rolled back; ``cause`` is the original error."""

    def __init__(self, cause: BaseException, rollback_failures: list[str]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.rollback_failures = rollback_failures


def fingerprint(record: Record, digest: str, setup: Mapping[str, str], options: Options) -> str:
    """A hash of every input of a run; secret values enter only hashed."""
    material = {
        "digest": digest,
        "setup": {k: secret_hash(record, v) for k, v in sorted(setup.items())},
        "activate": options.activate,
        "substitutions": dict(sorted(options.substitutions.items())),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _decide(desired: Desired, record: Record, snapshot: Snapshot, options: Options) -> Planned:
    recorded = record.find(desired.entity)
    if recorded is None:
        return Planned(desired, "CREATE")
    live = project(recorded, snapshot)
    if live is None:
        reason = (
            "the agent it recorded is archived; it is installed again"
            if desired.kind == "agent" and snapshot.get(kinds.AGENTS.path, recorded.primary_id) is not None
            else "the entity it recorded no longer exists; it is created again"
        )
        return Planned(desired, "CREATE", reason, recorded)
    hashes = {site: secret_hash(record, v) for site, v in desired.secrets.items()}
    if desired.spec == recorded.spec and hashes == recorded.secrets:
        return Planned(desired, "REUSE", None, recorded, live)
    immutable = [p for p in IMMUTABLE.get(desired.kind, ()) if _at(recorded.spec, p) != _at(desired.spec, p)]
    if immutable:
        fields = ", ".join(immutable)
        if not changed_paths(recorded.spec, live):
            reason = f"{fields} cannot change in place; it is replaced"
            return Planned(desired, "CREATE", reason, recorded, live, replaces=True)
        blocked = f"{fields} cannot change in place, and the entity was edited since it was installed"
        return Planned(desired, "UPDATE", None, recorded, live, blocked=blocked)
    result = merge(recorded.spec, desired.spec, live, options.on_conflict)
    return Planned(desired, "UPDATE", None, recorded, live, result)


async def plan(
    platform: PlatformAPI,
    workspace: str,
    parsed: ParsedBundle,
    setup: Mapping[str, object],
    record: Record,
    options: Options | None = None,
    snapshot: Snapshot | None = None,
) -> Plan:
    """Analyze with the platform: what an install would do. Writes nothing."""
    options = options or Options()
    offline, values = analyze_with_values(parsed, setup)
    bundle = parsed.bundle
    empty = Snapshot()
    if bundle is None or offline.bundle is None:
        return Plan(offline, [], [], None, empty, "")
    # Requirements are checked against the platform below; the offline note does not apply.
    issues = [i for i in offline.issues if i.code != Code.REQUIREMENT_NOT_CHECKED]
    requirement_issues, stripped = await _requirements(platform, workspace, parsed, options)
    issues += requirement_issues
    skipped = {f"{p.kind}:{p.key}" for p in offline.entities if p.action == "SKIPPED"}
    reasons = {f"{p.kind}:{p.key}": p.reason for p in offline.entities if p.action == "SKIPPED"}
    inputs = Inputs(
        bundle=bundle,
        setup=values,
        secret_fields=frozenset(f.key for f in bundle.setup if f.type == "secret"),
        activate=options.activate,
        substitutions=dict(options.substitutions),
        stripped=frozenset(stripped),
    )
    if snapshot is None:
        snapshot = await read_snapshot(platform, workspace, record) if record.entities else empty
    fp = fingerprint(record, offline.bundle.digest, values, options)
    ids: dict[str, str] = {}
    items: list[Planned] = []
    drift: dict[str, list[str]] = {}
    for level in LEVELS:
        for desired in desired_level(level, inputs, ids, skipped):
            decided = _decide(desired, record, snapshot, options)
            items.append(decided)
            if decided.action != "CREATE" and decided.recorded is not None and decided.recorded.primary_id:
                ids[desired.entity] = decided.recorded.primary_id
            if decided.action == "REUSE" and decided.live is not None and decided.recorded is not None:
                paths = changed_paths(decided.recorded.spec, decided.live)
                if paths:
                    drift[desired.entity] = paths
            if decided.merge is not None and decided.merge.conflicts:
                issues += _conflict_issues(desired.entity, decided.merge.conflicts, options.on_conflict)
            if decided.blocked is not None:
                issues.append(
                    blocking(
                        Code.UPDATE_CONFLICT,
                        f"{desired.entity}: {decided.blocked}; undo the "
                        "local edit or delete the entity to let the bundle replace it",
                        entity=desired.entity,
                    )
                )
    wanted = {p.desired.entity for p in items}
    removals: list[Removal] = []
    for recorded in deletion_order(record.entities):
        if recorded.entity in wanted:
            continue
        live = project(recorded, snapshot)
        if live is None:
            # Gone already, but its other parts (server spec, secrets) are still ours to delete,
            # and the record must let go of it.
            removals.append(Removal(recorded, True, []))
            continue
        edited = changed_paths(recorded.spec, live)
        removals.append(Removal(recorded, not edited, edited))
        if edited:
            issues.append(
                warning(
                    Code.ENTITY_KEPT,
                    f"{recorded.entity} is no longer in the bundle but was edited "
                    f"since it was installed ({', '.join(edited[:5])}); it is kept",
                    entity=recorded.entity,
                )
            )
        else:
            issues.append(
                warning(
                    Code.ENTITY_REMOVED,
                    f"{recorded.entity} is no longer in the bundle; it will be deleted",
                    entity=recorded.entity,
                )
            )
    plans = [
        EntityPlan(p.desired.kind, p.desired.key, p.action, p.reason, ids.get(p.desired.entity))
        for p in items
    ]
    by_entity = {p.entity for p in plans}
    plans += [
        EntityPlan(entity.split(":", 1)[0], entity.split(":", 1)[1], "SKIPPED", reasons[entity])
        for entity in reasons
        if entity not in by_entity
    ]
    plans.sort(key=lambda p: LEVELS.index(p.kind))
    preview = Preview(offline.bundle, plans, issues)
    return Plan(preview, items, removals, inputs, snapshot, fp, drift, skipped)


def _conflict_issues(entity: str, conflicts: list[str], mode: OnConflict) -> list[Issue]:
    if mode is OnConflict.FAIL:
        return [
            blocking(
                Code.UPDATE_CONFLICT,
                f"{entity}: {path} was changed on the platform and in the bundle; "
                "set onConflict to KeepMine or TakeTheirs, or undo one side",
                path,
                entity,
            )
            for path in conflicts
        ]
    side = "the platform's value" if mode is OnConflict.KEEP_MINE else "the bundle's value"
    return [
        warning(Code.UPDATE_CONFLICT, f"{entity}: {path} changed on both sides; {side} is kept", path, entity)
        for path in conflicts
    ]


async def _requirements(
    platform: PlatformAPI, workspace: str, parsed: ParsedBundle, options: Options
) -> tuple[list[Issue], set[str]]:
    bundle = parsed.bundle
    assert bundle is not None
    issues: list[Issue] = []
    stripped: set[str] = set()
    server_names: set[str] | None = None
    for index, requirement in enumerate(bundle.requires):
        ref = f"{requirement.kind}:{requirement.ref}"
        pointer = f"/requires/{index}"
        if ref in options.substitutions:
            continue
        if requirement.policy == "substitute":
            issues.append(
                blocking(
                    Code.SUBSTITUTION_REQUIRED,
                    f"requirement {ref} must be substituted: give a substitution for '{ref}'",
                    pointer,
                )
            )
            continue
        present: bool | None = None
        if requirement.kind == "tool":
            if any(m.key == requirement.ref for m in bundle.mcps):
                present = True
            else:
                if server_names is None:
                    servers = await platform.list_all(workspace, kinds.MCP_SERVERS)
                    server_names = {s.name for s in servers}
                present = requirement.ref in server_names
        if present is None:
            issues.append(
                warning(
                    Code.REQUIREMENT_NOT_VERIFIED,
                    f"requirement {ref} cannot be checked against this platform; it is assumed present",
                    pointer,
                )
            )
        elif not present and requirement.policy == "block":
            issues.append(
                blocking(Code.REQUIREMENT_MISSING, f"requirement {ref} is missing on the platform", pointer)
            )
        elif not present:
            stripped.add(ref)
            issues.append(
                warning(
                    Code.REQUIREMENT_STRIPPED,
                    f"requirement {ref} is missing; references to it are dropped",
                    pointer,
                )
            )
    return [i.with_line(parsed.source_map.line_of(i.path)) for i in issues], stripped


async def apply(
    platform: PlatformAPI,
    workspace: str,
    parsed: ParsedBundle,
    setup: Mapping[str, object],
    record: Record,
    persist: Persist,
    options: Options | None = None,
) -> ApplyResult:
    """Install or update to the bundle; raises Blocked (nothing written) or InstallFailed (rolled back)."""
    options = options or Options()
    lock = asyncio.Lock()

    async def persist_locked(current: Record) -> None:
        async with lock:
            await persist(current)

    first = await plan(platform, workspace, parsed, setup, record, options)
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
        return result
    if record.journal and record.inflight_fingerprint != first.fingerprint:
        # A run was interrupted with other inputs: its creates cannot be replayed, so undo them.
        writer = writer_for(platform, workspace, record, persist_locked, first, record.inflight_attempt or 0)
        await roll_back_journal(writer)
    if record.inflight_fingerprint != first.fingerprint:
        record.attempt += 1
        record.inflight_fingerprint = first.fingerprint
        record.inflight_attempt = record.attempt
        await persist_locked(record)
    writer = writer_for(
        platform, workspace, record, persist_locked, first, record.inflight_attempt or record.attempt
    )
    result = ApplyResult(first.preview)
    result.calls = first.snapshot.calls
    await delete_leftovers(writer)
    ids: dict[str, str] = {}
    before = list(record.entities)
    entities: dict[str, RecordedEntity] = {r.entity: r for r in record.entities}
    superseded: list[Planned] = []
    updates: list[Planned] = []
    undo: list[tuple[dict[str, Any], RecordedEntity, dict[str, Any]]] = []
    try:
        # Creates first, level by level: until every create has worked, nothing that already
        # existed has been touched, so a rollback only has to delete.
        for level in LEVELS:
            decided = [
                _decide(d, record, first.snapshot, options)
                for d in desired_level(level, first.inputs, ids, first.skipped)
            ]
            creates = [item for item in decided if item.action == "CREATE"]
            outcomes = await asyncio.gather(
                *(writer.create_entity(i.desired) for i in creates), return_exceptions=True
            )
            failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
            if failure is not None:
                raise failure
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
            failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
            if failure is not None:
                raise failure
        for item in updates:
            result.updated.append(item.desired.entity)
            if item.merge is not None and item.merge.conflicts:
                result.conflicts[item.desired.entity] = item.merge.conflicts
    except BaseException as exc:
        for live, written, merged in reversed(undo):
            await _restore(writer, live, written, merged)
        record.entities = before
        failures = await roll_back_journal(writer)
        result.calls += writer.calls
        if isinstance(exc, Exception):
            raise InstallFailed(exc, failures) from exc
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
    result.preview = Preview(
        first.preview.bundle,
        [
            EntityPlan(p.kind, p.key, p.action, p.reason, ids.get(p.entity) or p.id)
            for p in first.preview.entities
        ],
        first.preview.issues,
    )
    return result


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
    return writer


async def roll_back_journal(writer: Writer) -> list[str]:
    """Delete everything the journal says this run created, newest first; replay pending creates
    first so an entity created behind a lost response is found and deleted too."""
    record = writer.record
    for entry in list(record.journal):
        if entry.state != "pending":
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
    record.journal = []
    record.inflight_fingerprint = None
    record.inflight_attempt = None
    await writer.persist(record)
    return failures
