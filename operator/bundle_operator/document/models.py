"""Pydantic models of the bundle document, schema_version 0.1.0 and 0.2.0 (DESIGN.md §3).

0.2.0 adds knowledge sets, apps and an agent's knowledge sets; a 0.1.0 document uses none of them
(``knowledge_rules`` refuses one that does) and means what it always meant.

The models check shapes and types only; rules that span fields or entities (keys, references,
setup placeholders, context secrets, gateway naming and limits) live in the check modules, which
report them with stable codes and JSON Pointer paths. Each field carries an ``About``: the text
editors show through the JSON Schema and the reference pages print.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, final

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt, StrictStr
from pydantic.fields import FieldInfo

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


@final
class About:
    """A field's user-facing description; validation ignores it (``json_schema`` puts it in the schema).

    Not ``Field(description=...)``: that would also rewrite the Bundle CRD's embedded schema, whose
    shorter kubectl-explain texts ``k8s/crdgen.py`` keeps on its own.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def field_about(info: FieldInfo) -> str | None:
    """The ``About`` text a model field carries, if any."""
    return next((item.text for item in info.metadata if isinstance(item, About)), None)


_KEY: Final = (
    "The entity's key: a letter, then letters, digits and '_' (at most 128 characters). Keys are "
    "unique across every section of the bundle and are how entities refer to each other."
)
_DISPLAY_NAME: Final = "shown on the platform: 1 to 200 characters."
_SETUP_REF: Final = "${setup.<key>}"
_CRON: Final = (
    "a five-field cron expression, minute hour day-of-month month day-of-week, where month and day "
    "names such as jan or mon may stand for numbers"
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SetupField(_Model):
    """A value the installer supplies; referred to elsewhere as ``${setup.<key>}``."""

    key: Annotated[
        Text,
        About(
            "The field's key: a letter, then letters, digits and '_' (at most 128 characters), unique "
            "among the setup fields. Other fields use the value as ${setup.<key>}; an installer gives "
            "it under this key (bundlectl --setup-file, or a BundleInstallation's spec.setup)."
        ),
    ]
    label: Annotated[Text, About("A short name for the value, shown to the person installing the bundle.")]
    type: Annotated[
        SetupType,
        About(
            "What the value is. secret: a credential, stored as a secret on the platform and the only "
            "type a credential may come from; url: an absolute http(s) URL; number: a number (or a "
            "string holding one); boolean: true or false; string: any text."
        ),
    ]
    required: Annotated[
        StrictBool,
        About(
            "Whether the installer must give a value. A required field with no value (an empty string "
            "counts as none) and no default blocks the install (missing_setup). Absent: true."
        ),
    ] = True
    description: Annotated[
        Text | None, About("What the value is for and where to find it, for the person installing.")
    ] = None
    default: Annotated[
        StrictStr | StrictInt | float | StrictBool | None,
        About(
            "The value used when the installer gives none; it must fit the type "
            "(invalid_setup_default). Not allowed on a secret field. Absent: no default."
        ),
    ] = None


class _McpBase(_Model):
    key: Annotated[Text, About(_KEY)]
    name: Annotated[Text, About(f"The MCP server's display name, {_DISPLAY_NAME}")]
    # Allowed on every type so that misuse gets its own code instead of "unknown field".
    context_secret: Annotated[
        Text | None,
        About(
            "The key the platform signs each call's context with for a url MCP: exactly one "
            f"{_SETUP_REF} reference to a secret setup field, whose value must be 32 to 512 "
            "characters. A literal value is refused, and so is the field on a command or docker "
            "MCP. Absent: calls are not signed."
        ),
    ] = None


class McpArtifact(_Model):
    """The .mcpb archive a command MCP runs from, named by content; delivered before the MCP."""

    digest: Annotated[
        Text,
        About(
            "The archive's content address: sha256: and 64 lowercase hex digits. Install uploads "
            "the archive with this digest to the platform once per workspace."
        ),
    ]
    entry: Annotated[
        Text,
        About(
            "The server's entry point from the archive's manifest: a relative path inside the "
            "archive, parts joined by '/', none empty, '.' or '..' (1 to 1000 characters)."
        ),
    ]
    # The OS and architecture a binary server's program is built for (``linux/amd64``).
    platform: Annotated[
        Text | None,
        About(
            "For a binary server only: the OS and architecture its program is built for, as "
            "<os>/<arch> with os linux, darwin or win32 (linux/amd64). A platform of another kind "
            "blocks the install (binary_platform). Absent: not checked."
        ),
    ] = None


_ARGS: Final = (
    "The server's command-line arguments, in order. They may use ${setup.<key>} placeholders; a credential "
    "in them must come from a secret setup field (credential_literal otherwise). Absent: none."
)
_ENV: Final = (
    "Environment variables of the server, name to value. Names start with a letter or '_' and hold "
    "at most 128 letters, digits, '_' and '-'; values may use ${setup.<key>} placeholders, and a credential "
    "must come from a secret setup field. Absent: none."
)


class CommandMcp(_McpBase):
    """An MCP server the platform starts with one of the allowed runtimes, or from its archive."""

    type: Annotated[Literal["command"], About("command: the platform starts the server as a process.")]
    command: Annotated[
        Text,
        About(
            "The program that starts the server. Without an artifact: one of npx, uvx, uv, python, "
            "python3, node, bunx or deno; any other command, a local path, or a reference to "
            "${CLAUDE_PLUGIN_ROOT} makes analyze skip the MCP with a warning (unsupported_runtime). "
            "With an artifact: node for a node server, python or python3 for a python server, "
            "${__dirname}/<path> for a binary server, <path> being the program's place in the archive."
        ),
    ]
    args: Annotated[
        list[Text],
        About(
            _ARGS + " With an artifact, ${__dirname} stands for the folder the archive is unpacked "
            "into; without one it is refused."
        ),
    ] = Field(default_factory=list)
    env: Annotated[dict[str, Text], About(_ENV)] = Field(default_factory=dict)
    runtime: Annotated[
        ArtifactRuntime | None,
        About(
            "How a server made from an .mcpb archive runs: node, python or binary. Required with "
            "artifact and refused without it."
        ),
    ] = None
    artifact: Annotated[
        McpArtifact | None,
        About(
            "The .mcpb archive the server runs from, uploaded to the platform before the MCP is "
            "created. Absent: the command runs from a package the runtime fetches itself."
        ),
    ] = None


class DockerMcp(_McpBase):
    """An MCP server the platform runs from a container image."""

    type: Annotated[Literal["docker"], About("docker: the platform runs the server from a container image.")]
    image: Annotated[Text, About("The container image reference, such as ghcr.io/acme/server:1.2.0.")]
    args: Annotated[list[Text], About(_ARGS)] = Field(default_factory=list)
    env: Annotated[dict[str, Text], About(_ENV)] = Field(default_factory=dict)


class UrlMcp(_McpBase):
    """A remote MCP server reached over HTTP."""

    type: Annotated[Literal["url"], About("url: a remote server the platform reaches over HTTP.")]
    endpoint_url: Annotated[
        Text,
        About(
            f"The server's absolute http(s) URL. It may use {_SETUP_REF} placeholders and must "
            "still be an http(s) URL once they are filled in (invalid_url); a password, a "
            "credential-named query parameter or a secret-looking path part must come from a "
            "secret setup field."
        ),
    ]
    headers: Annotated[
        dict[str, Text],
        About(
            "HTTP headers sent with every request, name to value. Names follow the same rule as "
            f"environment variable names; values may use {_SETUP_REF} placeholders, and a credential "
            "(an Authorization value, say) must come from a secret setup field. Absent: none."
        ),
    ] = Field(default_factory=dict)


Mcp = Annotated[CommandMcp | DockerMcp | UrlMcp, Field(discriminator="type")]


class InlineSkill(_Model):
    """A skill whose SKILL.md travels in the document."""

    key: Annotated[Text, About(_KEY)]
    source_type: Annotated[Literal["inline"], About("inline: the SKILL.md text is in content.")]
    content: Annotated[
        Text,
        About(
            "The whole SKILL.md: YAML front matter between --- lines, then Markdown. The front matter "
            "needs name (lowercase letters, digits and single hyphens, at most 64 characters) and "
            "description (at most 1024 characters); front matter that does not parse or lacks them "
            "blocks, naming the line (invalid_skill_frontmatter)."
        ),
    ]


class GithubSkill(_Model):
    """A skill the platform fetches, with the files beside its SKILL.md, from GitHub."""

    key: Annotated[Text, About(_KEY)]
    source_type: Annotated[
        Literal["github"], About("github: the platform fetches the skill's folder from GitHub.")
    ]
    source_url: Annotated[
        Text,
        About(
            "The skill's folder: https://github.com/<owner>/<repo>, optionally followed by "
            "/tree/<ref>/<folder> (invalid_skill_source otherwise)."
        ),
    ]


Skill = Annotated[InlineSkill | GithubSkill, Field(discriminator="source_type")]


class Agent(_Model):
    """An agent wired to MCPs and skills by key."""

    key: Annotated[Text, About(_KEY)]
    name: Annotated[Text, About(f"The agent's display name, {_DISPLAY_NAME}")]
    description: Annotated[
        Text | None, About("What the agent does, for people choosing one. Absent: empty.")
    ] = None
    instructions: Annotated[
        Text | None, About("The agent's system instructions, given to its model. Absent: empty.")
    ] = None
    model: Annotated[
        Text | None,
        About(
            "The model the agent runs on, as the platform names it (gpt-4.1). A model requirement "
            "may substitute it at install time. Absent: the platform's default model."
        ),
    ] = None
    mcps: Annotated[
        list[Text],
        About(
            "Keys of the bundle's MCPs whose tools the agent may use. An MCP analyze skips is left "
            "out, with a warning (dependency_skipped). Absent: none."
        ),
    ] = Field(default_factory=list)
    skills: Annotated[list[Text], About("Keys of the bundle's skills the agent uses. Absent: none.")] = Field(
        default_factory=list
    )
    knowledge_sets: Annotated[
        list[Text],
        About("Keys of the bundle's knowledge sets the agent answers from (schema 0.2.0). Absent: none."),
    ] = Field(default_factory=list)  # 0.2.0


_AGENT_REF: Final = "The key of the bundle's agent that "
_ENABLED: Final = (
    "Whether the {what} runs once the installation is activated (bundlectl install --activate, or "
    "a BundleInstallation's spec.activate); it is always installed disabled before that. Absent: false."
)


class Channel(_Model):
    """A chat channel (Telegram) that reaches an agent."""

    key: Annotated[Text, About(_KEY)]
    type: Annotated[Literal["telegram"], About("The chat service; telegram is the only one.")]
    agent: Annotated[Text, About(_AGENT_REF + "answers the channel's messages.")]
    bot_token: Annotated[
        Text,
        About(
            f"The bot's token: exactly one {_SETUP_REF} reference to a secret setup field, whose value "
            "must look like a Telegram bot token (digits, ':' and the key). A literal token is "
            "refused (credential_literal)."
        ),
    ]
    enabled: Annotated[StrictBool, About(_ENABLED.format(what="channel"))] = False


class Automation(_Model):
    """A cron schedule that sends an agent a message."""

    key: Annotated[Text, About(_KEY)]
    type: Annotated[Literal["cron"], About("The trigger kind; cron is the only one.")]
    agent: Annotated[Text, About(_AGENT_REF + "receives the message.")]
    schedule: Annotated[Text, About(f"When the message is sent: {_CRON} (invalid_schedule otherwise).")]
    timezone: Annotated[
        Text,
        About(
            "The IANA time zone the schedule is read in, such as Europe/Berlin (invalid_timezone "
            "otherwise). Absent: UTC."
        ),
    ] = "UTC"
    message: Annotated[Text, About("The text sent to the agent each time the schedule fires.")]
    enabled: Annotated[StrictBool, About(_ENABLED.format(what="automation"))] = False


class Policy(_Model):
    """A governance policy bound to an agent; ``config`` is free-form per type."""

    key: Annotated[Text, About(_KEY)]
    type: Annotated[
        PolicyType,
        About(
            "The kind of policy, as the platform names it: answer_check, spend_cap or "
            "tool_approval. The platform enforces it, with the settings in config."
        ),
    ]
    agent: Annotated[Text, About(_AGENT_REF + "the policy governs.")]
    config: Annotated[
        dict[str, JsonValue],
        About(
            "The policy's settings, a JSON object whose fields depend on the type; the platform "
            "reads them, the document passes them as written. Absent: {}."
        ),
    ] = Field(default_factory=dict)


class Requirement(_Model):
    """Something the bundle expects the target platform to have."""

    kind: Annotated[
        RequirementKind,
        About(
            "What is required: model (a model the platform offers), tool (an MCP: one of the "
            "bundle's keys, or an MCP instance in the workspace) or knowledge_source (the tenant "
            "address of a knowledge set's source; knowledge sets need schema 0.2.0)."
        ),
    ]
    ref: Annotated[
        Text,
        About(
            "What the requirement names: a model name, an MCP key or instance name, or for a "
            "knowledge_source <type>:<address> (s3:<bucket>, sftp:<host>, smb:<server>, "
            "webdav:<base_url>, nextcloud:<base_url>, ris:<host>). A substitution names the "
            "requirement as <kind>:<ref>."
        ),
    ]
    policy: Annotated[
        RequirementPolicy,
        About(
            "How the requirement is met. strip: if the platform lacks it, what uses it is dropped (an "
            "agent runs on the default model, loses the MCP, a source is left out); block: if the "
            "platform lacks it, the install is refused (requirement_missing); substitute: the "
            "installer always maps it to a local equivalent (--substitute <kind>:<ref>=VALUE, or a "
            "BundleInstallation's spec.substitutions), else the install is refused "
            "(substitution_required)."
        ),
    ]


_MEMBER: Final = "The key of the gateway member (one of gateway.members) that serves it."
_CURATED_ENABLED: Final = (
    "Whether the gateway presents it; false hides it without touching the member. Absent: true."
)


class GatewayTool(_Model):
    """How the gateway presents one member tool."""

    member: Annotated[Text, About(_MEMBER)]
    tool: Annotated[Text, About("The tool's name as the member serves it.")]
    enabled: Annotated[StrictBool, About(_CURATED_ENABLED)] = True
    override_name: Annotated[
        Text | None,
        About(
            "The name clients see instead of <member>__<tool>: letters, digits, '_' and '-', at most "
            "128 characters, and not a name another tool is presented under. Absent: <member>__<tool>."
        ),
    ] = None
    override_title: Annotated[Text | None, About("The title clients see. Absent: the member's own.")] = None
    override_description: Annotated[
        Text | None, About("The description clients (and their models) see. Absent: the member's own.")
    ] = None
    override_annotations: Annotated[
        dict[str, JsonValue] | None,
        About(
            "MCP tool annotations (readOnlyHint, destructiveHint, ...) merged over the member's, key "
            "by key; a null value removes the member's key. Absent: the member's own."
        ),
    ] = None


class GatewayMemberPrompt(_Model):
    """Curation of one prompt a member serves."""

    member: Annotated[Text, About(_MEMBER)]
    name: Annotated[Text, About("The prompt's name as the member serves it (without the member prefix).")]
    enabled: Annotated[StrictBool, About(_CURATED_ENABLED)] = True
    title: Annotated[Text | None, About("The title clients see. Absent: the member's own.")] = None
    description: Annotated[Text | None, About("The description clients see. Absent: the member's own.")] = (
        None
    )


class GatewayMemberResource(_Model):
    """Curation of one resource a member serves, keyed by URI."""

    member: Annotated[Text, About(_MEMBER)]
    uri: Annotated[
        Text, About("The resource's URI as the member lists it (for a resource template, the template).")
    ]
    enabled: Annotated[StrictBool, About(_CURATED_ENABLED)] = True
    title: Annotated[Text | None, About("The title clients see. Absent: the member's own.")] = None
    description: Annotated[Text | None, About("The description clients see. Absent: the member's own.")] = (
        None
    )


class PromptArgument(_Model):
    """An argument a client fills in; ``values`` are completion suggestions."""

    name: Annotated[
        Text,
        About(
            "The argument's name, used as {{name}} in the prompt's text: letters, digits, '_' and '-', "
            "at most 128 characters, unique within the prompt."
        ),
    ]
    required: Annotated[StrictBool, About("Whether a client must fill the argument in. Absent: false.")] = (
        False
    )
    values: Annotated[
        list[Text], About("Values a client offers when completing the argument. Absent: none.")
    ] = Field(default_factory=list)


class PromptMessage(_Model):
    """One prompt message: literal text with ``{{arg}}`` placeholders, or an embedded resource."""

    role: Annotated[Literal["user", "assistant"], About("Who the message is from: user or assistant.")]
    text: Annotated[
        Text | None,
        About(
            "The message text; {{name}} is replaced by the argument of that name, which the prompt "
            "must declare. Exactly one of text and resource."
        ),
    ] = None
    resource: Annotated[
        Text | None,
        About(
            "The name of one of the gateway's own resources, embedded in full. Exactly one of text "
            "and resource."
        ),
    ] = None


class GatewayPrompt(_Model):
    """A prompt the gateway bundle owns (no member prefix)."""

    name: Annotated[
        Text,
        About(
            "The prompt's name: letters, digits, '_' and '-', at most 128 characters, without '__' "
            "(which marks members' prompts), unique among the gateway's prompts (at most 100)."
        ),
    ]
    title: Annotated[Text | None, About("A title for people. Absent: none.")] = None
    description: Annotated[Text | None, About("What the prompt does. Absent: none.")] = None
    arguments: Annotated[list[PromptArgument], About("The arguments a client fills in. Absent: none.")] = (
        Field(default_factory=list)
    )
    messages: Annotated[
        list[PromptMessage],
        About(
            "The messages the prompt returns, in order: at least one (prompt_invalid_message), their "
            "text at most 64 KiB together (gateway_limit)."
        ),
    ] = Field(default_factory=list)


class GatewayResource(_Model):
    """A text document the gateway bundle owns, read as ``bundle://resources/<name>``."""

    name: Annotated[
        Text,
        About(
            "The resource's name, read as bundle://resources/<name>: parts of letters, digits, '.', "
            "'_' and '-' joined by '/', none '.' or '..' (1 to 500 characters), unique among the "
            "gateway's resources (at most 200)."
        ),
    ]
    title: Annotated[Text | None, About("A title for people. Absent: none.")] = None
    mime_type: Annotated[ResourceMimeType, About("The content's media type. Absent: text/markdown.")] = (
        "text/markdown"
    )
    content: Annotated[
        Text, About("The document's text: at most 256 KiB, and at most 4 MiB for all resources together.")
    ]


class Gateway(_Model):
    """The gateway view: ordered members, tool curation, and the bundle's own prompts and resources."""

    description: Annotated[
        Text | None, About("What the gateway offers, written for the model of an MCP client. Absent: none.")
    ] = None
    overview: Annotated[
        Text | None, About("What the gateway offers, written for a person. Absent: none.")
    ] = None
    members: Annotated[
        list[Text],
        About(
            "Keys of the bundle's MCPs the gateway presents, in order; the first enabled member that "
            "serves a resource wins. A member key also prefixes its tools and prompts "
            "(<member>__<tool>), so it holds at most 64 letters, digits, '_' and '-', no '__', and "
            "does not start or end with '_'. Absent: none."
        ),
    ] = Field(default_factory=list)
    tools: Annotated[
        list[GatewayTool],
        About(
            "How member tools are presented: renamed, retitled, hidden. A tool not listed is "
            "presented as <member>__<tool> as the member describes it. Absent: none."
        ),
    ] = Field(default_factory=list)
    member_prompts: Annotated[
        list[GatewayMemberPrompt],
        About(
            "How members' prompts are presented; one not listed is presented as the member serves "
            "it, named <member>__<name>. Absent: none."
        ),
    ] = Field(default_factory=list)
    member_resources: Annotated[
        list[GatewayMemberResource],
        About(
            "How members' resources are presented; one not listed is presented as the member serves "
            "it, under its own URI. Absent: none."
        ),
    ] = Field(default_factory=list)
    prompts: Annotated[
        list[GatewayPrompt],
        About("Prompts the bundle itself serves, listed before the members'. Absent: none."),
    ] = Field(default_factory=list)
    resources: Annotated[
        list[GatewayResource],
        About("Text documents the bundle itself serves, listed before the members'. Absent: none."),
    ] = Field(default_factory=list)


class _Source(_Model):
    # Credentials are ``${setup.x}`` references to secret fields only; a literal is refused.
    sync_schedule: Annotated[
        Text | None,
        About(
            f"When the platform syncs the source: {_CRON} (invalid_schedule otherwise). Absent: no "
            "schedule is set, and when the source syncs is up to the platform."
        ),
    ] = None
    credentials: Annotated[
        dict[str, Text],
        About(
            "Credentials the source is read with, name ([a-z][a-z0-9_]*, at most 64 characters) to "
            f"exactly one {_SETUP_REF} reference to a secret setup field; a literal is refused "
            "(credential_literal). Absent: none."
        ),
    ] = Field(default_factory=dict)


_TENANT: Final = (
    "A tenant address: declare a requires entry of kind knowledge_source to have each installer map "
    "it, else it installs as written (with a tenant_address_as_written warning)."
)
_USERNAME: Final = "The login name. Organisation-specific: export leaves it out. Absent: none."
_LIST: Final = "at most 500 entries"


class StatutesSource(_Source):
    """Statutes every instance ingests from the same public source; they travel as written."""

    type: Annotated[Literal["statutes"], About("statutes: laws from the public statutes source.")]
    laws: Annotated[
        list[Text], About(f"The laws to ingest, as the statutes source names them: not empty, {_LIST}.")
    ]


class WebsiteSource(_Source):
    """Web pages crawled as listed; the list travels as written."""

    type: Annotated[Literal["website"], About("website: web pages the platform crawls.")]
    urls: Annotated[
        list[Text],
        About(
            f"The pages to crawl: absolute http(s) URLs without credentials in them, not empty, {_LIST}. "
            "They install as written (source_crawled_as_written warning)."
        ),
    ]


class S3Source(_Source):
    """An S3 bucket; the bucket is the tenant address, the endpoint ties it to an organisation."""

    type: Annotated[Literal["s3"], About("s3: objects in an S3-compatible bucket.")]
    bucket: Annotated[Text, About(f"The bucket's name, not empty. {_TENANT}")]
    prefix: Annotated[
        Text | None, About("Only objects whose keys start with this. Absent: the whole bucket.")
    ] = None
    region: Annotated[
        Text | None, About("The bucket's region, such as eu-central-1. Absent: none given.")
    ] = None
    endpoint: Annotated[
        Text | None,
        About(
            "The URL of the S3-compatible service that holds the bucket. Organisation-specific: "
            "export leaves it out. Absent: none given."
        ),
    ] = None


class SftpSource(_Source):
    """A directory on an SFTP host."""

    type: Annotated[Literal["sftp"], About("sftp: files in a directory on an SFTP server.")]
    host: Annotated[Text, About(f"The SFTP server's host name, not empty. {_TENANT}")]
    port: Annotated[StrictInt | None, About("The server's port, 1 to 65535. Absent: none given.")] = None
    dir: Annotated[Text | None, About("The directory to read. Absent: none given.")] = None
    user: Annotated[Text | None, About(_USERNAME)] = None


class SmbSource(_Source):
    """A Windows (SMB) share."""

    type: Annotated[Literal["smb"], About("smb: files on a Windows (SMB) share.")]
    server: Annotated[Text, About(f"The SMB server's host name, not empty. {_TENANT}")]
    share: Annotated[Text, About("The share's name, not empty.")]
    domain: Annotated[
        Text | None, About("The Windows domain. Organisation-specific: export leaves it out. Absent: none.")
    ] = None
    username: Annotated[Text | None, About(_USERNAME)] = None


_BASE_URL: Final = f"absolute http(s) URL without credentials in it, not empty. {_TENANT}"


class WebdavSource(_Source):
    """A WebDAV folder."""

    type: Annotated[Literal["webdav"], About("webdav: files in a WebDAV folder.")]
    base_url: Annotated[Text, About(f"The folder's {_BASE_URL}")]
    username: Annotated[Text | None, About(_USERNAME)] = None


class NextcloudSource(_Source):
    """A Nextcloud folder."""

    type: Annotated[Literal["nextcloud"], About("nextcloud: files in a Nextcloud folder.")]
    base_url: Annotated[Text, About(f"The Nextcloud folder's {_BASE_URL}")]
    username: Annotated[Text | None, About(_USERNAME)] = None


class OnedriveSource(_Source):
    """OneDrive folders reached through shared links."""

    type: Annotated[Literal["onedrive"], About("onedrive: OneDrive folders reached through shared links.")]
    shared_links: Annotated[
        list[Text],
        About(
            f"The folders' shared links, {_LIST}. Organisation-specific: export leaves them out and "
            "the installer sets them afresh. Absent: none."
        ),
    ] = Field(default_factory=list)


class RisSource(_Source):
    """A council information system, which belongs to exactly one municipality."""

    type: Annotated[Literal["ris"], About("ris: a municipality's council information system.")]
    host: Annotated[Text, About(f"The council information system's host name, not empty. {_TENANT}")]


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

    key: Annotated[Text, About(_KEY)]
    name: Annotated[Text, About(f"The knowledge set's display name, {_DISPLAY_NAME}")]
    description: Annotated[Text | None, About("What the set is for, for people. Absent: none.")] = None
    data_description: Annotated[
        Text | None,
        About("What the set's documents are about. Absent: none."),
    ] = None
    # Source key -> source: the key is the source's identity across instances and versions.
    sources: Annotated[
        dict[str, KnowledgeSource],
        About(
            "Where the documents come from: source key ([a-z][a-z0-9-]*, at most 63 characters; the "
            "source's identity across instances and versions) to a source, at most 100. The target "
            "platform syncs them itself. Absent: none."
        ),
    ] = Field(default_factory=dict)


class App(_Model):
    """A small app users open; ``document`` is its definition as a JSON object (0.2.0)."""

    key: Annotated[Text, About(_KEY)]
    name: Annotated[Text, About(f"The app's display name, {_DISPLAY_NAME}")]
    description: Annotated[Text | None, About("What the app does. Absent: none.")] = None
    document: Annotated[
        dict[str, JsonValue],
        About(
            "The app's definition: a JSON object (not a string holding one), at most 256 KiB as "
            "compact JSON (invalid_app_document). A changed document installs as the app's next version."
        ),
    ]
    mcps: Annotated[
        list[Text], About("Keys of the bundle's MCPs the app's tools come from. Absent: none.")
    ] = Field(default_factory=list)


class Bundle(_Model):
    """A whole bundle document."""

    schema_version: Annotated[
        Literal["0.1.0", "0.2.0"],
        About(
            'The format the document is written in: "0.1.0", or "0.2.0" for knowledge sets and apps. '
            "Write it as a string; any other value is refused outright (unsupported_schema_version)."
        ),
    ]
    name: Annotated[
        Text,
        About(
            "The bundle's name, its identity on the platform: 1 to 63 letters, digits, '.', '_' and "
            "'-', starting and ending with a letter or digit (invalid_name)."
        ),
    ]
    version: Annotated[
        Text | None,
        About(
            "The bundle's version, a semantic version such as 1.4.0 (invalid_version otherwise). "
            "Absent: none."
        ),
    ] = None
    description: Annotated[Text | None, About("What the bundle is for. Absent: none.")] = None
    setup: Annotated[
        list[SetupField], About("The values an installer supplies, such as credentials. Absent: none.")
    ] = Field(default_factory=list)
    mcps: Annotated[
        list[Mcp], About("MCP servers: a command the platform runs, a container image, or a remote URL.")
    ] = Field(default_factory=list)
    skills: Annotated[list[Skill], About("Skills: a SKILL.md inline, or a folder on GitHub.")] = Field(
        default_factory=list
    )
    agents: Annotated[list[Agent], About("Agents, wired to MCPs, skills and knowledge sets by key.")] = Field(
        default_factory=list
    )
    channels: Annotated[list[Channel], About("Chat channels through which people reach an agent.")] = Field(
        default_factory=list
    )
    automations: Annotated[list[Automation], About("Cron schedules that send an agent a message.")] = Field(
        default_factory=list
    )
    policies: Annotated[list[Policy], About("Governance policies bound to agents.")] = Field(
        default_factory=list
    )
    requires: Annotated[
        list[Requirement],
        About(
            "What the target platform must have (models, tools, tenant addresses), checked at install time."
        ),
    ] = Field(default_factory=list)
    gateway: Annotated[
        Gateway | None,
        About(
            "The gateway view an Endpoint serves to MCP clients: which MCPs it joins, how their tools, "
            "prompts and resources are presented, and the bundle's own prompts and resources. "
            "Absent: the bundle has no gateway."
        ),
    ] = None
    knowledge_sets: Annotated[
        list[KnowledgeSet], About("Knowledge sets: where agents' documents come from (schema 0.2.0).")
    ] = Field(default_factory=list)  # 0.2.0
    apps: Annotated[list[App], About("Apps users open, each defined by a JSON document (schema 0.2.0).")] = (
        Field(default_factory=list)
    )  # 0.2.0
