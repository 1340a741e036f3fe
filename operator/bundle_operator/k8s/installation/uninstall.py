"""The delete of a BundleInstallation: uninstall from the platform (``deletionPolicy: Delete``) or
leave it alone (``Orphan``), under approval Manual only by an approved Uninstall plan, and in a
namespace being deleted give up after ``--abandon-uninstall-after``. No kopf types: handlers call
it and map ``Retry``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bundle_operator.engine.record import Record
from bundle_operator.engine.uninstall import PlanOutdated, UninstallRefused, preview_uninstall, uninstall
from bundle_operator.k8s.conditions import unix_seconds
from bundle_operator.k8s.event_reasons import (
    ORPHANED,
    UNINSTALL_ABANDONED,
    UNINSTALL_BLOCKED,
    UNINSTALL_FAILED,
    UNINSTALL_SKIPPED,
    UNINSTALLED,
)
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.installation.gate import await_uninstall_approval
from bundle_operator.k8s.installation.setup import SetupProblem
from bundle_operator.k8s.installation.state import StateConflict, StateStore, StateUnreadable
from bundle_operator.k8s.installation.status import InstallationStatus, StatusCallback
from bundle_operator.k8s.installation.watch_cache import WatchCaches
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.reconcile import OperatorSettings, Retry, backoff, connect, kube_retry
from bundle_operator.k8s.resources import BundleInstallationSpec
from bundle_operator.platform.errors import PlatformError

log = logging.getLogger(__name__)

# How often a deleted installation under approval Manual looks again for an approved Uninstall plan.
UNINSTALL_APPROVAL_POLL = 10.0


def deleting_for(body: dict[str, Any]) -> float | None:
    """Seconds since the object's deletion was asked for, or None when it was not."""
    asked = unix_seconds(body.get("metadata", {}).get("deletionTimestamp"))
    return None if asked is None else time.time() - asked


@dataclass
class Uninstaller:
    """Runs the finalizer of BundleInstallations against their platforms."""

    kube: Kube
    settings: OperatorSettings
    platforms: PlatformPool
    events: Events
    caches: WatchCaches
    on_status: StatusCallback | None = None

    async def finalize(self, body: dict[str, Any], *, attempt: int = 0) -> None:
        """Uninstall (Delete) or leave the platform alone (Orphan); Retry keeps the finalizer."""
        # No read policy: an uninstall lists the platform as it is now.
        try:
            await self._finalize(body, attempt)
        except KubeError as exc:
            raise kube_retry(exc, attempt) from None
        self.platforms.forget(body.get("metadata", {}).get("uid") or "")

    async def _abandoned(
        self, body: dict[str, Any], store: StateStore, record: Record, workspace: str, why: str
    ) -> bool:
        """In a namespace being deleted, give the uninstall up once it has failed for too long.

        Nothing there can wait for ever: the namespace would stay Terminating. The Event says what
        stays on the platform, so that someone can delete it there.
        """
        waited = deleting_for(body)
        if not store.terminating or waited is None or waited < self.settings.abandon_uninstall_after:
            return False
        left = sorted(e.entity for e in record.entities)
        shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        message = (
            f"the namespace is being deleted and the uninstall has failed for {waited:.0f}s "
            f"({why}); left on the platform in workspace '{workspace}': {shown or 'nothing recorded'}"
        )
        await self.events.post(body, UNINSTALL_ABANDONED, message)
        # Logged too: the Event goes with its namespace.
        meta = body["metadata"]
        log.warning(
            "UninstallAbandoned: %s",
            message,
            extra=object_extra("BundleInstallation", meta["namespace"], meta["name"], meta.get("uid")),
        )
        await store.release()
        return True

    def _status(self, body: dict[str, Any]) -> InstallationStatus:
        return InstallationStatus(self.kube, body, on_status=self.on_status)

    async def _finalize(self, body: dict[str, Any], attempt: int) -> None:
        namespace = body["metadata"]["namespace"]
        store = StateStore(self.kube, body, self.caches.states)
        try:
            spec = BundleInstallationSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            await store.release()  # never installed anything a valid spec would have
            return
        if spec.deletion_policy == "Orphan":
            await self.events.post(body, ORPHANED, "the platform's entities are left in place")
            await store.release()
            return
        try:
            record = await store.load(spec.workspace, fresh=True)  # never undo from a lagging copy
        except StateUnreadable as exc:
            await self.events.post(body, UNINSTALL_SKIPPED, str(exc))
            await store.release()
            return
        if not record.entities and not record.journal and not record.leftovers and not record.unresolved:
            await store.release()
            return
        try:
            _, platform = await connect(self.kube, self.settings, self.platforms, namespace, spec)
            if spec.approval == "Manual" and spec.approved_plan is None:
                waiting = await preview_uninstall(platform, spec.workspace, record)
                await await_uninstall_approval(self._status(body), body, self.events, waiting)
                raise Retry("the Uninstall plan waits for approval", UNINSTALL_APPROVAL_POLL)
            approved = spec.approved_plan if spec.approval == "Manual" else None
            result = await uninstall(platform, spec.workspace, record, store.persist, approved=approved)
        except PlanOutdated as exc:
            await await_uninstall_approval(
                self._status(body), body, self.events, exc.current, outdated=exc.approved
            )
            raise Retry(str(exc), UNINSTALL_APPROVAL_POLL) from None
        except SetupProblem as exc:
            if await self._abandoned(body, store, record, spec.workspace, exc.message):
                return
            await self.events.post(body, UNINSTALL_BLOCKED, exc.message)
            raise Retry(exc.message, backoff(attempt, cap=120)) from None
        except UninstallRefused as exc:
            # Nothing was deleted; the finalizer stays until the foreign users let go (or the
            # user switches deletionPolicy to Orphan), and each retry says who holds what.
            if await self._abandoned(body, store, record, spec.workspace, str(exc)):
                return
            await self.events.post(body, UNINSTALL_BLOCKED, str(exc))
            raise Retry(str(exc), backoff(attempt, cap=300)) from None
        except PlatformError as exc:
            if await self._abandoned(body, store, record, spec.workspace, f"the platform answered {exc}"):
                return
            await self.events.post(body, UNINSTALL_FAILED, f"the platform answered {exc}; retrying")
            raise Retry(str(exc), backoff(attempt, retry_after=getattr(exc, "retry_after", None))) from None
        except StateConflict as exc:
            raise Retry(str(exc), backoff(0)) from None
        message = f"deleted {len(result.deleted)} entities"
        if result.kept:
            message += "; kept (edited on the platform): " + ", ".join(
                f"{e} ({', '.join(p[:3])})" for e, p in result.kept.items()
            )
        await self.events.post(body, UNINSTALLED, message)
        if not result.complete:
            failed = ", ".join(result.failed)
            if await self._abandoned(body, store, record, spec.workspace, f"could not delete {failed}"):
                return
            await self.events.post(body, UNINSTALL_FAILED, f"could not delete {failed}; retrying")
            raise Retry(f"could not delete {failed}", backoff(attempt))
        await store.release()
