"""The entity kinds of the platform API: where each lives and which models describe it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from bundle_operator.platform.models import (
    Agent,
    AgentCreate,
    AgentUpdate,
    ApiModel,
    App,
    AppCreate,
    AppUpdate,
    Channel,
    ChannelCreate,
    ChannelUpdate,
    Endpoint,
    EndpointCreate,
    EndpointUpdate,
    Entity,
    GatewayBundle,
    GatewayBundleCreate,
    GatewayBundleUpdate,
    KnowledgeSet,
    KnowledgeSetCreate,
    KnowledgeSetUpdate,
    McpInstance,
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServer,
    McpServerCreate,
    McpServerUpdate,
    Policy,
    PolicyCreate,
    PolicyUpdate,
    Secret,
    SecretCreate,
    SecretUpdate,
    Skill,
    SkillCreate,
    SkillUpdate,
    Trigger,
    TriggerCreate,
    TriggerUpdate,
)

# The entity, create and update models of a kind; protocol.py and client.py type their methods
# with these same variables.
E = TypeVar("E", bound=Entity)
C = TypeVar("C", bound=ApiModel)
U = TypeVar("U", bound=ApiModel)


@dataclass(frozen=True)
class Kind(Generic[E, C, U]):
    """One kind of entity: its collection path, id prefix, models and the list filters it takes."""

    path: str
    prefix: str
    entity: type[E]
    create: type[C]
    update: type[U]
    filters: tuple[str, ...]


MCP_SERVERS = Kind("mcp-servers", "mcs", McpServer, McpServerCreate, McpServerUpdate, ("name", "type"))
MCP_INSTANCES = Kind(
    "mcp-instances", "mci", McpInstance, McpInstanceCreate, McpInstanceUpdate, ("name", "server_id")
)
SKILLS = Kind("skills", "skl", Skill, SkillCreate, SkillUpdate, ("name", "source_type"))
AGENTS = Kind("agents", "agt", Agent, AgentCreate, AgentUpdate, ("name", "archived"))
CHANNELS = Kind("channels", "chn", Channel, ChannelCreate, ChannelUpdate, ("name", "agent_id"))
TRIGGERS = Kind("triggers", "trg", Trigger, TriggerCreate, TriggerUpdate, ("name", "agent_id"))
POLICIES = Kind("policies", "pol", Policy, PolicyCreate, PolicyUpdate, ("type", "agent_id"))
SECRETS = Kind("secrets", "sec", Secret, SecretCreate, SecretUpdate, ("name",))
GATEWAY_BUNDLES = Kind(
    "gateway-bundles", "gwb", GatewayBundle, GatewayBundleCreate, GatewayBundleUpdate, ("name",)
)
ENDPOINTS = Kind("endpoints", "ept", Endpoint, EndpointCreate, EndpointUpdate, ("name", "gateway_bundle_id"))
KNOWLEDGE_SETS = Kind(
    "knowledge-sets", "kns", KnowledgeSet, KnowledgeSetCreate, KnowledgeSetUpdate, ("name",)
)
APPS = Kind("apps", "app", App, AppCreate, AppUpdate, ("name", "archived"))

ALL_KINDS: tuple[Kind[Any, Any, Any], ...] = (
    MCP_SERVERS,
    MCP_INSTANCES,
    SKILLS,
    AGENTS,
    CHANNELS,
    TRIGGERS,
    POLICIES,
    SECRETS,
    GATEWAY_BUNDLES,
    ENDPOINTS,
    KNOWLEDGE_SETS,
    APPS,
)

BY_PATH: dict[str, Kind[Any, Any, Any]] = {kind.path: kind for kind in ALL_KINDS}
"""Each kind by its collection path (as a record names it)."""
