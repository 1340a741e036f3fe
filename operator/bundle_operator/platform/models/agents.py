"""Skills, agents, channels, triggers and policies."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr

from bundle_operator.platform.models.base import ApiModel, Entity, EntityId, Name, Schedule, Text, Url

# --- Skills -----------------------------------------------------------------------------------


class SkillCreate(ApiModel):
    """A skill from inline SKILL.md ``content`` or a GitHub ``source_url``; the name comes from SKILL.md."""

    source_type: Literal["inline", "github"]
    content: Annotated[str, Field(max_length=262_144)] | None = None
    source_url: Url | None = None


class SkillUpdate(ApiModel):
    """New SKILL.md content (inline) or a new source URL (github)."""

    content: Annotated[str, Field(max_length=262_144)] | None = None
    source_url: Url | None = None


class Skill(Entity):
    """A stored skill with the fields its SKILL.md front matter declares."""

    name: str
    description: str
    source_type: Literal["inline", "github"]
    content: str
    source_url: str | None
    metadata: dict[str, Any]


# --- Agents, channels, triggers, policies -----------------------------------------------------


class AgentCreate(ApiModel):
    """A new agent wired to MCP instances and skills by id."""

    name: Name
    description: Text = ""
    instructions: Annotated[str, Field(max_length=100_000)] = ""
    model: Annotated[str, Field(min_length=1, max_length=200)]
    mcp_instance_ids: Annotated[list[EntityId], Field(max_length=100)] = Field(default_factory=list)
    skill_ids: Annotated[list[EntityId], Field(max_length=100)] = Field(default_factory=list)
    knowledge_set_ids: Annotated[list[EntityId], Field(max_length=100)] = Field(default_factory=list)


class AgentUpdate(ApiModel):
    """Changes to an agent; ``archived: true`` archives it."""

    name: Name | None = None
    description: Text | None = None
    instructions: Annotated[str, Field(max_length=100_000)] | None = None
    model: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    mcp_instance_ids: Annotated[list[EntityId], Field(max_length=100)] | None = None
    skill_ids: Annotated[list[EntityId], Field(max_length=100)] | None = None
    knowledge_set_ids: Annotated[list[EntityId], Field(max_length=100)] | None = None
    archived: bool | None = None


class Agent(Entity):
    """A stored agent."""

    name: str
    description: str
    instructions: str
    model: str
    mcp_instance_ids: list[str]
    skill_ids: list[str]
    # The platform always sends it; the default keeps agents built in memory before 0.2.0 valid.
    knowledge_set_ids: list[str] = Field(default_factory=list)
    archived: bool


class ChannelCreate(ApiModel):
    """A Telegram channel; give the bot token as a value (stored as a secret) or a secret id."""

    type: Literal["telegram"]
    name: Annotated[str, Field(max_length=200)] = ""
    agent_id: EntityId
    bot_token: SecretStr | None = Field(default=None, min_length=1, max_length=512)
    bot_token_secret_id: EntityId | None = None
    enabled: bool = False


class ChannelUpdate(ApiModel):
    """Changes to a channel."""

    name: Annotated[str, Field(max_length=200)] | None = None
    agent_id: EntityId | None = None
    bot_token: SecretStr | None = Field(default=None, min_length=1, max_length=512)
    bot_token_secret_id: EntityId | None = None
    enabled: bool | None = None


class Channel(Entity):
    """A stored channel; its bot token lives in the secret store."""

    type: Literal["telegram"]
    name: str
    agent_id: str
    bot_token_secret_id: str
    enabled: bool


Timezone = Annotated[str, Field(min_length=1, max_length=100)]


class TriggerCreate(ApiModel):
    """A cron trigger; creating one schedules it at once, so it has no ``enabled`` field."""

    name: Name
    type: Literal["cron"]
    agent_id: EntityId
    schedule: Schedule
    timezone: Timezone = "UTC"
    message: Annotated[str, Field(max_length=20_000)] = ""


class TriggerUpdate(ApiModel):
    """Changes to a trigger; ``enabled: false`` stops it."""

    name: Name | None = None
    agent_id: EntityId | None = None
    schedule: Schedule | None = None
    timezone: Timezone | None = None
    message: Annotated[str, Field(max_length=20_000)] | None = None
    enabled: bool | None = None


class Trigger(Entity):
    """A stored trigger; ``next_run_at`` is set while it is enabled."""

    name: str
    type: Literal["cron"]
    agent_id: str
    schedule: str
    timezone: str
    message: str
    enabled: bool
    next_run_at: datetime | None


PolicyType = Literal["answer_check", "spend_cap", "tool_approval"]


class PolicyCreate(ApiModel):
    """A policy bound to an agent; ``config`` is free-form for its type."""

    type: PolicyType
    agent_id: EntityId
    config: dict[str, Any] = Field(default_factory=dict)


class PolicyUpdate(ApiModel):
    """Changes to a policy; its type cannot change."""

    agent_id: EntityId | None = None
    config: dict[str, Any] | None = None


class Policy(Entity):
    """A stored policy."""

    type: PolicyType
    agent_id: str
    config: dict[str, Any]
