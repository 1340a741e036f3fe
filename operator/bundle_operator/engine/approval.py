"""The plan a person approves when an installation asks for approval, and the id it is approved by.

A plan lists, per entity, what a run would do (create, update with the JSON Pointer paths that
change, delete, keep). Its id is a digest of everything the run depends on: the bundle digest and
the setup values' HMACs (never a value), the ids the record holds, the live state of the entities
the run touches, and the actions. The same inputs give the same id on every reconcile; a change to
any of them gives another, so an approval of an older plan can never let a newer one through.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.drift import DriftReport
from bundle_operator.engine.plan import Options, Plan
from bundle_operator.engine.record import Record

Operation = Literal["Install", "Update", "Correct", "Uninstall"]
ChangeAction = Literal["create", "update", "delete", "keep"]
# The order changes are counted in, in summaries and printer columns.
ACTIONS: tuple[ChangeAction, ...] = ("create", "update", "delete", "keep")


@dataclass(frozen=True)
class Change:
    """What a run does to one bundle entity; ``paths`` are the fields an update changes."""

    kind: str
    key: str
    action: ChangeAction
    paths: tuple[str, ...] = ()

    @property
    def entity(self) -> str:
        """``kind:key``."""
        return f"{self.kind}:{self.key}"

    def to_json(self) -> dict[str, Any]:
        """The change as status.plan.entities holds it."""
        return {"kind": self.kind, "key": self.key, "action": self.action, "paths": list(self.paths)}


@dataclass(frozen=True)
class ApprovalPlan:
    """A plan waiting for, or carrying, an approval."""

    id: str
    operation: Operation
    changes: tuple[Change, ...]

    def counts(self) -> dict[ChangeAction, int]:
        """How many entities get each action, in ``ACTIONS`` order, zeros left out."""
        counted = Counter(c.action for c in self.changes)
        return {action: counted[action] for action in ACTIONS if counted[action]}

    def summary(self) -> str:
        """``Update: 1 create, 2 update``: the operation and its counts."""
        counts = ", ".join(f"{n} {action}" for action, n in self.counts().items()) or "no changes"
        return f"{self.operation}: {counts}"


def plan_id(material: dict[str, Any]) -> str:
    """``sha256:<64 hex>`` of the material, canonically serialised."""
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _recorded_ids(record: Record) -> dict[str, list[str]]:
    return {r.entity: sorted(p.id for p in r.parts) for r in record.entities}


def _made(operation: Operation, changes: list[Change], material: dict[str, Any]) -> ApprovalPlan:
    material = {**material, "operation": operation, "changes": [c.to_json() for c in changes]}
    return ApprovalPlan(plan_id(material), operation, tuple(changes))


def run_plan(planned: Plan, record: Record, options: Options) -> ApprovalPlan:
    """The Install or Update plan of a run that writes: ``planned`` as the apply will carry it out."""
    changes: list[Change] = []
    live: dict[str, Any] = {}
    for item in planned.items:
        desired = item.desired
        if item.action == "SKIPPED":
            continue
        if item.action == "CREATE":
            changes.append(Change(desired.kind, desired.key, "create"))
        elif item.action == "UPDATE":
            target = item.merge.merged if item.merge is not None else desired.spec
            paths = tuple(changed_paths(item.live, target)) if item.live is not None else ()
            changes.append(Change(desired.kind, desired.key, "update", paths))
        else:
            changes.append(Change(desired.kind, desired.key, "keep"))
        if item.action != "REUSE":
            live[desired.entity] = item.live
    for removal in planned.removals:
        recorded = removal.recorded
        action: ChangeAction = "delete" if removal.delete else "keep"
        changes.append(Change(recorded.kind, recorded.key, action, tuple(removal.edited_paths)))
    material = {
        # The bundle digest, the setup values' HMACs, activation and substitutions.
        "inputs": planned.fingerprint,
        "on_conflict": str(options.on_conflict),
        "recorded": _recorded_ids(record),
        "interrupted": sorted(e.idempotency_key for e in record.journal),
        "live": live,
    }
    return _made("Install" if not record.entities else "Update", changes, material)


def correct_plan(planned: Plan, record: Record, report: DriftReport) -> ApprovalPlan:
    """The Correct plan: the drifted entities written back to what the installation wrote."""
    changes: list[Change] = []
    live: dict[str, Any] = {}
    for item in planned.items:
        paths = report.changed.get(item.desired.entity)
        if item.action != "REUSE" or not paths:
            continue
        changes.append(Change(item.desired.kind, item.desired.key, "update", tuple(paths)))
        live[item.desired.entity] = item.live
    material = {"inputs": planned.fingerprint, "recorded": _recorded_ids(record), "live": live}
    return _made("Correct", changes, material)


def uninstall_plan(
    record: Record, live: dict[str, Any], delete: list[str], kept: dict[str, list[str]]
) -> ApprovalPlan:
    """The Uninstall plan: ``delete`` the entities so named, keep the edited or held ones."""
    by_entity = {r.entity: r for r in record.entities}
    changes = [Change(by_entity[e].kind, by_entity[e].key, "delete") for e in delete]
    changes += [Change(by_entity[e].kind, by_entity[e].key, "keep", tuple(p)) for e, p in kept.items()]
    material = {
        "recorded": _recorded_ids(record),
        "interrupted": sorted(e.idempotency_key for e in record.journal),
        "leftovers": sorted(p.id for p in record.leftovers),
        "live": live,
    }
    return _made("Uninstall", changes, material)
