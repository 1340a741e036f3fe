"""Drift correction: write back what the installation wrote where the platform changed it since.

Used by ``driftPolicy.mode: Correct``. Only entities the bundle still wants unchanged (REUSE) are
corrected; an entity whose bundle changed goes through the ordinary three-way update instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bundle_operator.engine.apply import Blocked, writer_for
from bundle_operator.engine.entities import update_entity
from bundle_operator.engine.plan import Plan
from bundle_operator.engine.record import Record
from bundle_operator.engine.writer import Persist
from bundle_operator.platform.errors import PlatformError
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


@dataclass
class Correction:
    """Which entities were written back (with the paths), and which could not be."""

    corrected: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


async def correct_drift(platform: PlatformAPI, record: Record, persist: Persist, planned: Plan) -> Correction:
    """Put every entity the plan found drifted back to what the installation wrote, at the revisions
    the plan read (an edit made since fails that entity, never overwritten unseen); raises Blocked
    for a plan that blocks."""
    if planned.inputs is None or planned.preview.blocking:
        raise Blocked(planned.preview)
    writer = writer_for(platform, record, persist, planned, record.attempt)
    result = Correction()
    by_entity = {r.entity: r for r in record.entities}
    for item in planned.items:
        entity = item.desired.entity
        paths = planned.drift.get(entity)
        if item.action != "REUSE" or not paths or item.recorded is None or item.live is None:
            continue
        try:
            by_entity[entity] = await update_entity(
                writer, item.recorded, item.desired, item.desired.spec, item.live
            )
        except PlatformError as exc:
            log.warning("drift correction of %s failed: %s", entity, exc)
            result.failed[entity] = str(exc)
            continue
        result.corrected[entity] = paths
    if result.corrected:
        record.entities = sorted(by_entity.values(), key=lambda e: e.seq)
        await persist(record)
    return result
