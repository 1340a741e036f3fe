"""Uninstall: delete what the installation still owns unmodified, newest first; keep edited entities.

Before anything is deleted, the platform is asked who else still uses what would go: an entity of
this installation that a foreign entity (one the installation did not create) refers to cannot be
deleted, so the whole uninstall is refused up front with ``UninstallRefused`` naming both, rather
than deleting half and failing on the held one (seed 004 refuses the same way). A knowledge set
holding a source a user added on the platform is refused the same way: the source would go with it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.engine.apply import delete_leftovers, roll_back_journal
from bundle_operator.engine.approval import ApprovalPlan, uninstall_plan
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.knowledge import archived_app_holders
from bundle_operator.engine.record import Record, RecordedEntity, deletion_order
from bundle_operator.engine.snapshot import Snapshot, own_sources, project, read_snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.models import Entity, McpInstance
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)

# Which platform collections may refer to a part of each bundle entity kind (the platform refuses
# to delete an entity while one of them does).
_HOLDER_PATHS: dict[str, tuple[str, ...]] = {
    "mcp": (kinds.AGENTS.path, kinds.MCP_INSTANCES.path, kinds.GATEWAY_BUNDLES.path, kinds.APPS.path),
    "skill": (kinds.AGENTS.path,),
    "knowledge_set": (kinds.AGENTS.path,),
    "agent": (kinds.CHANNELS.path, kinds.TRIGGERS.path, kinds.POLICIES.path),
}


class PlanOutdated(Exception):
    """The approved Uninstall plan is not the one the platform now calls for; nothing was deleted."""

    def __init__(self, approved: str, current: ApprovalPlan) -> None:
        super().__init__(f"the approved plan {approved} is not the current one ({current.id})")
        self.approved = approved
        self.current = current


class UninstallRefused(Exception):
    """Nothing was deleted: foreign entities still use entities the uninstall would delete.

    ``held`` maps each held entity (``kind:key``) to the foreign entities that use it, each as
    ``<collection>/<id>`` with its name when it has one.
    """

    def __init__(self, held: dict[str, list[str]]) -> None:
        self.held = held
        parts = [f"{entity} is used by {', '.join(holders)}" for entity, holders in sorted(held.items())]
        super().__init__(
            "uninstall refused, nothing was deleted: "
            + "; ".join(parts)
            + "; change or delete those first, or keep the installation"
        )

    def to_json(self) -> dict[str, object]:
        """The refusal as JSON data."""
        return {
            "refused": [{"entity": e, "held_by": h} for e, h in sorted(self.held.items())],
            "deleted": [],
        }


@dataclass
class UninstallResult:
    """What went, what stayed because it was edited (with the paths), and what failed to go."""

    deleted: list[str] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)
    failed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether nothing the installation owned is left behind unintentionally."""
        return not self.failed

    def to_json(self) -> dict[str, object]:
        """The result as JSON data."""
        return {
            "deleted": self.deleted,
            "kept": [{"entity": e, "paths": p} for e, p in self.kept.items()],
            "gone": self.gone,
            "failed": [{"entity": e, "parts": p} for e, p in self.failed.items()],
        }


@dataclass
class _Plan:
    """Per recorded entity, dependents first: delete it (with whether it is still live) or keep it."""

    delete: list[tuple[RecordedEntity, bool]] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)


def _plan(record: Record, snapshot: Snapshot) -> _Plan:
    plan = _Plan()
    in_use: dict[str, str] = {}  # platform id -> the kept entity that refers to it
    # Apps are archived, not deleted, so their running instances keep working: the MCPs their
    # tools come from stay with them (those archived before included).
    apps = [r.primary_id for r in record.entities if r.kind == "app" and r.primary_id is not None]
    app_held = archived_app_holders(record, snapshot, apps)
    # Dependents first: whatever refers to an entity is decided (kept or deleted) before it.
    for recorded in deletion_order(record.entities):
        live = project(recorded, snapshot)
        primary = recorded.primary_id or ""
        if live is not None:
            edited = changed_paths(recorded.spec, live)
            holder = in_use.get(primary) or (app_held.get(primary) if recorded.kind == "mcp" else None)
            if edited or holder is not None:
                plan.kept[recorded.entity] = edited or [f"(in use by {holder})"]
                in_use.update({ref: recorded.entity for ref in _referenced_ids(live)})
                continue
        # Gone already (or an archived agent) still leaves its other parts to delete.
        plan.delete.append((recorded, live is not None))
    return plan


def _approval_plan(record: Record, snapshot: Snapshot, plan: _Plan) -> ApprovalPlan:
    live = {r.entity: project(r, snapshot) for r in record.entities}
    return uninstall_plan(record, live, [r.entity for r, _ in plan.delete], plan.kept)


async def preview_uninstall(platform: PlatformAPI, workspace: str, record: Record) -> ApprovalPlan:
    """The Uninstall plan an approval names: what uninstall would delete and keep, read now."""
    snapshot = await read_snapshot(platform, workspace, record)
    return _approval_plan(record, snapshot, _plan(record, snapshot))


