"""Automations: cron triggers named ``{bundle}:{key}`` that run an agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_operator.document.pointer import join_pointer
from bundle_operator.engine.desired import Desired, Inputs, resolve
from bundle_operator.engine.export_report import ENABLED, ExportOut
from bundle_operator.engine.kinds.base import EntityKind, fields_of
from bundle_operator.engine.record import Part, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.models import Entity, TriggerCreate, TriggerUpdate


def trigger_name(bundle_name: str, key: str) -> str:
    """Triggers are named ``{bundle}:{key}``: the name is how a re-run recognises its own."""
    return f"{bundle_name}:{key}"


class AutomationKind(EntityKind):
    """A trigger, enabled only once activation is asked for.

    What makes a live trigger the one an install bound (seed 000): it carries the name
    ``{bundle}:{key}`` and runs the agent the install bound it to.
    """

    name = "automation"
    section = "automations"
    collection = kinds.TRIGGERS
    binding = ("name", "agent_id")
    runs_agent = True

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        spec = {
            "name": trigger_name(inputs.bundle.name, item.key),
            "type": item.type,
            "agent_id": resolve(ids, f"agent:{item.agent}"),
            "schedule": item.schedule,
            "timezone": item.timezone,
            "message": item.message,
            "enabled": item.enabled and inputs.activate,
        }
        return Desired(self.name, item.key, spec)

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        return fields_of(found, ("name", "type", "agent_id", "schedule", "timezone", "message", "enabled"))

    async def create(self, writer: Writer, desired: Desired) -> list[Part]:
        spec = dict(desired.spec)
        enabled = spec.pop("enabled")
        trigger = await writer.create(desired.entity, "primary", self.collection, TriggerCreate(**spec))
        if not enabled:
            # The platform schedules a trigger as it is created: stop it before it can run.
            writer.calls += 1
            disabled = await writer.platform.update(
                writer.workspace,
                self.collection,
                trigger.id,
                TriggerUpdate(enabled=False),
                revision=trigger.revision,
            )
            writer.saw(self.collection, disabled)
        return [Part(role="primary", path=self.collection.path, id=trigger.id)]

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        docs = out.section(self.section)
        for trigger, agent in out.with_agents(listed.get(self.collection.path, []), self.collection.path):
            if trigger.enabled:
                out.drop(join_pointer("/automations", len(docs), "enabled"), ENABLED)
            label = trigger.name.split(":", 1)[1] if ":" in trigger.name else trigger.name
            doc = {"key": out.key(label), "type": trigger.type, "agent": agent}
            doc |= {"schedule": trigger.schedule, "timezone": trigger.timezone, "message": trigger.message}
            docs.append(doc)
