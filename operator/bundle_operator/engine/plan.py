"""Analyze against a live platform: what a run would do, and nothing written.

``plan`` reads (the record, one list per collection) and decides every entity CREATE, REUSE, UPDATE
or SKIPPED, asking each entity's kind (kinds/), with the three-way merge of each update and its
conflicts, the entities the bundle dropped and the requirements. ``apply`` (apply.py) carries a plan
out.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.document.issues import Code, Issue, blocking, shown, warning
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.analyze import analyze_with_values
from bundle_operator.engine.artifacts import ArtifactFiles
from bundle_operator.engine.desired import Desired, Inputs
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.kinds import ALL, BY_NAME, ORDER, deletion_order
from bundle_operator.engine.kinds.app import archived_app_holders
from bundle_operator.engine.kinds.base import EntityKind, Update
from bundle_operator.engine.kinds.gateway import shadowed_tool_issues
from bundle_operator.engine.live import binding_changes, project, read_snapshot
from bundle_operator.engine.merge import MergeResult, OnConflict
from bundle_operator.engine.preview import Action, EntityPlan, Preview
from bundle_operator.engine.record import Record, RecordedEntity, secret_hash
from bundle_operator.engine.requirements import Requirements, check_requirements
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform.errors import NotFound
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """How to install: activation, requirement substitutions, and what to do on a conflict."""

    activate: bool = False
    substitutions: Mapping[str, str] = field(default_factory=dict)
    on_conflict: OnConflict = OnConflict.FAIL
    # Where archives of MCPs made from an .mcpb come from, when the platform lacks them.
    artifacts: ArtifactFiles | None = None


@dataclass
class Planned:
    """The decision for one entity, with what it was decided from."""

    desired: Desired
    action: Action
    reason: str | None = None
    recorded: RecordedEntity | None = None
    live: dict[str, Any] | None = None
    merge: MergeResult | None = None
    replaces: bool = False  # a CREATE that replaces a live entity (immutable field or binding changed)
    blocked: str | None = None  # why this entity cannot be brought to the bundle at all
    rebound: list[str] = field(default_factory=list)  # binding paths changed on the platform
    kept: list[str] = field(default_factory=list)  # a replaced entity left as edited: its edited paths


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
    """Everything a run would do, what it was decided from, and the preview that reports it.

    The plan is the one decision: ``writes`` says whether carrying it out writes anything, and
    ``settle`` gives one level's decisions again once the ids of what earlier levels created are
    known (apply.py carries a plan out with it).
    """

    preview: Preview
    items: list[Planned]
    removals: list[Removal]
    inputs: Inputs | None
    snapshot: Snapshot
    fingerprint: str
    record: Record
    options: Options = field(default_factory=Options)
    workspace: str = ""
    digest: str | None = None
    drift: dict[str, list[str]] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)  # see Requirements
    bound: dict[str, str] = field(default_factory=dict)

    def settle(self, kind: EntityKind, ids: dict[str, str]) -> list[Planned]:
        """The decisions for the entities of ``kind``, their references resolved through ``ids``
        (the platform ids of the entities of earlier levels, created or found)."""
        assert self.inputs is not None
        alias_ids(ids, self.aliases)
        wanted = [d for d in kind.desired(self.inputs, ids, self.skipped) if d.entity not in self.skipped]
        return [decide(d, self.record, self.snapshot, self.options) for d in wanted]

    def writes(self, *, recreate_deleted: bool = True, retry_leftovers: bool = True) -> bool:
        """Whether carrying the plan out writes to the platform (or the record).

        With ``recreate_deleted`` False an entity deleted on the platform is drift to report, not a
        write of its own (drift Warn); with ``retry_leftovers`` False parts whose delete failed
        earlier wait for the next run that writes anyway.
        """
        record = self.record
        gone = {
            i.desired.entity
            for i in self.items
            if i.action == "CREATE" and i.recorded is not None and not i.replaces
        }
        return bool(
            record.journal
            or record.unresolved
            or (retry_leftovers and record.leftovers)
            or self.removals
            or record.digest != self.digest
            or any(
                i.action != "REUSE" and (recreate_deleted or i.desired.entity not in gone) for i in self.items
            )
        )


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
    """CREATE, REUSE or UPDATE for one entity, from its record and its live state."""
    kind = BY_NAME[desired.kind]
    recorded = record.find(desired.entity)
    if recorded is None:
        return Planned(desired, "CREATE")
    live = project(recorded, snapshot)
    if live is None:
        return Planned(desired, "CREATE", kind.gone_reason(recorded, snapshot), recorded)
    moved = binding_changes(desired.kind, recorded.spec, desired.spec)
    if moved:
        return _rebinding(desired, recorded, live, moved)
    hashes = {site: secret_hash(record, v) for site, v in desired.secrets.items()}
    # A trigger whose name or agent changed on the platform is not the one this install bound:
    # reusing it as it is would leave it running someone else's agent. Its binding is an update
    # the bundle must win or a conflict for the user to settle, never a local edit that survives.
    rebound = binding_changes(desired.kind, recorded.spec, live)
    unchanged = desired.spec == recorded.spec and hashes == recorded.secrets and not rebound
    if unchanged and not kind.must_rewrite(recorded, live):
        return Planned(desired, "REUSE", None, recorded, live)
    immutable = [p for p in kind.immutable if _at(recorded.spec, p) != _at(desired.spec, p)]
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
    changed = {site for site, value in hashes.items() if recorded.secrets.get(site) != value}
    settled = kind.settle(Update(recorded, base, desired, live, changed, options.on_conflict))
    return Planned(
        desired, "UPDATE", None, recorded, live, settled.merge, blocked=settled.blocked, rebound=rebound
    )


def _rebinding(desired: Desired, recorded: RecordedEntity, live: dict[str, Any], moved: list[str]) -> Planned:
    """The install now binds the entity to something else (its agent was installed again): the
    recorded one is not reused (seed 000), a new one is created, and the old one is deleted while
    unedited, else left as it is to whoever edited it."""
    what = ", ".join(moved)
    edited = changed_paths(recorded.spec, live)
    if not edited:
        reason = f"the install binds it anew ({what}): a new one is created and the one it recorded deleted"
        return Planned(desired, "CREATE", reason, recorded, live, replaces=True)
    reason = f"the install binds it anew ({what}): a new one is created and the edited one it recorded kept"
    return Planned(desired, "CREATE", reason, recorded, live, replaces=True, kept=edited)


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
    empty = Snapshot()
    if parsed.bundle is None or offline.bundle is None:
        return Plan(offline, [], [], None, empty, "", record, options, workspace, parsed.digest)
    # Requirements are checked against the platform below; the offline note does not apply.
    issues = [i for i in offline.issues if i.code != Code.REQUIREMENT_NOT_CHECKED]
    skipped = {f"{p.kind}:{p.key}": p.reason for p in offline.entities if p.action == "SKIPPED"}
    checked = await check_requirements(platform, workspace, parsed, options.substitutions, set(skipped))
    issues += checked.issues
    inputs = _inputs(parsed, values, options, checked, skipped)
    if snapshot is None:
        owned = record.entities or record.archived
        snapshot = await read_snapshot(platform, workspace, record) if owned else empty
    fp = fingerprint(record, offline.bundle.digest, values, options)
    planned = Plan(offline, [], [], inputs, snapshot, fp, record, options, workspace, parsed.digest)
    planned.skipped = set(skipped) - set(checked.replaced)
    planned.aliases, planned.bound = checked.aliases, checked.bound
    ids = _decide_levels(planned, issues)
    # What the platform found since the install (discovery) that the bundle's curation now hides.
    found = [
        *await _names_taken(platform, planned),
        *shadowed_tool_issues(parsed.bundle, snapshot),
        *await _archives_missing(platform, planned),
    ]
    issues += [i.with_line(parsed.source_map.line_of(i.path)) for i in found]
    _plan_removals(planned, issues)
    planned.preview = _preview(planned, ids, skipped, issues)
    return planned


def _inputs(
    parsed: ParsedBundle,
    values: dict[str, str],
    options: Options,
    checked: Requirements,
    skipped: dict[str, str | None],
) -> Inputs:
    """What decides the desired state, with the MCPs a tool substitution replaces left out."""
    bundle = parsed.bundle
    assert bundle is not None
    if checked.replaced:
        # An MCP a tool substitution replaces is not installed; what used it uses the substitute.
        bundle = bundle.model_copy(
            update={"mcps": [m for m in bundle.mcps if f"mcp:{m.key}" not in checked.replaced]}
        )
        skipped.update(checked.replaced)
    return Inputs(
        bundle=bundle,
        setup=values,
        secret_fields=frozenset(f.key for f in bundle.setup if f.type == "secret"),
        activate=options.activate,
        substitutions=dict(options.substitutions),
        stripped=frozenset(checked.stripped),
    )


def _decide_levels(planned: Plan, issues: list[Issue]) -> dict[str, str]:
    """Decide every entity level by level; returns the ids known (markers stand for new ones)."""
    ids: dict[str, str] = dict(planned.bound)
    mode = planned.options.on_conflict
    for kind in ALL:
        for decided in planned.settle(kind, ids):
            planned.items.append(decided)
            entity = decided.desired.entity
            if decided.action != "CREATE" and decided.recorded is not None and decided.recorded.primary_id:
                ids[entity] = decided.recorded.primary_id
            if decided.action == "REUSE" and decided.live is not None and decided.recorded is not None:
                paths = changed_paths(decided.recorded.spec, decided.live)
                if paths:
                    planned.drift[entity] = paths
            if decided.merge is not None and decided.merge.conflicts:
                plain = [c for c in decided.merge.conflicts if c not in decided.rebound]
                issues += _conflict_issues(entity, plain, mode)
                issues += _binding_issues(entity, decided.rebound, mode)
            if decided.kept and decided.recorded is not None:
                issues.append(_kept_issue(decided.recorded, decided.kept))
            if decided.blocked is not None:
                issues.append(
                    blocking(
                        Code.UPDATE_CONFLICT,
                        f"{entity}: {decided.blocked}; undo the "
                        "local edit or delete the entity to let the bundle replace it",
                        entity=entity,
                    )
                )
    return ids


def _kept_issue(recorded: RecordedEntity, edited: list[str]) -> Issue:
    part = recorded.primary
    where = f" ({part.path}/{part.id})" if part is not None else ""
    message = (
        f"{recorded.entity}: the entity it recorded{where} is bound to what this install replaced and "
        f"was edited since it was installed ({', '.join(edited[:5])}); it is kept as it is and no "
        "longer belongs to the install, which creates its own"
    )
    return warning(Code.ENTITY_KEPT, message, entity=recorded.entity)


async def _archives_missing(platform: PlatformAPI, planned: Plan) -> list[Issue]:
    """An archive an MCP would run from that neither the platform nor this run has blocks."""
    assert planned.inputs is not None
    index = {mcp.key: i for i, mcp in enumerate(planned.inputs.bundle.mcps)}
    given = planned.options.artifacts
    issues: list[Issue] = []
    checked: set[str] = set()
    for item in planned.items:
        artifact = item.desired.spec.get("server", {}).get("artifact") if item.desired.kind == "mcp" else None
        if item.action not in ("CREATE", "UPDATE") or artifact is None:
            continue
        digest = artifact["digest"]
        if digest in checked or (given is not None and given.holds(digest)):
            continue
        checked.add(digest)
        try:
            await platform.get_artifact(planned.workspace, digest)
            continue
        except NotFound:
            pass
        issues.append(
            blocking(
                Code.ARTIFACT_UNAVAILABLE,
                f"MCP '{shown(item.desired.key)}' runs from the archive {digest}, which the platform does "
                "not hold and this install was not given; give the .mcpb file "
                "(bundlectl install --artifact FILE) or install from a Bundle whose source provides it",
                f"/mcps/{index.get(item.desired.key, 0)}/artifact/digest",
                item.desired.entity,
            )
        )
    return issues


async def _names_taken(platform: PlatformAPI, planned: Plan) -> list[Issue]:
    """A new entity whose name the platform keeps unique while another entity holds it already:
    its create would be refused after everything before it was written, so the plan blocks."""
    issues: list[Issue] = []
    for item in planned.items:
        kind = BY_NAME[item.desired.kind]
        unique = kind.unique_name(item.desired) if item.action == "CREATE" else None
        if unique is None:
            continue
        holders = await platform.list_all(planned.workspace, kind.collection, filters={"name": unique.name})
        if not holders:
            continue
        entity, name, what = item.desired.entity, shown(unique.name), unique.what
        message = (
            f"{entity}: the workspace already has a {what} named '{name}' "
            f"({', '.join(h.id for h in holders)}), which this installation did not create, and "
            f"{what} names are unique in a workspace; give the bundle another name ({unique.pointer}) "
            f"or rename or delete that {what}"
        )
        issues.append(blocking(Code.NAME_TAKEN, message, unique.pointer, entity))
    return issues


def _plan_removals(planned: Plan, issues: list[Issue]) -> None:
    """Every recorded entity the bundle dropped: deleted when unmodified, else kept (and why)."""
    record, snapshot = planned.record, planned.snapshot
    wanted = {p.desired.entity for p in planned.items}
    leaving = [r for r in record.entities if r.entity not in wanted]
    archiving = [
        r.primary_id for r in leaving if BY_NAME[r.kind].remove_archives and r.primary_id is not None
    ]
    app_held = archived_app_holders(record, snapshot, archiving)
    for recorded in deletion_order(leaving):
        live = project(recorded, snapshot)
        keeper = BY_NAME[recorded.kind].keeper(recorded, snapshot, app_held)
        if keeper is not None:
            planned.removals.append(Removal(recorded, False, []))
            message = f"{recorded.entity} is no longer in the bundle but {keeper}; it is kept"
            issues.append(warning(Code.ENTITY_KEPT, message, entity=recorded.entity))
            continue
        if live is None:
            # Gone already, but its other parts (server spec, secrets) are still ours to delete,
            # and the record must let go of it.
            planned.removals.append(Removal(recorded, True, []))
            continue
        edited = changed_paths(recorded.spec, live)
        planned.removals.append(Removal(recorded, not edited, edited))
        if edited:
            message = (
                f"{recorded.entity} is no longer in the bundle but was edited "
                f"since it was installed ({', '.join(edited[:5])}); it is kept"
            )
            issues.append(warning(Code.ENTITY_KEPT, message, entity=recorded.entity))
        else:
            message = f"{recorded.entity} is no longer in the bundle; it will be deleted"
            issues.append(warning(Code.ENTITY_REMOVED, message, entity=recorded.entity))


def _preview(
    planned: Plan, ids: dict[str, str], skipped: dict[str, str | None], issues: list[Issue]
) -> Preview:
    """The preview: every entity's action (skipped ones too) in install order, and the issues."""
    assert planned.preview.bundle is not None
    plans = [
        EntityPlan(p.desired.kind, p.desired.key, p.action, p.reason, ids.get(p.desired.entity))
        for p in planned.items
    ]
    by_entity = {p.entity for p in plans}
    plans += [
        EntityPlan(entity.split(":", 1)[0], entity.split(":", 1)[1], "SKIPPED", reason)
        for entity, reason in skipped.items()
        if entity not in by_entity
    ]
    plans.sort(key=lambda p: ORDER.index(p.kind))
    return Preview(planned.preview.bundle, plans, issues)


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
