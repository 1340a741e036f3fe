"""The bundle entity kinds, one module each, in install order (deletes go the other way round).

``base.py`` holds the protocol every kind implements (``EntityKind``) and the defaults most share;
``mcp.py``, ``skill.py``, ``knowledge_set.py``, ``agent.py``, ``app.py``, ``channel.py``,
``automation.py``, ``policy.py`` and ``gateway.py`` are the kinds. Adding a kind is a module here
and its line in ``ALL``.
"""

from __future__ import annotations

from bundle_operator.engine.kinds.agent import AgentKind
from bundle_operator.engine.kinds.app import AppKind
from bundle_operator.engine.kinds.automation import AutomationKind
from bundle_operator.engine.kinds.base import EntityKind
from bundle_operator.engine.kinds.channel import ChannelKind
from bundle_operator.engine.kinds.gateway import GatewayKind
from bundle_operator.engine.kinds.knowledge_set import KnowledgeSetKind
from bundle_operator.engine.kinds.mcp import McpKind
from bundle_operator.engine.kinds.policy import PolicyKind
from bundle_operator.engine.kinds.skill import SkillKind
from bundle_operator.engine.record import RecordedEntity

# Install order: what an entity refers to is installed before it.
ALL: tuple[EntityKind, ...] = (
    McpKind(),
    SkillKind(),
    KnowledgeSetKind(),
    AgentKind(),
    AppKind(),
    ChannelKind(),
    AutomationKind(),
    PolicyKind(),
    GatewayKind(),
)
BY_NAME: dict[str, EntityKind] = {kind.name: kind for kind in ALL}
# The kind whose primary entities live in each platform collection.
BY_COLLECTION: dict[str, EntityKind] = {kind.collection.path: kind for kind in ALL}
ORDER: tuple[str, ...] = tuple(kind.name for kind in ALL)


def kind_of(name: str) -> EntityKind:
    """The kind named ``name`` (``mcp``)."""
    return BY_NAME[name]


def deletion_order(entities: list[RecordedEntity]) -> list[RecordedEntity]:
    """Dependents before what they depend on: kinds in reverse install order, newest first within a
    kind. (Creation order alone is not enough: an MCP added by an update is newer than the agent
    that now uses it.)"""
    return sorted(entities, key=lambda r: (-ORDER.index(r.kind), -r.seq))
