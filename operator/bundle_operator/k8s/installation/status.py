"""What a BundleInstallation's status says: the preview, the entities, the messages of its
conditions, from the engine's plan, record and drift report. Pure, but for the write itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bundle_operator.document.issues import cut_short, printable
from bundle_operator.engine.approval import ApprovalPlan
from bundle_operator.engine.drift import DriftReport
from bundle_operator.engine.plan import Plan
from bundle_operator.engine.record import Record
from bundle_operator.k8s.bundle.status import status_issues
from bundle_operator.k8s.event_reasons import INSTALLED, UPDATED, EventReason
from bundle_operator.k8s.reconcile import StatusDraft
from bundle_operator.k8s.resources import INSTALLATION_PLURAL, BundleInstallationSpec

_PREVIEW_ACTION = {"CREATE": "Create", "REUSE": "Reuse", "UPDATE": "Update", "SKIPPED": "Skipped"}

# (namespace, name, Ready's status, how many entities drifted, the conditions as written): the
# metrics' gauges.
StatusCallback = Callable[[str, str, str, int, Sequence[dict[str, Any]]], None]


@dataclass
class InstallationStatus(StatusDraft):
    """An installation's status, told to the metrics once written."""

    on_status: StatusCallback | None = None

    async def write(self, *, observed: bool = True) -> None:
        """Patch it; ``observed`` also sets observedGeneration (a run that finished its work)."""
        if not await self.send(INSTALLATION_PLURAL, observed=observed) or self.on_status is None:
            return
        meta = self.body["metadata"]
        conditions = self.patch.get("conditions") or self.previous().get("conditions") or []
        ready = next(
            (c["status"] for c in self.patch.get("conditions", []) if c["type"] == "Ready"), "Unknown"
        )
        drifted = len(self.patch.get("drift") or self.previous().get("drift") or [])
        self.on_status(meta["namespace"], meta["name"], ready, drifted, conditions)


def preview_status(planned: Plan) -> dict[str, Any]:
    """status.preview: what each entity would get, and analyze's issues."""
    preview = planned.preview
    return {
        "entities": [
            {
                "kind": e.kind,
                "key": e.key,
                "action": _PREVIEW_ACTION[e.action],
                "reason": e.reason,
                **({"id": e.id} if e.id else {}),
            }
            for e in preview.entities
        ],
        "issues": status_issues(preview.issues),
        "blocking": preview.blocking,
    }


def analyzed_message(planned: Plan) -> str:
    """The Analyzed condition's message: counts of actions, blocking issues and warnings."""
    counts: dict[str, int] = {}
    for e in planned.preview.entities:
        counts[e.action] = counts.get(e.action, 0) + 1
    summary = ", ".join(f"{n} {a.lower()}" for a, n in sorted(counts.items()))
    blocking = sum(1 for i in planned.preview.issues if i.blocking)
    warnings = len(planned.preview.issues) - blocking
    return f"{summary or 'no entities'}; {blocking} blocking issues, {warnings} warnings"


def installed_message(record: Record) -> str:
    """The Installed condition's message, naming what could not be deleted yet."""
    message = f"{len(record.entities)} entities installed"
    stuck = len(record.leftovers) + len(record.unresolved)
    if stuck:
        message += (
            f"; {stuck} platform entities this installation no longer uses could not be deleted yet; "
            "the next run that writes tries again, and uninstall does too"
        )
    return message


def actions_of(created: list[str], updated: list[str], kept: list[str]) -> dict[str, str]:
    """Entity -> the action this run took on it, as status.entities spells it."""
    out = {e: "Created" for e in created}
    out.update({e: "Updated" for e in updated})
    out.update({e: "Kept" for e in kept})
    return out


