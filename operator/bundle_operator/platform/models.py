"""Typed payloads of the platform API v1, shared by the client and the reference platform.

One set of pydantic models describes every request and response body: the client builds
requests from them, the reference platform validates requests with them, and the OpenAPI
document is generated from them, so the three cannot drift apart. ``extra="forbid"`` throughout:
an unknown field is refused with its path, and a response never carries an undeclared field.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.document.knowledge import (
    ALL_SOURCE_FIELDS,
    CREDENTIAL_NAME_PATTERN,
    MAX_APP_DOCUMENT,
    MAX_SOURCE_LIST,
    SOURCE_FIELDS,
    SourceType,
    app_document_size,
)
from bundle_operator.document.names import (
    DISPLAY_NAME_MAX,
    ENV_NAME_PATTERN,
    RESOURCE_NAME_MAX,
    RESOURCE_NAME_PATTERN,
    SLUG_MAX,
    SLUG_PATTERN,
    URL_NAME_PATTERN,
)

ID_PATTERN = r"^[a-z]{3}_[0-9a-z]{1,40}$"

Name = Annotated[str, Field(min_length=1, max_length=DISPLAY_NAME_MAX)]
Text = Annotated[str, Field(max_length=20_000)]
EntityId = Annotated[str, Field(pattern=ID_PATTERN)]
Slug = Annotated[str, Field(min_length=1, max_length=SLUG_MAX, pattern=SLUG_PATTERN)]
UrlName = Annotated[str, Field(pattern=URL_NAME_PATTERN)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
# A value the platform issues and shows once; SecretStr keeps it out of reprs and logs.
IssuedSecret = Annotated[SecretStr, WithJsonSchema({"type": "string", "readOnly": True})]


class ApiModel(BaseModel):
    """Base of every API body: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class SecretRef(ApiModel):
    """A value held in the workspace's secret store, referred to by the secret's id."""

    secret_id: EntityId


# A configuration value: written as plain text, or a reference to a stored secret.
Value = Annotated[str, Field(max_length=8192)] | SecretRef


class Entity(ApiModel):
    """Fields every stored entity carries; ``revision`` is also sent as the ETag."""

    id: EntityId
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime


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

    name: Slug
    title: Annotated[str, Field(max_length=500)] | None = None
    description: Annotated[str, Field(max_length=8000)] = ""
    annotations: dict[str, Any] = Field(default_factory=dict)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class CatalogPromptArgument(ApiModel):
    """An argument of a member's prompt."""

    name: Slug
    description: Annotated[str, Field(max_length=2000)] = ""
    required: bool = False


class CatalogPrompt(ApiModel):
    """A prompt an MCP server offers."""

    name: Slug
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


Schedule = Annotated[str, Field(min_length=1, max_length=200)]
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


# --- Knowledge sets ---------------------------------------------------------------------------

# Empty text is refused only where the type requires the field (see ``_belongs_to_type``).
SourceText = Annotated[str, Field(max_length=2048)]
SourceEntry = Annotated[str, Field(min_length=1, max_length=2048)]
SourceList = Annotated[list[SourceEntry], Field(max_length=MAX_SOURCE_LIST)]
CredentialName = Annotated[str, Field(pattern=CREDENTIAL_NAME_PATTERN)]
CredentialValue = Annotated[SecretStr, Field(min_length=1, max_length=8192)]


class KnowledgeSetCreate(ApiModel):
    """A new knowledge set: a named collection of sources an agent can search."""

    name: Name
    description: Text = ""
    data_description: Text = ""


class KnowledgeSetUpdate(ApiModel):
    """Changes to a knowledge set's texts; its sources change through their own routes."""

    name: Name | None = None
    description: Text | None = None
    data_description: Text | None = None


