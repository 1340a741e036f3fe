"""The live state an installation's entities are compared with: what one list call per collection
returned, by collection and id, plus what those lists do not show (a gateway's contents)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bundle_operator.platform.models import Entity


@dataclass
class Snapshot:
    """Live entities by collection and id, and per recorded entity (``kind:key``) its contents."""

    entities: dict[str, dict[str, Entity]] = field(default_factory=dict)
    contents: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: int = 0

    def get(self, path: str, entity_id: str | None) -> Entity | None:
        """A live entity, or None when it is gone."""
        if entity_id is None:
            return None
        return self.entities.get(path, {}).get(entity_id)
