"""Analyze against a live platform: what a run would do, and nothing written.

``plan`` reads (the record, one list per kind) and decides every entity CREATE, REUSE, UPDATE or
SKIPPED, with the three-way merge of each update and its conflicts, the entities the bundle
dropped and the requirements. ``apply`` (apply.py) carries a plan out.
"""

from __future__ import annotations

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
from bundle_operator.engine.knowledge import (
    archived_app_holders,
    credentials_lost,
    settle_credentials,
    without_retyped_sources,
)
from bundle_operator.engine.merge import MergeResult, OnConflict, merge
from bundle_operator.engine.preview import Action, EntityPlan, Preview
from bundle_operator.engine.record import (
    Record,
    RecordedEntity,
    deletion_order,
    secret_hash,
)
from bundle_operator.engine.requirements import check_requirements
from bundle_operator.engine.snapshot import Snapshot, binding_changes, own_sources, project, read_snapshot
from bundle_operator.platform import kinds
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
    rebound: list[str] = field(default_factory=list)  # binding paths changed on the platform


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
    aliases: dict[str, str] = field(default_factory=dict)  # see Requirements
    bound: dict[str, str] = field(default_factory=dict)


def fingerprint(record: Record, digest: str, setup: Mapping[str, str], options: Options) -> str:
    """A hash of every input of a run; secret values enter only hashed."""
    material = {
        "digest": digest,
        "setup": {k: secret_hash(record, v) for k, v in sorted(setup.items())},
        "activate": options.activate,
        "substitutions": dict(sorted(options.substitutions.items())),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def decide(desired: Desired, record: Record, snapshot: Snapshot, options: Options) -> Planned:
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
    # A trigger whose name or agent changed on the platform is not the one this install bound:
    # reusing it as it is would leave it running someone else's agent. Its binding is an update
    # the bundle must win or a conflict for the user to settle, never a local edit that survives.
    rebound = binding_changes(desired.kind, recorded.spec, live)
    lost = desired.kind == "knowledge_set" and credentials_lost(recorded.spec, live)
    if desired.spec == recorded.spec and hashes == recorded.secrets and not rebound and not lost:
        return Planned(desired, "REUSE", None, recorded, live)
    immutable = [p for p in IMMUTABLE.get(desired.kind, ()) if _at(recorded.spec, p) != _at(desired.spec, p)]
    if immutable:
        fields = ", ".join(immutable)
        if not changed_paths(recorded.spec, live):
            reason = f"{fields} cannot change in place; it is replaced"
            return Planned(desired, "CREATE", reason, recorded, live, replaces=True)
        blocked = f"{fields} cannot change in place, and the entity was edited since it was installed"
        return Planned(desired, "UPDATE", None, recorded, live, blocked=blocked)
    base = recorded.spec
    if rebound:
        # Without a base for the binding fields, a changed binding meets the bundle's as a conflict.
        base = {k: v for k, v in recorded.spec.items() if f"/{k}" not in rebound}
    if desired.kind == "knowledge_set":
        base = without_retyped_sources(base, desired.spec, live)
    result = merge(base, desired.spec, live, options.on_conflict)
    if desired.kind == "knowledge_set":
        changed = {site for site, value in hashes.items() if recorded.secrets.get(site) != value}
        unsettled = settle_credentials(
            recorded.spec, desired.spec, live, result, changed, options.on_conflict
        )
        return Planned(desired, "UPDATE", None, recorded, live, result, blocked=unsettled)
    return Planned(desired, "UPDATE", None, recorded, live, result, rebound=rebound)


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
    offline, values = analyze_with_values(parsed, setup, options.substitutions)
    bundle = parsed.bundle
    empty = Snapshot()
    if bundle is None or offline.bundle is None:
        return Plan(offline, [], [], None, empty, "")
    # Requirements are checked against the platform below; the offline note does not apply.
    issues = [i for i in offline.issues if i.code != Code.REQUIREMENT_NOT_CHECKED]
    skipped = {f"{p.kind}:{p.key}" for p in offline.entities if p.action == "SKIPPED"}
    reasons = {f"{p.kind}:{p.key}": p.reason for p in offline.entities if p.action == "SKIPPED"}
    checked = await check_requirements(platform, workspace, parsed, options.substitutions, skipped)
    issues += checked.issues
    if checked.replaced:
        # An MCP a tool substitution replaces is not installed; what used it uses the substitute.
        bundle = bundle.model_copy(
            update={"mcps": [m for m in bundle.mcps if f"mcp:{m.key}" not in checked.replaced]}
        )
        skipped -= set(checked.replaced)
        reasons.update(checked.replaced)
    inputs = Inputs(
        bundle=bundle,
        setup=values,
        secret_fields=frozenset(f.key for f in bundle.setup if f.type == "secret"),
        activate=options.activate,
        substitutions=dict(options.substitutions),
        stripped=frozenset(checked.stripped),
    )
    if snapshot is None:
        owned = record.entities or record.archived
        snapshot = await read_snapshot(platform, workspace, record) if owned else empty
    fp = fingerprint(record, offline.bundle.digest, values, options)
    ids: dict[str, str] = dict(checked.bound)
    items: list[Planned] = []
    drift: dict[str, list[str]] = {}
    for level in LEVELS:
        alias_ids(ids, checked.aliases)
        for desired in desired_level(level, inputs, ids, skipped):
            decided = decide(desired, record, snapshot, options)
            items.append(decided)
            if decided.action != "CREATE" and decided.recorded is not None and decided.recorded.primary_id:
                ids[desired.entity] = decided.recorded.primary_id
            if decided.action == "REUSE" and decided.live is not None and decided.recorded is not None:
                paths = changed_paths(decided.recorded.spec, decided.live)
                if paths:
                    drift[desired.entity] = paths
            if decided.merge is not None and decided.merge.conflicts:
                plain = [c for c in decided.merge.conflicts if c not in decided.rebound]
                issues += _conflict_issues(desired.entity, plain, options.on_conflict)
                issues += _binding_issues(desired.entity, decided.rebound, options.on_conflict)
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
    leaving = [r for r in record.entities if r.entity not in wanted]
    archiving = [r.primary_id for r in leaving if r.kind == "app" and r.primary_id is not None]
    app_held = archived_app_holders(record, snapshot, archiving)
    for recorded in deletion_order(leaving):
        live = project(recorded, snapshot)
        keeper = _keeper(recorded, snapshot, app_held)
        if keeper is not None:
            removals.append(Removal(recorded, False, []))
            issues.append(
                warning(
                    Code.ENTITY_KEPT,
                    f"{recorded.entity} is no longer in the bundle but {keeper}; it is kept",
                    entity=recorded.entity,
                )
            )
            continue
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
    return Plan(
        preview, items, removals, inputs, snapshot, fp, drift, skipped, checked.aliases, checked.bound
    )


def _keeper(recorded: RecordedEntity, snapshot: Snapshot, app_held: Mapping[str, str]) -> str | None:
    """Why an entity the bundle dropped must stay although nobody edited it, or None.

    A set holding a source someone added on the platform would take that source with it; an MCP an
    archived app uses must keep serving the app's running instances.
    """
    if recorded.kind == "knowledge_set":
        own = own_sources(snapshot.get(kinds.KNOWLEDGE_SETS.path, recorded.primary_id))
        if own:
            return f"holds sources added on the platform ({', '.join(s.id for s in own)})"
    holder = app_held.get(recorded.primary_id or "")
    if recorded.kind == "mcp" and holder is not None:
        return f"{holder} still uses it"
    return None


def alias_ids(ids: dict[str, str], aliases: Mapping[str, str]) -> None:
    """Let each MCP key a tool substitution points elsewhere resolve to its substitute's id."""
    for entity, target in aliases.items():
        if target in ids:
            ids[entity] = ids[target]


def _conflict_issues(entity: str, conflicts: list[str], mode: OnConflict) -> list[Issue]:
    if mode is OnConflict.FAIL:
        return [
            blocking(
                Code.UPDATE_CONFLICT,
                f"{entity}: {path} was changed on the platform and in the bundle; "
                "set onConflict to KeepMine or TakeTheirs (bundlectl: --on-conflict keep-mine or "
                "take-theirs), or undo one side",
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


def _binding_issues(entity: str, paths: list[str], mode: OnConflict) -> list[Issue]:
    what = {"/name": "no longer carries the name this install gave it", "/agent_id": "now runs another agent"}
    issues: list[Issue] = []
    for path in paths:
        found = f"{entity}: the trigger {what.get(path, 'changed what binds it to this install')} ({path})"
        if mode is OnConflict.FAIL:
            issues.append(
                blocking(
                    Code.UPDATE_CONFLICT,
                    f"{found}; it is not reused as it is: set onConflict to TakeTheirs (bundlectl: "
                    "--on-conflict take-theirs) to bind it back to the bundle, or KeepMine (keep-mine) "
                    "to leave it as edited",
                    path,
                    entity,
                )
            )
        elif mode is OnConflict.KEEP_MINE:
            issues.append(
                warning(Code.UPDATE_CONFLICT, f"{found}; it is left as edited (KeepMine)", path, entity)
            )
        else:
            issues.append(
                warning(Code.UPDATE_CONFLICT, f"{found}; it is bound back (TakeTheirs)", path, entity)
            )
    return issues