class KnowledgeSourcePut(ApiModel):
    """A source as written: ``type`` decides which of the other fields it takes and needs.

    ``credentials`` are write-only values kept in the workspace's secret store; None on a PUT
    keeps the ones stored, a dict replaces them all.
    """

    type: SourceType
    # validate_default: a required field left out is named like one sent for the wrong type.
    laws: SourceList | None = Field(default=None, validate_default=True)
    urls: Annotated[list[Url], Field(max_length=MAX_SOURCE_LIST)] | None = Field(
        default=None, validate_default=True
    )
    bucket: SourceText | None = Field(default=None, validate_default=True)
    prefix: SourceText | None = Field(default=None, validate_default=True)
    region: SourceText | None = Field(default=None, validate_default=True)
    endpoint: SourceText | None = Field(default=None, validate_default=True)
    host: SourceText | None = Field(default=None, validate_default=True)
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(default=None, validate_default=True)
    dir: SourceText | None = Field(default=None, validate_default=True)
    user: SourceText | None = Field(default=None, validate_default=True)
    server: SourceText | None = Field(default=None, validate_default=True)
    share: SourceText | None = Field(default=None, validate_default=True)
    domain: SourceText | None = Field(default=None, validate_default=True)
    username: SourceText | None = Field(default=None, validate_default=True)
    base_url: Url | None = Field(default=None, validate_default=True)
    shared_links: SourceList | None = Field(default=None, validate_default=True)
    sync_schedule: Schedule | None = None
    credentials: Annotated[dict[CredentialName, CredentialValue], Field(max_length=50)] | None = None

    @field_validator(*ALL_SOURCE_FIELDS)
    @classmethod
    def _belongs_to_type(cls, value: Any, info: ValidationInfo) -> Any:
        source_type = info.data.get("type")
        if source_type is None or info.field_name is None:
            return value  # the type itself was refused and is named already
        fields = SOURCE_FIELDS[source_type]
        if value is None:
            if info.field_name in fields.required:
                raise ValueError(f"a source of type '{source_type}' needs it")
            return value
        if info.field_name not in fields.all:
            raise ValueError(f"a source of type '{source_type}' does not take it")
        if info.field_name in fields.required and not value:
            raise ValueError("must not be empty")
        return value


class KnowledgeSource(ApiModel):
    """A stored source of a knowledge set; ``key`` is None for a source a user added themselves.

    Fields the type does not take are null; ``credentials`` maps each credential's name to the
    id of the secret holding it, and the values never come back.
    """

    id: str
    key: str | None
    type: SourceType
    laws: list[str] | None = None
    urls: list[str] | None = None
    bucket: str | None = None
    prefix: str | None = None
    region: str | None = None
    endpoint: str | None = None
    host: str | None = None
    port: int | None = None
    dir: str | None = None
    user: str | None = None
    server: str | None = None
    share: str | None = None
    domain: str | None = None
    username: str | None = None
    base_url: str | None = None
    shared_links: list[str] | None = None
    sync_schedule: str | None = None
    credentials: dict[str, str] = Field(default_factory=dict)
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime


class KnowledgeSet(Entity):
    """A stored knowledge set with its sources in creation order (read-only here), so one list
    of the collection shows everything."""

    name: str
    description: str
    data_description: str
    sources: list[KnowledgeSource]


# --- Apps -------------------------------------------------------------------------------------


def _document_size(document: dict[str, Any]) -> dict[str, Any]:
    try:
        size = app_document_size(document)
    except (TypeError, ValueError):
        raise ValueError("is not a JSON object") from None
    if size > MAX_APP_DOCUMENT:
        raise ValueError(f"is larger than {MAX_APP_DOCUMENT} bytes as JSON")
    return document


# An app's definition: a JSON object the platform serves as the app's UI.
AppDocument = Annotated[dict[str, Any], AfterValidator(_document_size)]


class AppCreate(ApiModel):
    """A new app with its first version's document."""

    name: Name
    description: Text = ""
    mcp_instance_ids: Annotated[list[EntityId], Field(max_length=100)] = Field(default_factory=list)
    document: AppDocument


class AppUpdate(ApiModel):
    """Changes to an app; ``archived: true`` archives it (running instances keep working)."""

    name: Name | None = None
    description: Text | None = None
    mcp_instance_ids: Annotated[list[EntityId], Field(max_length=100)] | None = None
    archived: bool | None = None


class App(Entity):
    """A stored app; ``latest_version`` and ``document`` are those of its latest unarchived
    version, null when every version is archived."""

    name: str
    description: str
    mcp_instance_ids: list[str]
    archived: bool
    latest_version: int | None
    document: dict[str, Any] | None


class AppVersionCreate(ApiModel):
    """A new version of an app: the next number, with this document."""

    document: AppDocument


class AppVersionUpdate(ApiModel):
    """Archive or restore one version of an app."""

    archived: bool


class AppVersion(ApiModel):
    """One version of an app, numbered 1, 2, ... in the order they were added."""

    version: int = Field(ge=1)
    document: dict[str, Any]
    archived: bool
    created_at: datetime


# --- Secrets ----------------------------------------------------------------------------------


class SecretCreate(ApiModel):
    """A value for the secret store; the value is write-only."""

    name: Name
    value: SecretStr = Field(min_length=1, max_length=65_536)


class SecretUpdate(ApiModel):
    """A new name or value for a stored secret."""

    name: Name | None = None
    value: SecretStr | None = Field(default=None, min_length=1, max_length=65_536)


