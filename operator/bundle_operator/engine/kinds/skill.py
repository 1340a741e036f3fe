"""Skills: inline SKILL.md content or a GitHub source, one platform entity each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_operator.document.models import InlineSkill
from bundle_operator.engine.desired import Desired, Inputs
from bundle_operator.engine.export_report import ExportOut
from bundle_operator.engine.kinds.base import EntityKind
from bundle_operator.engine.record import RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform import kinds
from bundle_operator.platform.models import Entity, Skill


class SkillKind(EntityKind):
    """A skill; its source type cannot change in place."""

    name = "skill"
    section = "skills"
    collection = kinds.SKILLS
    immutable = ("/source_type",)
    held_by = (kinds.AGENTS,)

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        if isinstance(item, InlineSkill):
            return Desired(self.name, item.key, {"source_type": "inline", "content": item.content})
        return Desired(self.name, item.key, {"source_type": "github", "source_url": item.source_url})

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        skill = found
        if skill.source_type == "inline":
            return {"source_type": "inline", "content": skill.content}
        return {"source_type": "github", "source_url": skill.source_url}

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        keys = out.keys.setdefault(self.name, {})
        for skill in listed.get(self.collection.path, []):
            assert isinstance(skill, Skill)
            key = keys[skill.id] = out.key(skill.name)
            if skill.source_type == "github" and skill.source_url:
                doc = {"key": key, "source_type": "github", "source_url": skill.source_url}
            else:
                doc = {"key": key, "source_type": "inline", "content": skill.content}
            out.section(self.section).append(doc)
