"""Policies bound to an agent; the type cannot change in place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_operator.engine.desired import Desired, Inputs, resolve
from bundle_operator.engine.export_report import ExportOut
from bundle_operator.engine.kinds.base import EntityKind
from bundle_operator.engine.record import RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform import kinds
from bundle_operator.platform.models import Entity


class PolicyKind(EntityKind):
    """A policy of an agent."""

    name = "policy"
    section = "policies"
    collection = kinds.POLICIES
    immutable = ("/type",)
    runs_agent = True

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        agent = resolve(ids, f"agent:{item.agent}")
        return Desired(
            self.name, item.key, {"type": item.type, "agent_id": agent, "config": dict(item.config)}
        )

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        policy = found
        return {"type": policy.type, "agent_id": policy.agent_id, "config": dict(policy.config)}

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        for policy, agent in out.with_agents(listed.get(self.collection.path, []), self.collection.path):
            key = out.key(f"{agent}_{policy.type}")
            doc = {"key": key, "type": policy.type, "agent": agent, "config": policy.config}
            out.section(self.section).append(doc)