class Secret(Entity):
    """A stored secret: its value is never returned."""

    name: str


# --- Gateway bundles --------------------------------------------------------------------------


class GatewayBundleCreate(ApiModel):
    """A gateway bundle: one virtual MCP server composed of members."""

    name: UrlName
    description: Annotated[str, Field(max_length=4000)] = ""
    overview: Text = ""


class GatewayBundleUpdate(ApiModel):
    """Changes to a bundle's texts; the name changes only through rename."""

    description: Annotated[str, Field(max_length=4000)] | None = None
    overview: Text | None = None


class GatewayBundle(Entity):
    """A stored gateway bundle."""

    name: str
    description: str
    overview: str


class GatewayRename(ApiModel):
    """Rename a bundle; refused unless ``force`` acknowledges that documents naming it go stale."""

    name: UrlName
    force: bool = False


class GatewayMemberPut(ApiModel):
    """Add or change a member: which MCP instance serves under the member's name."""

    mcp_instance_id: EntityId
    enabled: bool = True


class GatewayMember(ApiModel):
    """A member in the bundle's order; ``url`` is the upstream URL when the server is remote."""

    name: str
    mcp_instance_id: str
    enabled: bool
    position: int
    url: str | None
    healthy: bool
    message: str


class GatewayMemberOrder(ApiModel):
    """The whole member order: every member exactly once."""

    members: Annotated[list[Slug], Field(max_length=200)]


class GatewayToolCuration(ApiModel):
    """A tool's whole curation in one bundle; a field left out is cleared."""

    enabled: bool = True
    override_name: Slug | None = None
    override_title: Annotated[str, Field(max_length=500)] | None = None
    override_description: Annotated[str, Field(max_length=8000)] | None = None
    override_annotations: dict[str, Any] | None = None


class GatewayTool(ApiModel):
    """A tool the bundle can serve; ``id`` is ``member__tool``; ``stale`` once the member drops it."""

    id: str
    member: str
    tool: str
    presented_name: str
    enabled: bool
    member_enabled: bool
    override_name: str | None
    override_title: str | None
    override_description: str | None
    override_annotations: dict[str, Any] | None
    definition: CatalogTool | None
    stale: bool
    # The tool whose override holds this tool's member__tool name since discovery added it.
    shadowed_by: str | None = None
    # Whether the gateway serves the tool now: enabled, member enabled, not stale, not shadowed.
    served: bool = True


class GatewayEntryCuration(ApiModel):
    """How a member's prompt or resource shows in this bundle."""

    enabled: bool = True
    title: Annotated[str, Field(max_length=500)] | None = None
    description: Annotated[str, Field(max_length=8000)] | None = None


class GatewayMemberPrompt(ApiModel):
    """A member's prompt as this bundle presents it (``id`` is ``member__prompt``)."""

    id: str
    member: str
    name: str
    presented_name: str
    enabled: bool
    title: str | None
    description: str | None
    definition: CatalogPrompt | None
    stale: bool


class GatewayMemberResource(ApiModel):
    """A member's resource as this bundle presents it; see ``member_resource_id`` for ``id``."""

    id: str
    member: str
    uri: str
    enabled: bool
    title: str | None
    description: str | None
    definition: CatalogResource | None
    stale: bool


class PromptArgument(ApiModel):
    """An argument of a bundle prompt; ``values`` are completion suggestions."""

    name: Slug
    description: Annotated[str, Field(max_length=2000)] = ""
    required: bool = False
    values: Annotated[list[Annotated[str, Field(max_length=500)]], Field(max_length=100)] = Field(
        default_factory=list
    )


class PromptMessage(ApiModel):
    """One message of a bundle prompt: ``text`` with placeholders, or an embedded bundle ``resource``."""

    role: Literal["user", "assistant"]
    text: str | None = None
    resource: Annotated[str, Field(max_length=500)] | None = None

    @model_validator(mode="after")
    def _text_or_resource(self) -> PromptMessage:
        if (self.text is None) == (self.resource is None):
            raise ValueError("a message has exactly one of 'text' or 'resource'")
        return self


class GatewayPromptPut(ApiModel):
    """A bundle prompt, created or replaced by name."""

    name: Slug
    title: Annotated[str, Field(max_length=500)] | None = None
    description: Annotated[str, Field(max_length=8000)] = ""
    arguments: Annotated[list[PromptArgument], Field(max_length=50)] = Field(default_factory=list)
    messages: Annotated[list[PromptMessage], Field(min_length=1, max_length=100)]


class GatewayPrompt(GatewayPromptPut):
    """A stored bundle prompt."""

    updated_at: datetime


