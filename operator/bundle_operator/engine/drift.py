"""Drift: how the live platform differs from what an installation wrote, as JSON Pointer paths."""

from __future__ import annotations

from dataclasses import dataclass, field

from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.kinds import BY_NAME
from bundle_operator.engine.live import binding_changes, project, read_snapshot
from bundle_operator.engine.record import Record
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform.protocol import PlatformAPI


@dataclass
class DriftReport:
    """Per entity (``kind:key``) the paths that changed; ``missing`` lists entities gone from the platform;
    ``rebound`` the triggers that no longer carry their name or run the agent the install bound
    (their paths are in ``changed`` too): an install does not reuse those as they are."""

    changed: dict[str, list[str]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    rebound: dict[str, list[str]] = field(default_factory=dict)
    calls: int = 0

    @property
    def drifted(self) -> bool:
        """Whether anything differs."""
        return bool(self.changed or self.missing)

    def to_json(self) -> dict[str, object]:
        """The report as JSON data."""
        return {
            "drifted": self.drifted,
            "entities": [{"entity": e, "paths": p} for e, p in sorted(self.changed.items())],
            "missing": sorted(self.missing),
            "rebound": [{"entity": e, "paths": p} for e, p in sorted(self.rebound.items())],
        }


def drift_from(record: Record, snapshot: Snapshot) -> DriftReport:
    """Compare a snapshot with the record."""
    report = DriftReport(calls=snapshot.calls)
    for recorded in record.entities:
        live = project(recorded, snapshot)
        if live is None:
            report.missing.append(recorded.entity)
            continue
        paths = changed_paths(recorded.spec, live)
        if paths:
            report.changed[recorded.entity] = paths
        rebound = binding_changes(recorded.kind, recorded.spec, live)
        if rebound:
            report.rebound[recorded.entity] = rebound
    return report


def troubles(record: Record, snapshot: Snapshot) -> dict[str, str]:
    """Per installed entity the platform cannot run now (``kind:key``), why; health, not drift."""
    found: dict[str, str] = {}
    for recorded in record.entities:
        reason = BY_NAME[recorded.kind].trouble(recorded, snapshot)
        if reason is not None:
            found[recorded.entity] = reason
    return found


async def drift(platform: PlatformAPI, workspace: str, record: Record) -> DriftReport:
    """Read the live state (one list call per kind) and compare it with the record."""
    return drift_from(record, await read_snapshot(platform, workspace, record))
