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

from bundle_operator.engine.apply import delete_leftovers, roll_back_journal
from bundle_operator.engine.approval import ApprovalPlan, uninstall_plan
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.entities import remove_entity
from bundle_operator.engine.kinds import BY_COLLECTION, BY_NAME, deletion_order
from bundle_operator.engine.kinds.app import archived_app_holders
from bundle_operator.engine.kinds.base import referenced_ids
from bundle_operator.engine.live import project, read_snapshot
from bundle_operator.engine.record import Record, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.models import Entity
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


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
    apps = [
        r.primary_id for r in record.entities if BY_NAME[r.kind].remove_archives and r.primary_id is not None
    ]
    app_held = archived_app_holders(record, snapshot, apps)
    # Dependents first: whatever refers to an entity is decided (kept or deleted) before it.
    for recorded in deletion_order(record.entities):
        live = project(recorded, snapshot)
        primary = recorded.primary_id or ""
        if live is not None:
            edited = changed_paths(recorded.spec, live)
            used_by_app = app_held.get(primary) if BY_NAME[recorded.kind].used_by_apps else None
            holder = in_use.get(primary) or used_by_app
            if edited or holder is not None:
                plan.kept[recorded.entity] = edited or [f"(in use by {holder})"]
                in_use.update({ref: recorded.entity for ref in referenced_ids(live)})
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
        failures = await remove_entity(writer, recorded)
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
    held: dict[str, list[str]] = {}

    def note(entity: str, holder: str) -> None:
        holders = held.setdefault(entity, [])
        if holder not in holders:
            holders.append(holder)

    for recorded, _ in plan.delete:
        for part in recorded.parts:
            doomed[part.id] = recorded.entity
        kind = BY_NAME[recorded.kind]
        paths.update(holder.path for holder in kind.held_by)
        # What someone added inside it on the platform would go with it (seed 004): it is held
        # until they remove that or keep the entity.
        for holder in kind.own_holders(recorded, snapshot):
            note(recorded.entity, holder)
    for path in sorted(paths):
        listed = snapshot.entities.get(path)
        items: list[Entity] = (
            list(listed.values())
            if listed is not None
            else list(await platform.list_all(workspace, kinds.BY_PATH[path]))
        )
        for item in items:
            if item.id in own:
                continue
            holds = await BY_COLLECTION[path].holds(platform, workspace, item)
            for ref, detail in sorted(holds.refs.items()):
                if ref in doomed:
                    note(doomed[ref], _describe(path, item, detail))
    return held


def _describe(path: str, item: Entity, detail: str = "") -> str:
    name = getattr(item, "name", "")
    archived = " (archived)" if getattr(item, "archived", False) else ""
    label = f" '{name}'" if isinstance(name, str) and name else ""
    extra = f" ({detail})" if detail else ""
    return f"{path}/{item.id}{label}{archived}{extra}"
