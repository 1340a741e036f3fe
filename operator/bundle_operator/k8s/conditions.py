"""kstatus conditions in one place: Ready, Reconciling and Stalled beside the domain conditions,
with ``lastTransitionTime`` moving only when a condition's status changes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError


def now_rfc3339() -> str:
    """The current time as Kubernetes writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unix_seconds(stamp: object) -> float | None:
    """A time Kubernetes wrote (RFC 3339, as ``lastTransitionTime`` or ``deletionTimestamp``) as
    Unix seconds; None when it is missing or unreadable."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Cond:
    """A condition to set: True/False/Unknown, a CamelCase reason and a message for a person."""

    type: str
    status: str
    reason: str
    message: str = ""


class Failing(Exception):
    """A failure a condition reports: a CamelCase reason and a message for a person."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def true(type_: str, reason: str, message: str = "") -> Cond:
    """A True condition."""
    return Cond(type_, "True", reason, message)


def false(type_: str, reason: str, message: str = "") -> Cond:
    """A False condition."""
    return Cond(type_, "False", reason, message)


def merge_conditions(
    existing: list[dict[str, Any]] | None, updates: list[Cond], generation: int | None, now: str | None = None
) -> list[dict[str, Any]]:
    """The conditions list with ``updates`` applied; others are kept as they are."""
    stamp = now or now_rfc3339()
    current = {c.get("type"): dict(c) for c in existing or [] if isinstance(c, dict) and c.get("type")}
    for cond in updates:
        before = current.get(cond.type)
        changed = before is None or before.get("status") != cond.status
        current[cond.type] = {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": cond.message,
            "lastTransitionTime": stamp
            if changed or before is None
            else before.get("lastTransitionTime", stamp),
            "observedGeneration": generation,
        }
    order = ["Ready", "Reconciling", "Stalled"]
    return sorted(
        current.values(), key=lambda c: (order.index(c["type"]) if c["type"] in order else 3, c["type"])
    )


def ready(reason: str, message: str) -> list[Cond]:
    """Everything is done: Ready, not reconciling, not stalled."""
    return [
        true("Ready", reason, message),
        false("Reconciling", reason, ""),
        false("Stalled", reason, ""),
    ]


def not_running(reason: str, message: str, *, stalled: bool) -> list[Cond]:
    """Written, but the platform cannot run part of it: not Ready; stalled when only a person can
    change that (a changed tree), not when the platform retries by itself (a crashed server)."""
    return [
        false("Ready", reason, message),
        false("Reconciling", reason, ""),
        true("Stalled", reason, message) if stalled else false("Stalled", reason, ""),
    ]


def spec_error(exc: ValidationError) -> str:
    """The first problem of a spec that does not validate, named by its path under ``spec``."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"spec.{where}: {first['msg']}"


def stalled(reason: str, message: str) -> list[Cond]:
    """Nothing will change without a user's action."""
    return [
        false("Ready", reason, message),
        false("Reconciling", reason, ""),
        true("Stalled", reason, message),
    ]


def progressing(reason: str, message: str) -> list[Cond]:
    """Work is in flight (or will be retried): not ready yet, not stalled."""
    return [
        false("Ready", reason, message),
        true("Reconciling", reason, message),
        false("Stalled", reason, ""),
    ]


def condition_of(status: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The condition ``type_`` in a status, if any."""
    for cond in (status or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def is_true(status: dict[str, Any] | None, type_: str) -> bool:
    """Whether the condition ``type_`` in a status is True."""
    found = condition_of(status, type_)
    return found is not None and found.get("status") == "True"
