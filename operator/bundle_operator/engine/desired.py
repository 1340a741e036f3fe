"""What the platform should hold for a bundle entity: a comparable spec and the secret values.

A spec is plain JSON in the platform's own field names, with every secret value replaced by a
marker naming its site (``{"secret": "env:GITHUB_TOKEN"}``); the values themselves travel beside
it, in memory only. Specs of entities that refer to others carry the platform ids of those (or a
``<new kind:key>`` marker while they are not created yet), so a re-created MCP shows up as a
changed agent. Each kind makes its own (``kinds/``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.document import placeholders
from bundle_operator.document.models import Bundle


@dataclass(frozen=True)
class Inputs:
    """Everything besides the document that decides the desired state."""

    bundle: Bundle
    setup: Mapping[str, str]
    secret_fields: frozenset[str]
    activate: bool = False
    substitutions: Mapping[str, str] = field(default_factory=dict)
    stripped: frozenset[str] = frozenset()  # "kind:ref" requirements dropped

    def fill(self, text: str) -> str:
        """``text`` with its setup references replaced by their values."""
        return placeholders.substitute(text, lambda key: self.setup.get(key, ""))


@dataclass
class Desired:
    """The desired state of one bundle entity."""

    kind: str
    key: str
    spec: dict[str, Any]
    secrets: dict[str, str] = field(default_factory=dict)

    @property
    def entity(self) -> str:
        """``kind:key``."""
        return f"{self.kind}:{self.key}"


def new_marker(entity: str) -> str:
    """Stands for the id of an entity that is not created yet."""
    return f"<new {entity}>"


def resolve(ids: Mapping[str, str], entity: str) -> str:
    """The platform id of an entity, or its marker."""
    return ids.get(entity) or new_marker(entity)


def installed_mcps(keys: list[str], inputs: Inputs, skipped: set[str]) -> list[str]:
    """The MCP keys of ``keys`` that are installed and not stripped as tools."""
    return [m for m in keys if f"mcp:{m}" not in skipped and f"tool:{m}" not in inputs.stripped]
