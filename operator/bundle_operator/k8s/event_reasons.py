"""Every Event reason the operator posts, with its type, the kind it is posted on and when.

Emitters post these constants (``Events.post(obj, PLAN_READY, message)``), never a reason spelled
inline, so ``ALL`` is the complete list the reference page (docs/reference/events.md) is made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EventType = Literal["Normal", "Warning"]
EventKind = Literal["Bundle", "BundleInstallation", "Endpoint"]


@dataclass(frozen=True)
class EventReason:
    """An Event's CamelCase reason, its type, the kind of object it is posted on and when."""

    reason: str
    type: EventType
    kind: EventKind
    when: str


# --- Bundle ---

REGISTRY_RECORD_DEPRECATED = EventReason(
    "RegistryRecordDeprecated",
    "Warning",
    "Bundle",
    "a registry source resolved to a record the registry marks deprecated (posted at each read)",
)
REGISTRY_VERSION_CHANGED = EventReason(
    "RegistryVersionChanged",
    "Normal",
    "Bundle",
    "a registry source read again resolves to another version than before (a new latest)",
)

# --- BundleInstallation ---

INSTALLED = EventReason(
    "Installed", "Normal", "BundleInstallation", "a run created entities and updated or deleted none"
)
UPDATED = EventReason(
    "Updated", "Normal", "BundleInstallation", "a run updated, deleted or kept entities on the platform"
)
DRIFT_DETECTED = EventReason(
    "DriftDetected",
    "Warning",
    "BundleInstallation",
    "a drift check found the platform changed from what was installed (posted when the drift changes)",
)
DRIFT_CORRECTED = EventReason(
    "DriftCorrected",
    "Normal",
    "BundleInstallation",
    "with spec.driftPolicy.mode Correct, drifted fields were written back",
)
CONFLICT = EventReason(
    "Conflict",
    "Warning",
    "BundleInstallation",
    "the bundle and a platform-side edit changed the same field and onConflict is Fail; nothing was written",
)
ROLLED_BACK = EventReason(
    "RolledBack", "Warning", "BundleInstallation", "an install failed part way and what it wrote was undone"
)
POLICIES_DISAGREE = EventReason(
    "PoliciesDisagree",
    "Warning",
    "BundleInstallation",
    "the spec sets onConflict KeepMine with driftPolicy Correct (a drift check can overwrite kept edits)",
)
PLAN_READY = EventReason(
    "PlanReady",
    "Normal",
    "BundleInstallation",
    "with spec.approval Manual, a new plan (Install, Update, Correct or Uninstall) waits for approval",
)
PLAN_APPROVED = EventReason(
    "PlanApproved",
    "Normal",
    "BundleInstallation",
    "spec.approvedPlan names the waiting plan, which is applied",
)
APPROVED_PLAN_OUTDATED = EventReason(
    "ApprovedPlanOutdated",
    "Warning",
    "BundleInstallation",
    "spec.approvedPlan names a plan that is no longer the current one, so nothing was written",
)
APPROVAL_IGNORED = EventReason(
    "ApprovalIgnored",
    "Normal",
    "BundleInstallation",
    "spec.approvedPlan is set while spec.approval is Auto, where it has no effect",
)
UNINSTALLED = EventReason(
    "Uninstalled",
    "Normal",
    "BundleInstallation",
    "the installation was deleted and its entities were deleted (edited ones kept and named)",
)
ORPHANED = EventReason(
    "Orphaned",
    "Normal",
    "BundleInstallation",
    "the installation was deleted with deletionPolicy Orphan: the platform's entities stay",
)
UNINSTALL_SKIPPED = EventReason(
    "UninstallSkipped",
    "Warning",
    "BundleInstallation",
    "the installation was deleted but its state Secret cannot be read, so nothing is deleted",
)
UNINSTALL_BLOCKED = EventReason(
    "UninstallBlocked",
    "Warning",
    "BundleInstallation",
    "an uninstall cannot go on (no platform connection, or another installation uses an entity); retried",
)
UNINSTALL_FAILED = EventReason(
    "UninstallFailed",
    "Warning",
    "BundleInstallation",
    "the platform failed a delete during an uninstall; retried",
)
UNINSTALL_ABANDONED = EventReason(
    "UninstallAbandoned",
    "Warning",
    "BundleInstallation",
    "the namespace is being deleted and the uninstall kept failing past the operator's limit; "
    "the entities left on the platform are named",
)

# --- Endpoint ---

ENDPOINT_CREATED = EventReason("Created", "Normal", "Endpoint", "the platform endpoint was created")
ENDPOINT_UPDATED = EventReason(
    "Updated", "Normal", "Endpoint", "a changed field of the spec was set on the platform endpoint"
)
KEY_ISSUED = EventReason(
    "KeyIssued", "Normal", "Endpoint", "the API key of a new endpoint was written to its Secret"
)
KEY_ROTATED = EventReason(
    "KeyRotated", "Normal", "Endpoint", "a new API key was issued (a rotation was asked for) into the Secret"
)
ENDPOINT_DELETED = EventReason(
    "Deleted", "Normal", "Endpoint", "the Endpoint was deleted and the platform endpoint with it"
)
NOT_DELETED = EventReason(
    "NotDeleted",
    "Normal",
    "Endpoint",
    "the Endpoint was deleted after its BundleInstallation, so the platform endpoint is not known",
)
DELETE_BLOCKED = EventReason(
    "DeleteBlocked",
    "Warning",
    "Endpoint",
    "the Endpoint was deleted but its platform connection cannot be set up; retried",
)
DELETE_FAILED = EventReason(
    "DeleteFailed", "Warning", "Endpoint", "the platform failed to delete the endpoint; retried"
)

ALL: tuple[EventReason, ...] = tuple(v for v in list(globals().values()) if isinstance(v, EventReason))
"""Every reason above, in the order written."""
