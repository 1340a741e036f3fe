"""MCP server specs (with their declared catalogs) and MCP instances."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SecretStr,
)

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.document.names import (
    ENV_NAME_PATTERN,
)
from bundle_operator.platform.models.artifacts import ArtifactRef, Runtime
from bundle_operator.platform.models.base import (
    ApiModel,
    Entity,
    EntityId,
    MemberEntryName,
    Name,
    Url,
    Value,
)

# --- MCP server specs -------------------------------------------------------------------------

ServerType = Literal["command", "docker", "url"]
FieldType = Literal["string", "secret", "url", "number", "boolean"]


class SchemaFieldIn(ApiModel):
    """An env or header entry as declared; ``type`` decides ``secret`` when given."""

    name: Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
    type: FieldType | None = None
    secret: bool | None = None
    required: bool = True
    description: Annotated[str, Field(max_length=2000)] = ""


class SchemaField(ApiModel):
    """An env or header entry as stored, with ``secret`` settled by the MCP service."""

    name: str
    type: FieldType | None
    secret: bool
    required: bool
    description: str


class CatalogTool(ApiModel):
    """A tool an MCP server offers (on the reference platform, declared instead of discovered)."""

    name: MemberEntryName
    title: Annotated[str, Field(max_length=500)] | None = None
    description: Annotated[str, Field(max_length=8000)] = ""
    annotations: dict[str, Any] = Field(default_factory=dict)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class CatalogPromptArgument(ApiModel):
    """An argument of a member's prompt."""

    name: MemberEntryName
    description: Annotated[str, Field(max_length=2000)] = ""
    required: bool = False


class CatalogPrompt(ApiModel):
    """A prompt an MCP server offers."""

    name: MemberEntryName
    title: Annotated[str, Field(max_length=500)] | None = None
    description: Annotated[str, Field(max_length=8000)] = ""
    arguments: Annotated[list[CatalogPromptArgument], Field(max_length=50)] = Field(default_factory=list)


class CatalogResource(ApiModel):
    """A resource an MCP server offers, keyed by its URI."""

    uri: Url
    name: Annotated[str, Field(max_length=500)] = ""
    title: Annotated[str, Field(max_length=500)] | None = None
    description: Annotated[str, Field(max_length=8000)] = ""
    mime_type: Annotated[str, Field(max_length=200)] | None = None


class Catalog(ApiModel):
    """What a server offers; stands in for discovery on the reference platform."""

    tools: Annotated[list[CatalogTool], Field(max_length=500)] = Field(default_factory=list)
    prompts: Annotated[list[CatalogPrompt], Field(max_length=500)] = Field(default_factory=list)
    resources: Annotated[list[CatalogResource], Field(max_length=500)] = Field(default_factory=list)


class McpServerCreate(ApiModel):
    """A new MCP server spec: how to run or reach the server and which inputs it takes."""

    name: Name
    type: ServerType
    command: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    args: Annotated[list[Annotated[str, Field(max_length=8192)]], Field(max_length=200)] = Field(
        default_factory=list
    )
    image: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    env_schema: Annotated[list[SchemaFieldIn], Field(max_length=200)] = Field(default_factory=list)
    endpoint_url: Url | None = None
    headers_schema: Annotated[list[SchemaFieldIn], Field(max_length=200)] = Field(default_factory=list)
    catalog: Catalog = Field(default_factory=Catalog)
    runtime: Runtime | None = None
    artifact: ArtifactRef | None = None


class McpServerUpdate(ApiModel):
    """Changes to an MCP server spec; ``type`` cannot change."""

    name: Name | None = None
    command: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    args: Annotated[list[Annotated[str, Field(max_length=8192)]], Field(max_length=200)] | None = None
    image: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    env_schema: Annotated[list[SchemaFieldIn], Field(max_length=200)] | None = None
    endpoint_url: Url | None = None
    headers_schema: Annotated[list[SchemaFieldIn], Field(max_length=200)] | None = None
    catalog: Catalog | None = None
    runtime: Runtime | None = None
    artifact: ArtifactRef | None = None


class McpServer(Entity):
    """A stored MCP server spec."""

    name: str
    type: ServerType
    command: str | None
    args: list[str]
    image: str | None
    env_schema: list[SchemaField]
    endpoint_url: str | None
    headers_schema: list[SchemaField]
    catalog: Catalog
    runtime: Runtime | None = None
    artifact: ArtifactRef | None = None


# --- MCP instances ----------------------------------------------------------------------------


class McpInstanceCreate(ApiModel):
    """A configured instance of a server spec; secret inputs must be secret references."""

    server_id: EntityId
    name: Name
    env: dict[str, Value] = Field(default_factory=dict)
    headers: dict[str, Value] = Field(default_factory=dict)
    args: Annotated[list[Value], Field(max_length=200)] | None = None
    endpoint_url: Value | None = None
    context_secret: SecretStr | None = Field(default=None, min_length=32, max_length=512)
    context_secret_id: EntityId | None = None


class McpInstanceUpdate(ApiModel):
    """Changes to an instance; null on ``context_secret_id`` turns context signing off."""

    name: Name | None = None
    env: dict[str, Value] | None = None
    headers: dict[str, Value] | None = None
    args: Annotated[list[Value], Field(max_length=200)] | None = None
    endpoint_url: Value | None = None
    context_secret: SecretStr | None = Field(default=None, min_length=32, max_length=512)
    context_secret_id: EntityId | None = None


HealthState = Literal["running", "idle", "starting", "crashed", "tree_changed", "failed"]


class InstanceHealth(ApiModel):
    """How the platform's own process of an instance fares (instances it runs over stdio)."""

    state: HealthState
    message: str
    checked_at: datetime


class McpInstance(Entity):
    """A stored MCP instance; secret values appear only as references."""

    server_id: str
    name: str
    env: dict[str, Value]
    headers: dict[str, Value]
    args: list[Value] | None
    endpoint_url: Value | None
    context_secret_id: str | None
    context_signing: bool
    # None for an instance the platform does not run itself (a url or docker server, say).
    health: InstanceHealth | None = None
