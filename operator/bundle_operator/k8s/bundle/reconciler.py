"""The reconcile of a Bundle: resolve its source, analyze the document offline, write status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s import spans
from bundle_operator.k8s.bundle.sources import SourceError, SourceSettings, resolve
from bundle_operator.k8s.bundle.status import bundle_status_fields
from bundle_operator.k8s.event_reasons import REGISTRY_RECORD_DEPRECATED, REGISTRY_VERSION_CHANGED
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.reconcile import Retry, backoff
from bundle_operator.k8s.resources import BUNDLE_PLURAL, BundleSpec
from bundle_operator.sources.resolution import Resolved
from bundle_operator.telemetry import tracing

_UNRESOLVED: dict[str, Any] = {
    "digest": None,
    "bundleName": None,
    "version": None,
    "entities": None,
    "setupFields": None,
    "source": None,
    "signature": None,
    "issues": None,
}


@dataclass(frozen=True)
class BundleOutcome:
    """What the reconcile found; ``reason`` is the Stalled or retry reason, None when the Bundle
    resolved. Installations follow the status it wrote (``Nudges.bundle_seen``)."""

    result: ReconcileResult
    reason: str | None = None


class BundleReconciler:
    """Resolves Bundles."""

    def __init__(self, kube: Kube, settings: SourceSettings, events: Events | None = None) -> None:
        self.kube = kube
        self.settings = settings
        self.events = events

    async def reconcile(self, body: dict[str, Any], *, attempt: int = 0) -> BundleOutcome:
        """Resolve and analyze; write status. Raises Retry on a temporary failure."""
        meta = body["metadata"]
        spans.bundle(body)
        patch: dict[str, Any]
        conditions: list[cond.Cond]
        result: ReconcileResult = "success"
        reason: str | None = None
        try:
            spec = BundleSpec.model_validate(body.get("spec") or {})
            with tracing.span("resolve"):
                resolved = await resolve(spec.source, meta["namespace"], self.kube, self.settings)
        except ValidationError as exc:
            patch = dict(_UNRESOLVED)
            reason = "InvalidSpec"
            conditions = cond.stalled(reason, cond.spec_error(exc))
            result = "stalled"
        except SourceError as exc:
            if not exc.permanent:
                await self._write(body, {}, cond.progressing(exc.reason, exc.message + "; retrying"), False)
                raise Retry(exc.message, backoff(attempt)) from None
            # A source that no longer resolves must not keep claiming the last digest.
            patch = dict(_UNRESOLVED)
            reason = exc.reason
            conditions = cond.stalled(exc.reason, exc.message)
            result = "stalled"
        else:
            patch = bundle_status_fields(resolved)
            await self._announce(body, resolved)
            issues = patch.get("issues") or []
            blocking = [i for i in issues if i.get("severity") == "Blocking"]
            if blocking:
                codes = sorted({str(i.get("code")) for i in blocking})
                message = (
                    f"the document has {len(blocking)} blocking issues ({', '.join(codes)}); "
                    "status.issues lists each with its path; fix the document"
                )
                reason = "InvalidDocument"
                conditions = cond.stalled(reason, message)
                result = "stalled"
            else:
                name, version = patch.get("bundleName"), patch.get("version")
                message = f"bundle {name} {version or ''} from {resolved.origin}".replace("  ", " ")
                conditions = cond.ready("Resolved", "; ".join([message, *resolved.warnings]))
        with tracing.span("report"):
            await self._write(body, patch, conditions, True)
        return BundleOutcome(result, reason)

    async def _announce(self, body: dict[str, Any], resolved: Resolved) -> None:
        """Events for what a registry read found: a deprecated record, a new version of latest."""
        if self.events is None or resolved.source is None:
            return
        for warning in resolved.warnings:
            await self.events.post(body, REGISTRY_RECORD_DEPRECATED, warning)
        before = ((body.get("status") or {}).get("source") or {}).get("version")
        now = resolved.source.version
        if before is not None and before != now:
            await self.events.post(
                body,
                REGISTRY_VERSION_CHANGED,
                f"{resolved.source.server} resolves to {now} (was {before})",
            )

    async def _write(
        self, body: dict[str, Any], patch: dict[str, Any], conditions: list[cond.Cond], observed: bool
    ) -> None:
        meta = body["metadata"]
        if observed:
            patch["observedGeneration"] = meta.get("generation")
        previous = (body.get("status") or {}).get("conditions")
        patch["conditions"] = cond.merge_conditions(previous, conditions, meta.get("generation"))
        try:
            await self.kube.patch_status(BUNDLE_PLURAL, meta["namespace"], meta["name"], patch)
        except KubeError as exc:
            if not exc.not_found:
                raise Retry(f"could not write status: {exc.reason or exc.status}", backoff(1)) from None
