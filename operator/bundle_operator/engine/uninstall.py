"""Uninstall: delete what the installation still owns unmodified, newest first; keep edited entities."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bundle_operator.engine.apply import delete_leftovers, roll_back_journal
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.record import Record, deletion_order
from bundle_operator.engine.snapshot import project, read_snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


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


async def uninstall(
    platform: PlatformAPI, workspace: str, record: Record, persist: Persist
) -> UninstallResult:
    """Remove the installation's entities; the record keeps only what failed to go."""
    writer = Writer(platform, workspace, record, persist, "", 0, record.bundle_name or "")
    result = UninstallResult()
    # First what an interrupted run created and never recorded, and what earlier runs left behind.
    if record.journal:
        for failure in await roll_back_journal(writer):
            result.failed.setdefault("(interrupted run)", []).append(failure)
    await delete_leftovers(writer)
    snapshot = await read_snapshot(platform, workspace, record)
    remaining = []
    in_use: dict[str, str] = {}  # platform id -> the kept entity that refers to it
    # Dependents first: whatever refers to an entity is decided (kept or deleted) before it.
    for recorded in deletion_order(record.entities):
        live = project(recorded, snapshot)
        if live is not None:
            edited = changed_paths(recorded.spec, live)
            holder = in_use.get(recorded.primary_id or "")
            if edited or holder is not None:
                result.kept[recorded.entity] = edited or [f"(in use by {holder})"]
                in_use.update({ref: recorded.entity for ref in _referenced_ids(live)})
                continue
        # Gone already (or an archived agent) still leaves its other parts to delete.
        failures = await writer.delete_entity(recorded)
        if failures:
            result.failed[recorded.entity] = failures
            remaining.append(recorded)
        else:
            (result.gone if live is None else result.deleted).append(recorded.entity)
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


def _referenced_ids(spec: object) -> set[str]:
    """Every platform id a live spec refers to (agent ids, instance ids, skill ids)."""
    found: set[str] = set()
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("agent_id", "mcp_instance_id") and isinstance(item, str):
                    found.add(item)
                elif key in ("mcp_instance_ids", "skill_ids") and isinstance(item, list):
                    found.update(i for i in item if isinstance(i, str))
                else:
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return found
