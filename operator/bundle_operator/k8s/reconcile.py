"""What every reconcile shares: how a run ends (``Done``, ``Retry``), the status it builds, the
settings it reads, and how it reaches the platform an installation names.

A reconcile is a sequence of named steps (see installation/reconciler.py and endpoint/reconciler.py).
A step returns what the next step needs, or ``Done`` when the run ends there with its status
written; a temporary failure raises ``Retry`` for the handler to schedule. No kopf types here.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.installation.setup import SetupProblem, secret_value
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.object_keys import SecretReader
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.resources import BundleInstallationSpec
from bundle_operator.platform.errors import NotFound, PlatformError, PreconditionFailed, Unavailable
from bundle_operator.platform.protocol import PlatformAPI
from bundle_operator.sources.resolution import SourceSettings

ANNOTATION_PAUSED = "bundle-operator.dev/paused"


class Retry(Exception):
    """A temporary failure: run again after ``delay`` seconds."""

    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


@dataclass(frozen=True)
class Done:
    """A step ended the run: its status is written, and this is the result for the metrics."""

    result: ReconcileResult


def backoff(
    attempt: int, *, base: float = 2.0, cap: float = 300.0, retry_after: float | None = None
) -> float:
    """Exponential backoff with full jitter, never below the platform's Retry-After."""
    ceiling = min(cap, base * (2 ** min(attempt, 12)))
    delay = random.uniform(ceiling / 2, ceiling)
    return max(delay, retry_after or 0.0)


def kube_retry(exc: KubeError, attempt: int) -> Retry:
    """The Retry for a Kubernetes API call that failed."""
    return Retry(f"the Kubernetes API answered {exc.status} {exc.reason}", backoff(attempt))


def temporary(exc: PlatformError) -> bool:
    """Whether the next run may succeed where this platform call failed.

    412: someone edited meanwhile, and the next run plans from the new state. 404: an entity seen
    in a (shared) list was deleted since; the next run lists afresh. Any other 409 (a name taken,
    an entity in use) stays until somebody changes something.
    """
    return isinstance(exc, Unavailable | PreconditionFailed | NotFound) or (
        exc.status is not None and exc.status >= 500
    )


def retry_after(exc: PlatformError) -> float | None:
    """The wait the platform asked for, if it asked."""
    return exc.retry_after if isinstance(exc, Unavailable) else None


def is_paused(body: dict[str, Any]) -> bool:
    """Whether the paused annotation asks for report-only runs."""
    value = (body.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_PAUSED, "")
    return str(value).strip().lower() in ("true", "yes", "1")


def platform_key(url: str | None) -> str:
    """A platform URL normalized for comparing installations."""
    return (url or "").rstrip("/").lower()


# Seconds: nothing in a namespace being deleted can wait for ever (it would stay Terminating).
ABANDON_UNINSTALL_AFTER = 600.0


@dataclass(frozen=True)
class OperatorSettings:
    """What every reconcile shares: the default platform connection and source rules."""

    default_platform_url: str | None = None
    default_platform_token: str | None = None
    sources: SourceSettings = field(default_factory=SourceSettings)
    # Read at every use: a mounted Secret's token rotates without an operator restart.
    default_platform_token_file: Path | None = None
    # In a namespace being deleted, an uninstall that keeps failing is given up after this long.
    abandon_uninstall_after: float = ABANDON_UNINSTALL_AFTER

    def default_token(self) -> str | None:
        """The default platform's token, from the file when one was given."""
        if self.default_platform_token_file is not None:
            try:
                return self.default_platform_token_file.read_text().strip() or None
            except OSError:
                return self.default_platform_token
        return self.default_platform_token


async def connect(
    kube: SecretReader,
    settings: OperatorSettings,
    platforms: PlatformPool,
    namespace: str,
    spec: BundleInstallationSpec,
    *,
    whose: str = "",
) -> tuple[str, PlatformAPI]:
    """The platform an installation's spec names (or the operator's default), with its token.

    ``whose`` names the installation in problems when another resource (an Endpoint) asks.
    """
    where = f"{whose}: " if whose else ""
    if spec.platform is not None:
        token = None
        if spec.platform.token_secret_ref is not None:
            try:
                token = await secret_value(
                    kube, namespace, spec.platform.token_secret_ref, "spec.platform.tokenSecretRef"
                )
            except SetupProblem as exc:
                raise SetupProblem(exc.reason, f"{where}{exc.message}") from None
        return spec.platform.url, platforms.get(spec.platform.url, token)
    url = settings.default_platform_url
    if not url:
        message = (
            f"{whose} names no platform and the operator has no default: set its spec.platform.url, "
            "or start the operator with --platform-url"
            if whose
            else "no platform: set spec.platform.url, or start the operator with --platform-url"
        )
        raise SetupProblem("NoPlatform", message)
    return url, platforms.get(url, settings.default_token())


def without_nulls(value: Any) -> Any:
    """``value`` without null fields, as the API server stores it (a structural schema drops them)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@dataclass
class StatusDraft:
    """A status being built for one object: conditions merged, written with merge patches."""

    kube: Kube
    body: dict[str, Any]
    patch: dict[str, Any] = field(default_factory=dict)

    @property
    def generation(self) -> int | None:
        generation: int | None = self.body.get("metadata", {}).get("generation")
        return generation

    def previous(self) -> dict[str, Any]:
        status: dict[str, Any] = self.body.get("status") or {}
        return status

    def conditions(self, updates: Sequence[cond.Cond]) -> None:
        existing = self.patch.get("conditions", self.previous().get("conditions"))
        self.patch["conditions"] = cond.merge_conditions(existing, list(updates), self.generation)

    async def send(self, plural: str, *, observed: bool) -> bool:
        """Patch the status (observedGeneration too when ``observed``); False when the object is gone."""
        if observed:
            self.patch["observedGeneration"] = self.generation
        previous = self.previous()
        unchanged = all(
            without_nulls(previous.get(key)) == without_nulls(value) for key, value in self.patch.items()
        )
        if unchanged:
            # A drift check that found what the last one found writes nothing: a fleet's checks
            # would otherwise patch every status once per interval.
            return True
        meta = self.body["metadata"]
        try:
            await self.kube.patch_status(plural, meta["namespace"], meta["name"], self.patch)
        except KubeError as exc:
            if exc.not_found:
                return False  # deleted meanwhile: nothing to report on
            raise Retry(f"could not write status: {exc.reason or exc.status}", backoff(1)) from None
        return True
