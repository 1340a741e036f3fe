"""Pydantic models of the bundle document, schema_version 0.1.0 and 0.2.0 (DESIGN.md §3).

0.2.0 adds knowledge sets, apps and an agent's knowledge sets; a 0.1.0 document uses none of them
(``knowledge_rules`` refuses one that does) and means what it always meant.

The models check shapes and types only; rules that span fields or entities (keys, references,
setup placeholders, context secrets, gateway naming and limits) live in the check modules, which
report them with stable codes and JSON Pointer paths.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt, StrictStr

SCHEMA_VERSION = "0.1.0"
# The newest format this operator reads; documents that need none of its additions stay 0.1.0.
LATEST_SCHEMA_VERSION = "0.2.0"
SCHEMA_VERSIONS: tuple[str, ...] = (SCHEMA_VERSION, LATEST_SCHEMA_VERSION)

SetupType = Literal["string", "secret", "url", "number", "boolean"]
McpType = Literal["command", "docker", "url"]
ArtifactRuntime = Literal["node", "python", "binary"]
PolicyType = Literal["answer_check", "spend_cap", "tool_approval"]
RequirementKind = Literal["model", "tool", "knowledge_source"]
RequirementPolicy = Literal["strip", "block", "substitute"]
ResourceMimeType = Literal["text/markdown", "text/plain", "text/csv", "application/json", "application/yaml"]

# Strict scalars: YAML turns `version: 1.0` into a float and `on: yes` into a bool; the format
# wants the author to say what they mean, so nothing is coerced.
Text = StrictStr


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SetupField(_Model):
    """A value the installer supplies; referred to elsewhere as ``${setup.<key>}``."""

    key: Text
    label: Text
    type: SetupType
    required: StrictBool = True
    description: Text | None = None
    default: StrictStr | StrictInt | float | StrictBool | None = None


class _McpBase(_Model):
    key: Text
    name: Text
    # Allowed on every type so that misuse gets its own code instead of "unknown field".
    context_secret: Text | None = None


class McpArtifact(_Model):
    """The .mcpb archive a command MCP runs from, named by content; delivered before the MCP."""

    digest: Text
    entry: Text
    # The OS and architecture a binary server's program is built for (``linux/amd64``).
    platform: Text | None = None


class CommandMcp(_McpBase):
    """An MCP server the platform starts with one of the allowed runtimes, or from its archive."""

    type: Literal["command"]
    command: Text
    args: list[Text] = Field(default_factory=list)
    env: dict[str, Text] = Field(default_factory=dict)
    runtime: ArtifactRuntime | None = None
    artifact: McpArtifact | None = None


class DockerMcp(_McpBase):
    """An MCP server the platform runs from a container image."""

    type: Literal["docker"]
    image: Text
    args: list[Text] = Field(default_factory=list)
    env: dict[str, Text] = Field(default_factory=dict)


class UrlMcp(_McpBase):
    """A remote MCP server reached over HTTP."""

    type: Literal["url"]
    endpoint_url: Text
    headers: dict[str, Text] = Field(default_factory=dict)


Mcp = Annotated[CommandMcp | DockerMcp | UrlMcp, Field(discriminator="type")]


class InlineSkill(_Model):
    """A skill whose SKILL.md travels in the document."""

    key: Text
    source_type: Literal["inline"]
    content: Text


class GithubSkill(_Model):
    """A skill the platform fetches, with the files beside its SKILL.md, from GitHub."""

    key: Text
    source_type: Literal["github"]
    source_url: Text


Skill = Annotated[InlineSkill | GithubSkill, Field(discriminator="source_type")]


class Agent(_Model):
    """An agent wired to MCPs and skills by key."""

    key: Text
    name: Text
    description: Text | None = None
    instructions: Text | None = None
    model: Text | None = None
    mcps: list[Text] = Field(default_factory=list)
    skills: list[Text] = Field(default_factory=list)
    knowledge_sets: list[Text] = Field(default_factory=list)  # 0.2.0


class Channel(_Model):
    """A chat channel (Telegram only in 0.1.0) that reaches an agent."""

    key: Text
    type: Literal["telegram"]
    agent: Text
    bot_token: Text
    enabled: StrictBool = False


class Automation(_Model):
    """A cron schedule that sends an agent a message."""

    key: Text
    type: Literal["cron"]
    agent: Text
    schedule: Text
    timezone: Text = "UTC"
    message: Text
    enabled: StrictBool = False


class Policy(_Model):
    """A governance policy bound to an agent; ``config`` is free-form per type."""

    key: Text
    type: PolicyType
    agent: Text
    config: dict[str, JsonValue] = Field(default_factory=dict)


class Requirement(_Model):
    """Something the bundle expects the target platform to have."""

    kind: RequirementKind
    ref: Text
    policy: RequirementPolicy


class GatewayTool(_Model):
    """How the gateway presents one member tool."""

    member: Text
    tool: Text
    enabled: StrictBool = True
    override_name: Text | None = None
    override_title: Text | None = None
    override_description: Text | None = None
    override_annotations: dict[str, JsonValue] | None = None


class GatewayMemberPrompt(_Model):
    """Curation of one prompt a member serves."""

    member: Text
    name: Text
    enabled: StrictBool = True
    title: Text | None = None
    description: Text | None = None


class GatewayMemberResource(_Model):
    """Curation of one resource a member serves, keyed by URI."""

    member: Text
    uri: Text
    enabled: StrictBool = True
    title: Text | None = None
    description: Text | None = None


class PromptArgument(_Model):
    """An argument a client fills in; ``values`` are completion suggestions."""

    name: Text
    required: StrictBool = False
    values: list[Text] = Field(default_factory=list)


class PromptMessage(_Model):
    """One prompt message: literal text with ``{{arg}}`` placeholders, or an embedded resource."""

    role: Literal["user", "assistant"]
    text: Text | None = None
    resource: Text | None = None


class GatewayPrompt(_Model):
    """A prompt the gateway bundle owns (no member prefix)."""

    name: Text
    title: Text | None = None
    description: Text | None = None
    arguments: list[PromptArgument] = Field(default_factory=list)
    messages: list[PromptMessage] = Field(default_factory=list)


class GatewayResource(_Model):
    """A text document the gateway bundle owns, read as ``bundle://resources/<name>``."""

    name: Text
    title: Text | None = None
    mime_type: ResourceMimeType = "text/markdown"
    content: Text