ResourceMimeType = Literal["text/markdown", "text/plain", "text/csv", "application/json", "application/yaml"]


class GatewayResourcePut(ApiModel):
    """A bundle resource (a text document), created or replaced by name; names may contain '/'."""

    name: Annotated[str, Field(min_length=1, max_length=RESOURCE_NAME_MAX, pattern=RESOURCE_NAME_PATTERN)]
    title: Annotated[str, Field(max_length=500)] | None = None
    mime_type: ResourceMimeType = "text/markdown"
    content: str


class GatewayResource(GatewayResourcePut):
    """A stored bundle resource; clients read it at ``uri``."""

    uri: str
    size: int
    updated_at: datetime


# --- Endpoints --------------------------------------------------------------------------------


class EndpointCreate(ApiModel):
    """An endpoint exposing a gateway bundle; ApiKey endpoints issue a key once, in the create response."""

    name: UrlName
    gateway_bundle_id: EntityId
    auth_mode: Literal["ApiKey", "OAuth"] = "ApiKey"
    profile: Literal["Default", "ChatGPT"] = "Default"
    enabled: bool = True


class EndpointUpdate(ApiModel):
    """Changes to an endpoint."""

    profile: Literal["Default", "ChatGPT"] | None = None
    enabled: bool | None = None


class Endpoint(Entity):
    """A stored endpoint; ``api_key`` is present only in the response that issued it."""

    name: str
    gateway_bundle_id: str
    auth_mode: Literal["ApiKey", "OAuth"]
    profile: Literal["Default", "ChatGPT"]
    enabled: bool
    url: str
    api_key: IssuedSecret | None = None


class ApiKeyIssued(ApiModel):
    """A freshly issued endpoint API key; the old one stops working."""

    api_key: IssuedSecret


class GatewayAuditEntry(ApiModel):
    """One tool call through an endpoint of the bundle; arguments are never recorded."""

    at: str
    bundle: str
    endpoint: str
    presented_name: str
    member: str | None
    tool: str | None
    duration_ms: float
    outcome: Literal["ok", "tool_error", "error", "refused"]
    error: str | None


class IdempotencyRecord(ApiModel):
    """What a create sent with an Idempotency-Key made, for finding it again after a crash."""

    key: str
    kind: str = Field(description="the collection path of the entity, e.g. agents")
    id: str
    exists: bool = Field(description="false when the entity was deleted since")


# --- Lists, errors, faults --------------------------------------------------------------------

T = TypeVar("T")


class Page(ApiModel, Generic[T]):
    """One page of a list; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None


class FieldError(BaseModel):
    """One field of a request that was refused, named by its dotted path."""

    model_config = ConfigDict(extra="ignore")

    field: str
    message: str
    line: int | None = None


class Problem(BaseModel):
    """An RFC 9457 problem document with a machine-readable ``code``."""

    model_config = ConfigDict(extra="ignore")

    type: str = "about:blank"
    title: str
    status: int
    code: str
    detail: str
    errors: list[FieldError] = Field(default_factory=list)
    holders: list[str] = Field(default_factory=list)


class FaultSpec(ApiModel):
    """Fail or delay matching calls: the ones after the first ``after``, ``times`` times.

    ``when: after`` runs the handler first and then answers ``status``: the change is made but
    the caller sees a failure, as when a response is lost on the way back.
    """

    method: Annotated[str, Field(pattern=r"^(\*|[A-Za-z]+)$")] = "*"
    path: Annotated[str, Field(min_length=1, max_length=1000, pattern=r"^/")]
    after: int = Field(default=0, ge=0, le=1_000_000)
    times: int = Field(default=1, ge=1, le=1_000_000)
    status: int | None = Field(default=None, ge=400, le=599)
    delay_ms: int = Field(default=0, ge=0, le=60_000)
    retry_after: int | None = Field(default=None, ge=0, le=3600)
    when: Literal["before", "after"] = "before"


class Fault(FaultSpec):
    """An armed fault with its counters."""

    id: str
    matched: int
    injected: int


class Health(ApiModel):
    """The server is up."""

    status: Literal["ok"]


def member_resource_id(member: str, uri: str) -> str:
    """The id of a member's resource in a bundle: member, ``__`` and the URI in unpadded base64url."""
    encoded = base64.urlsafe_b64encode(uri.encode()).decode().rstrip("=")
    return f"{member}__{encoded}"


def parse_member_resource_id(entry_id: str) -> tuple[str, str] | None:
    """Split a member resource id into (member, uri), or None when it is not one."""
    member, sep, encoded = entry_id.partition("__")
    if not sep or not member or not encoded:
        return None
    try:
        uri = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return member, uri