async def uninstall(
    platform: PlatformAPI, workspace: str, record: Record, persist: Persist, *, approved: str | None = None
) -> UninstallResult:
    """Remove the installation's entities; the record keeps only what failed to go.

    Raises ``UninstallRefused``, having deleted nothing, when a foreign entity still uses one of them;
    with ``approved``, raises ``PlanOutdated``, having deleted nothing, unless the plan computed from
    this run's reads has that id.
    """
    writer = Writer(platform, workspace, record, persist, "", 0, record.bundle_name or "")
    result = UninstallResult()
    snapshot = await read_snapshot(platform, workspace, record)
    plan = _plan(record, snapshot)
    if approved is not None:
        current = _approval_plan(record, snapshot, plan)
        if current.id != approved:
            raise PlanOutdated(approved, current)
    held = await _foreign_holders(platform, workspace, record, snapshot, plan)
    if held:
        raise UninstallRefused(held)
    # First what an interrupted run created and never recorded, and what earlier runs left behind.
    rolled_back = bool(record.journal)
    if rolled_back:
        for failure in await roll_back_journal(writer):
            result.failed.setdefault("(interrupted run)", []).append(failure)
    await delete_leftovers(writer)
    if rolled_back:  # the interrupted run may have been an update that touched recorded entities
        plan = _plan(record, await read_snapshot(platform, workspace, record))
    result.kept = plan.kept
    remaining = []
    for recorded, live in plan.delete:
        failures = await writer.delete_entity(recorded)
        if failures:
            result.failed[recorded.entity] = failures
            remaining.append(recorded)
        else:
            (result.deleted if live else result.gone).append(recorded.entity)
    record.entities = sorted(remaining, key=lambda r: r.seq)
    for entity, failures in result.failed.items():
        log.warning("uninstall: %s stays: %s", entity, ", ".join(failures))
    if record.leftovers:
        result.failed.setdefault("(leftovers)", []).extend(f"{p.path}/{p.id}" for p in record.leftovers)
    if record.unresolved:
        result.failed.setdefault("(unconfirmed creates)", []).extend(
            f"{e.path} {e.role} of {e.entity}" for e in record.unresolved
        )
    await persist(record)
    return result


async def _foreign_holders(
    platform: PlatformAPI, workspace: str, record: Record, snapshot: Snapshot, plan: _Plan
) -> dict[str, list[str]]:
    """Per entity the plan deletes, the entities outside the installation that still refer to it."""
    own = {part.id for recorded in record.entities for part in recorded.parts}
    own |= {part.id for part in record.archived}
    own |= {entry.id for entry in record.journal if entry.id is not None}
    doomed: dict[str, str] = {}  # platform id -> the entity (kind:key) whose part it is
    paths: set[str] = set()
    for recorded, _ in plan.delete:
        for part in recorded.parts:
            doomed[part.id] = recorded.entity
        paths.update(_HOLDER_PATHS.get(recorded.kind, ()))
    held: dict[str, list[str]] = {}

    def note(entity_id: str, holder: str) -> None:
        holders = held.setdefault(doomed[entity_id], [])
        if holder not in holders:
            holders.append(holder)

    # A source a user added to a set of the installation would go with the set (seed 004): the
    # set is held until they remove it or keep the set.
    for recorded, _ in plan.delete:
        set_id = recorded.primary_id
        if recorded.kind != "knowledge_set" or set_id is None:
            continue
        for source in own_sources(snapshot.get(kinds.KNOWLEDGE_SETS.path, set_id)):
            where = f"{kinds.KNOWLEDGE_SETS.path}/{set_id}/sources/{source.id}"
            note(set_id, f"{where} (a {source.type} source added on the platform)")
    for path in sorted(paths):
        kind = kinds.BY_PATH[path]
        listed = snapshot.entities.get(path)
        items: list[Entity] = (
            list(listed.values()) if listed is not None else list(await platform.list_all(workspace, kind))
        )
        for item in items:
            if item.id in own:
                continue
            if path == kinds.GATEWAY_BUNDLES.path:
                for member in await platform.list_members(workspace, item.id):
                    if member.mcp_instance_id in doomed:
                        note(member.mcp_instance_id, _describe(path, item, f"member {member.name}"))
                continue
            refs = _referenced_ids(item.model_dump(mode="json"))
            if isinstance(item, McpInstance):
                refs.add(item.server_id)
            for ref in sorted(refs & doomed.keys()):
                note(ref, _describe(path, item))
    return held


def _describe(path: str, item: Entity, detail: str = "") -> str:
    name = getattr(item, "name", "")
    archived = " (archived)" if getattr(item, "archived", False) else ""
    label = f" '{name}'" if isinstance(name, str) and name else ""
    extra = f" ({detail})" if detail else ""
    return f"{path}/{item.id}{label}{archived}{extra}"


def _referenced_ids(spec: Any) -> set[str]:
    """Every platform id a live spec refers to (agent, instance, skill and knowledge set ids)."""
    found: set[str] = set()
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("agent_id", "mcp_instance_id") and isinstance(item, str):
                    found.add(item)
                elif key in ("mcp_instance_ids", "skill_ids", "knowledge_set_ids") and isinstance(item, list):
                    found.update(i for i in item if isinstance(i, str))
                else:
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return found
