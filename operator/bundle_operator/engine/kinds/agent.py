"""Agents, wired by id to the bundle's MCP instances, skills and knowledge sets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_operator.engine.desired import Desired, Inputs, installed_mcps, resolve
from bundle_operator.engine.export_report import ExportOut
from bundle_operator.engine.kinds.base import EntityKind, Write
from bundle_operator.engine.record import RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform import kinds
from bundle_operator.platform.models import Agent, Entity

# An agent the bundle gives no model runs on the platform's default, which the API spells so.
DEFAULT_MODEL = "default"


class AgentKind(EntityKind):
    """An agent; an archived one counts as gone and is installed again."""

    name = "agent"
    section = "agents"
    collection = kinds.AGENTS
    held_by = (kinds.CHANNELS, kinds.TRIGGERS, kinds.POLICIES)
    uses_mcps = True

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        model = item.model
        if model is not None:
            model = inputs.substitutions.get(f"model:{model}", model)
            if f"model:{item.model}" in inputs.stripped:
                model = None
        spec: dict[str, Any] = {
            "name": item.name,
            "description": item.description or "",
            "instructions": item.instructions or "",
            "model": model or DEFAULT_MODEL,
            "mcp_instance_ids": [
                resolve(ids, f"mcp:{m}") for m in installed_mcps(item.mcps, inputs, skipped)
            ],
            "skill_ids": [resolve(ids, f"skill:{s}") for s in item.skills],
        }
        if item.knowledge_sets:
            # Only when used: an agent installed before 0.2.0 keeps the spec it was recorded with.
            spec["knowledge_set_ids"] = [resolve(ids, f"knowledge_set:{k}") for k in item.knowledge_sets]
        return Desired(self.name, item.key, spec)

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        agent = found
        if agent.archived:
            return None  # an archived agent is installed again
        spec: dict[str, Any] = {
            "name": agent.name,
            "description": agent.description,
            "instructions": agent.instructions,
            "model": agent.model,
            "mcp_instance_ids": list(agent.mcp_instance_ids),
            "skill_ids": list(agent.skill_ids),
        }
        if agent.knowledge_set_ids:
            spec["knowledge_set_ids"] = list(agent.knowledge_set_ids)
        return spec

    def changes(self, step: Write) -> dict[str, Any]:
        changes = super().changes(step)
        if "knowledge_set_ids" in step.current and "knowledge_set_ids" not in step.target:
            changes["knowledge_set_ids"] = []  # the spec leaves the field out while it is empty
        return changes

    def gone_reason(self, recorded: RecordedEntity, snapshot: Snapshot) -> str:
        if snapshot.get(self.collection.path, recorded.primary_id) is not None:
            return "the agent it recorded is archived; it is installed again"
        return super().gone_reason(recorded, snapshot)

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        keys = out.keys.setdefault(self.name, {})
        for agent in listed.get(self.collection.path, []):
            assert isinstance(agent, Agent)
            if agent.archived:
                out.drop(f"{self.collection.path}/{agent.id}", "an archived agent")
                continue
            key = keys[agent.id] = out.key(agent.name)
            entity = f"agent '{agent.name}' ({agent.id})"
            doc: dict[str, Any] = {"key": key, "name": agent.name}
            if agent.description:
                doc["description"] = agent.description
            if agent.instructions:
                doc["instructions"] = agent.instructions
            doc["model"] = agent.model
            doc["mcps"] = out.keys_of(entity, agent.mcp_instance_ids, "mcp", "MCP instance")
            doc["skills"] = out.keys_of(entity, agent.skill_ids, "skill", "skill")
            knowledge = out.keys_of(entity, agent.knowledge_set_ids, "knowledge_set", "knowledge set")
            if knowledge:
                doc["knowledge_sets"] = knowledge
            out.section(self.section).append(doc)
