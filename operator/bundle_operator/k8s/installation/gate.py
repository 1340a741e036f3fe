"""The approval gate (DESIGN.md §9.2): under spec.approval Manual, the plan a run would carry out is
shown in status.plan and only the plan spec.approvedPlan names goes on to the platform.

The plan is the one the run carries out: its id is computed from the run's own reads, and the
apply that follows uses the same plan (its writes are conditional on the revisions those reads
saw), so nothing but the approved plan can reach the platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bundle_operator.engine.approval import ApprovalPlan, correct_plan, run_plan
from bundle_operator.engine.drift import drift_from
from bundle_operator.engine.plan import Plan
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.event_reasons import (
    APPROVAL_IGNORED,
    APPROVED_PLAN_OUTDATED,
    PLAN_APPROVED,
    PLAN_READY,
)
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.installation.inputs import Inputs
from bundle_operator.k8s.installation.status import (
    InstallationStatus,
    analyzed_message,
    awaiting_message,
    plan_status,
)


@dataclass(frozen=True)
class Outcome:
    """Whether the run waits for approval, or carries out the approved plan ``approved``."""

    waiting: bool = False
    approved: str | None = None


async def gate(
    status: InstallationStatus,
    body: dict[str, Any],
    events: Events,
    inputs: Inputs,
    planned: Plan,
    writes: bool,
) -> Outcome:
    """Under approval Manual, let the run go on only with the plan spec.approvedPlan names; else
    show the plan in status (written by the caller) and wait."""
    spec = inputs.spec
    previous = status.previous().get("plan") or {}
    last_applied = previous.get("lastAppliedId")
    if spec.approval == "Auto":
        if previous:
            status.patch["plan"] = None
        if spec.approved_plan and spec_changed(status):
            await events.post(
                body,
                APPROVAL_IGNORED,
                "spec.approvedPlan has no effect: spec.approval is Auto",
            )
        return Outcome()
    waiting = waiting_plan(inputs, planned, writes)
    if waiting is None:
        status.patch["plan"] = plan_status(None, last_applied)
        return Outcome()
    if not inputs.store.stored:
        # The setup values' HMACs in the plan id use the record's key: keep it for the next run.
        await inputs.store.persist(inputs.record)
    if spec.approved_plan == waiting.id:
        await events.post(body, PLAN_APPROVED, f"applying {waiting.id} ({waiting.summary()})")
        return Outcome(approved=waiting.id)
    shown_before = previous.get("id") == waiting.id
    status.patch["plan"] = plan_status(waiting, last_applied)
    if not shown_before:
        await events.post(body, PLAN_READY, awaiting_message(waiting, shown_name(body)))
    outdated = spec.approved_plan is not None and spec.approved_plan != last_applied
    if outdated and (not shown_before or spec_changed(status)):
        await events.post(
            body,
            APPROVED_PLAN_OUTDATED,
            f"the approved plan {spec.approved_plan} is not the current one, so nothing was written; "
            f"the current plan is {waiting.id} ({waiting.summary()})",
        )
    awaiting(status, awaiting_message(waiting, shown_name(body)))
    status.conditions([cond.true("Analyzed", "Analyzed", analyzed_message(planned))])
    return Outcome(waiting=True)


def waiting_plan(inputs: Inputs, planned: Plan, writes: bool) -> ApprovalPlan | None:
    """The plan this run would carry out: an install or update, a drift correction, or none."""
    if writes:
        return run_plan(planned, inputs.record, inputs.options)
    if inputs.spec.drift_policy.mode != "Correct" or not inputs.record.entities:
        return None
    report = drift_from(inputs.record, planned.snapshot)
    return correct_plan(planned, inputs.record, report) if report.changed else None


def shown_name(body: dict[str, Any]) -> str:
    """``NAME -n NAMESPACE``, as bundlectl approve takes it."""
    meta = body["metadata"]
    return f"{meta['name']} -n {meta['namespace']}"


def spec_changed(status: InstallationStatus) -> bool:
    """Whether the spec changed since the status was last computed (a new approval, say)."""
    return bool(status.previous().get("observedGeneration") != status.generation)


def awaiting(status: InstallationStatus, message: str) -> None:
    """The conditions of a plan that waits: not Ready, neither reconciling nor stalled."""
    status.conditions(
        [
            cond.false("Ready", "AwaitingApproval", message),
            cond.false("Reconciling", "AwaitingApproval", ""),
            cond.false("Stalled", "AwaitingApproval", ""),
        ]
    )


async def await_uninstall_approval(
    status: InstallationStatus,
    body: dict[str, Any],
    events: Events,
    waiting: ApprovalPlan,
    *,
    outdated: str | None = None,
) -> None:
    """Show the Uninstall plan and hold the finalizer: nothing is deleted until it is approved."""
    previous = status.previous().get("plan") or {}
    last_applied = previous.get("lastAppliedId")
    if outdated is not None and outdated == last_applied:
        outdated = None  # an approval spent on an earlier plan is not an approval of this one
    status.patch["plan"] = plan_status(waiting, last_applied)
    message = awaiting_message(waiting, shown_name(body))
    if previous.get("id") != waiting.id:
        await events.post(body, PLAN_READY, message)
        if outdated is not None:
            await events.post(
                body,
                APPROVED_PLAN_OUTDATED,
                f"the approved plan {outdated} is not the current one, so nothing was deleted; "
                f"the current plan is {waiting.id} ({waiting.summary()})",
            )
    awaiting(status, message)
    await status.write()