class Gateway(_Model):
    """The gateway view: ordered members, tool curation, and the bundle's own prompts and resources."""

    description: Text | None = None
    overview: Text | None = None
    members: list[Text] = Field(default_factory=list)
    tools: list[GatewayTool] = Field(default_factory=list)
    member_prompts: list[GatewayMemberPrompt] = Field(default_factory=list)
    member_resources: list[GatewayMemberResource] = Field(default_factory=list)
    prompts: list[GatewayPrompt] = Field(default_factory=list)
    resources: list[GatewayResource] = Field(default_factory=list)


class _Source(_Model):
    # Credentials are ``${setup.x}`` references to secret fields only; a literal is refused.
    sync_schedule: Text | None = None
    credentials: dict[str, Text] = Field(default_factory=dict)


class StatutesSource(_Source):
    """Statutes every instance ingests from the same public source; they travel as written."""

    type: Literal["statutes"]
    laws: list[Text]


class WebsiteSource(_Source):
    """Web pages crawled as listed; the list travels as written."""

    type: Literal["website"]
    urls: list[Text]


class S3Source(_Source):
    """An S3 bucket; the bucket is the tenant address, the endpoint ties it to an organisation."""

    type: Literal["s3"]
    bucket: Text
    prefix: Text | None = None
    region: Text | None = None
    endpoint: Text | None = None


class SftpSource(_Source):
    """A directory on an SFTP host."""

    type: Literal["sftp"]
    host: Text
    port: StrictInt | None = None
    dir: Text | None = None
    user: Text | None = None


class SmbSource(_Source):
    """A Windows (SMB) share."""

    type: Literal["smb"]
    server: Text
    share: Text
    domain: Text | None = None
    username: Text | None = None


class WebdavSource(_Source):
    """A WebDAV folder."""

    type: Literal["webdav"]
    base_url: Text
    username: Text | None = None


class NextcloudSource(_Source):
    """A Nextcloud folder."""

    type: Literal["nextcloud"]
    base_url: Text
    username: Text | None = None


class OnedriveSource(_Source):
    """OneDrive folders reached through shared links."""

    type: Literal["onedrive"]
    shared_links: list[Text] = Field(default_factory=list)


class RisSource(_Source):
    """A council information system, which belongs to exactly one municipality."""

    type: Literal["ris"]
    host: Text


KnowledgeSource = Annotated[
    StatutesSource
    | WebsiteSource
    | S3Source
    | SftpSource
    | SmbSource
    | WebdavSource
    | NextcloudSource
    | OnedriveSource
    | RisSource,
    Field(discriminator="type"),
]


class KnowledgeSet(_Model):
    """A knowledge set: where its documents come from, never the documents themselves (0.2.0)."""

    key: Text
    name: Text
    description: Text | None = None
    data_description: Text | None = None
    # Source key -> source: the key is the source's identity across instances and versions.
    sources: dict[str, KnowledgeSource] = Field(default_factory=dict)


class App(_Model):
    """A small app users open; ``document`` is its definition as a JSON object (0.2.0)."""

    key: Text
    name: Text
    description: Text | None = None
    document: dict[str, JsonValue]
    mcps: list[Text] = Field(default_factory=list)


class Bundle(_Model):
    """A whole bundle document."""

    schema_version: Literal["0.1.0", "0.2.0"]
    name: Text
    version: Text | None = None
    description: Text | None = None
    setup: list[SetupField] = Field(default_factory=list)
    mcps: list[Mcp] = Field(default_factory=list)
    skills: list[Skill] = Field(default_factory=list)
    agents: list[Agent] = Field(default_factory=list)
    channels: list[Channel] = Field(default_factory=list)
    automations: list[Automation] = Field(default_factory=list)
    policies: list[Policy] = Field(default_factory=list)
    requires: list[Requirement] = Field(default_factory=list)
    gateway: Gateway | None = None
    knowledge_sets: list[KnowledgeSet] = Field(default_factory=list)  # 0.2.0
    apps: list[App] = Field(default_factory=list)  # 0.2.0