def entity_rows(
    record: Record, planned: Plan, actions: dict[str, str], previous: dict[str, Any]
) -> list[dict[str, Any]]:
    """What is installed, with ids; an entity keeps the action of the run that last wrote it."""
    before = {
        f"{e.get('kind')}:{e.get('key')}": e for e in previous.get("entities") or [] if isinstance(e, dict)
    }
    rows: list[dict[str, Any]] = []
    for recorded in record.entities:
        entity = recorded.entity
        action = actions.get(entity)
        if action is None:
            old = before.get(entity)
            action = old["action"] if old and old.get("id") == recorded.primary_id else "Reused"
        rows.append({"kind": recorded.kind, "key": recorded.key, "id": recorded.primary_id, "action": action})
    for entity_plan in planned.preview.entities:
        if entity_plan.action == "SKIPPED":
            rows.append({"kind": entity_plan.kind, "key": entity_plan.key, "id": None, "action": "Skipped"})
    return rows


def drift_rows(report: DriftReport) -> list[dict[str, Any]]:
    """status.drift: every changed path of every entity, and entities deleted on the platform."""
    drift = [{"entity": e, "paths": p} for e, p in sorted(report.changed.items())]
    drift += [{"entity": e, "paths": [""]} for e in sorted(report.missing)]
    return drift


def policy_warning(spec: BundleInstallationSpec) -> str | None:
    """A warning when the spec's policies pull two ways, or None."""
    if spec.drift_policy.mode == "Correct" and spec.update_policy.on_conflict == "KeepMine":
        return (
            "spec.updatePolicy.onConflict is KeepMine, yet spec.driftPolicy.mode is Correct: a drift "
            "check writes the installed values back over edits made on the platform, so the edits "
            "KeepMine would keep through an update can be overwritten before one comes. Set "
            "spec.driftPolicy.mode to Warn to keep local edits"
        )
    return None


def not_running_message(troubles: dict[str, str]) -> str:
    """Ready's message while installed entities cannot run on the platform."""
    named = "; ".join(
        f"{entity}: {printable(cut_short(reason, 300))}" for entity, reason in sorted(troubles.items())
    )
    return (
        f"installed, but the platform cannot run {len(troubles)} of them ({named}); see the MCP "
        "instances' health on the platform"
    )


def ready_reason(report: DriftReport, corrected: dict[str, list[str]], count: int) -> tuple[str, str]:
    """Ready's reason and message after a run that converged."""
    if report.drifted:
        return "InstalledWithDrift", f"{count} entities installed; the platform drifted (see Drifted)"
    if corrected:
        return "DriftCorrected", f"{count} entities installed; drift in {len(corrected)} was written back"
    return "Installed", f"{count} entities installed and matching the bundle"


def installed_event(
    created: list[str], updated: list[str], deleted: list[str], kept: list[str]
) -> tuple[EventReason, str] | None:
    """The reason and message of the event a run that wrote posts, or None when it changed nothing."""
    parts = []
    for word, items in (("created", created), ("updated", updated), ("deleted", deleted), ("kept", kept)):
        if items:
            parts.append(f"{word} {', '.join(items)}")
    if not parts:
        return None
    reason = INSTALLED if created and not updated and not deleted else UPDATED
    return reason, "; ".join(parts)


def plan_status(waiting: ApprovalPlan | None, last_applied: str | None) -> dict[str, Any]:
    """status.plan: the plan that waits for approval (all null when none does), and the last applied."""
    return {
        "id": waiting.id if waiting else None,
        "operation": waiting.operation if waiting else None,
        "summary": waiting.summary() if waiting else None,
        "entities": [c.to_json() for c in waiting.changes] if waiting else [],
        "lastAppliedId": last_applied,
    }


def awaiting_message(waiting: ApprovalPlan, name: str) -> str:
    """The Ready condition's message while a plan waits: what it does and how to approve it."""
    return (
        f"{waiting.summary()}; nothing is written until it is approved: bundlectl approve {name}, "
        f"or set spec.approvedPlan to {waiting.id}"
    )
