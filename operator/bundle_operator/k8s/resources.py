"""The custom resources (DESIGN.md §4) as pydantic models: the operator parses spec with them and
writes status through them, and ``make crds`` renders the CustomResourceDefinitions from them.

Field names are the user-facing API (camelCase in manifests); Python attributes are snake_case.
Descriptions are what ``kubectl explain`` shows. The ``x-kubernetes-*`` extras (CEL rules, list
types) only shape the CRD; the operator's own analyze reports what a structural schema cannot say.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from bundle_operator.sources.models import (
    BundleSource,
    LocalObjectKeyRef,
    SignatureStatus,
    SourceStatus,
)
from bundle_operator.sources.models import ResourceModel as _Model
from bundle_operator.sources.models import cel as _cel

GROUP = "bundle-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
BUNDLE_PLURAL = "bundles"
INSTALLATION_PLURAL = "bundleinstallations"
ENDPOINT_PLURAL = "endpoints"


def _immutable(what: str, kind: str = "BundleInstallation") -> dict[str, Any]:
    """A rule refusing any change of the field once the resource exists."""
    return _cel("self == oldSelf", f"{what} cannot change; create a new {kind}")


# Server-side apply merges conditions one by one, keyed by type, as Kubernetes' own conditions.
_CONDITIONS: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


# ----------------------------------------------------------------------------------------- shared


class Condition(_Model):
    """A kstatus condition."""

    type: str = Field(description="Ready, Reconciling, Stalled, or a domain condition.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="A CamelCase reason that scripts can match on.")
    message: str = Field(default="", description="What happened and what to do next.")
    last_transition_time: str | None = Field(
        default=None, description="When status last changed (RFC 3339); unchanged while status stays."
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this condition was computed for."
    )


class _Status(_Model):
    """A resource's status: the generation it was computed for comes first."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this status was computed for."
    )


class StatusIssue(_Model):
    """One finding of analyze, as the CLI's JSON contract has it, in Kubernetes casing."""

    severity: Literal["Blocking", "Warning"] = Field(
        description="Blocking stops the install; Warning does not."
    )
    code: str = Field(description="A stable issue code, e.g. unknown_reference.")
    path: str | None = Field(default=None, description="A JSON Pointer into the bundle document.")
    entity: str | None = Field(default=None, description="The entity concerned, kind:key.")
    line: int | None = Field(default=None, description="The line of the document, where known.")
    message: str = Field(description="What is wrong; names the field, never a secret value.")


# ----------------------------------------------------------------------------------------- Bundle


class BundleSpec(_Model):
    """A catalog item: nothing is installed by a Bundle alone."""

    source: BundleSource = Field(description="Where the bundle document comes from.")


class EntityCounts(_Model):
    """How many entities of each kind the bundle has."""

    mcps: int = Field(default=0, description="MCP servers.")
    skills: int = Field(default=0, description="Skills.")
    agents: int = Field(default=0, description="Agents.")
    channels: int = Field(default=0, description="Chat channels.")
    automations: int = Field(default=0, description="Scheduled automations.")
    policies: int = Field(default=0, description="Governance policies.")
    # Counted only for a schema 0.2.0 document, so a 0.1.0 bundle's status stays as it was.
    knowledge_sets: int | None = Field(default=None, description="Knowledge sets (schema 0.2.0).")
    apps: int | None = Field(default=None, description="Apps (schema 0.2.0).")


class SetupFieldStatus(_Model):
    """A setup value an installation must supply."""

    key: str = Field(description="The key a BundleInstallation's spec.setup supplies a value for.")
    label: str = Field(description="A short label for a person.")
    type: Literal["string", "secret", "url", "number", "boolean"] = Field(
        description="The value's type; a secret must come from a secretKeyRef."
    )
    required: bool = Field(default=True, description="Whether an installation must supply it.")
    description: str | None = Field(default=None, description="What the value is for.")


class BundleStatus(_Status):
    """What the operator found in the source."""

    digest: str | None = Field(default=None, description="sha256 of the canonical document.")
    bundle_name: str | None = Field(default=None, description="The document's name.")
    version: str | None = Field(default=None, description="The document's version.")
    entities: EntityCounts | None = Field(default=None, description="How many entities of each kind it has.")
    setup_fields: list[SetupFieldStatus] = Field(
        default_factory=list, description="The setup values an installation must supply."
    )
    source: SourceStatus | None = Field(
        default=None, description="What a registry source resolved to (registry sources only)."
    )
    signature: SignatureStatus | None = Field(
        default=None, description="The archive's MCPB signature (mcpb and registry sources)."
    )
    issues: list[StatusIssue] = Field(
        default_factory=list, description="What analyze found: Blocking issues stop every install."
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready and Stalled.", json_schema_extra=_CONDITIONS
    )


# ----------------------------------------------------------------------------- BundleInstallation


class BundleRef(_Model):
    """The Bundle to install, in the same namespace."""

    name: str = Field(min_length=1, max_length=253, description="The Bundle's name.")


class PlatformConnection(_Model):
    """Which platform to install into, instead of the operator's default."""

    url: str = Field(min_length=1, description="The platform's base URL.")
    token_secret_ref: LocalObjectKeyRef | None = Field(
        default=None, description="A Secret key holding the platform's bearer token."
    )


# A BundleInstallation's setup entries at most (the CRD's maxItems; the webhook refuses more at once).
MAX_SETUP_VALUES = 200


class SetupValue(_Model):
    """One setup value: exactly one of value (non-secret fields only) or secretKeyRef."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            "has(self.value) != has(self.secretKeyRef)", "exactly one of value or secretKeyRef"
        )
    )

    key: str = Field(min_length=1, description="The setup field's key in the bundle.")
    value: str | None = Field(default=None, description="A literal value; refused for secret fields.")
    secret_key_ref: LocalObjectKeyRef | None = Field(
        default=None, description="A Secret key holding the value."
    )


class UpdatePolicy(_Model):
    """How updates treat fields that changed both in the bundle and on the platform."""

    on_conflict: Literal["Fail", "KeepMine", "TakeTheirs"] = Field(
        default="Fail",
        description="Fail writes nothing and reports; KeepMine keeps the platform's value; "
        "TakeTheirs writes the bundle's.",
    )


class DriftPolicy(_Model):
    """How often the platform is compared with what was installed, and what happens on drift."""

    interval: str = Field(
        default="5m",
        pattern=r"^([0-9]+(s|m|h))+$",
        description="How often to check, e.g. 30s, 5m, 1h.",
    )
    mode: Literal["Warn", "Correct", "Disabled"] = Field(
        default="Warn",
        description="Warn reports drift; Correct writes back what drifted; Disabled does not check.",
    )


# A plan id as status.plan shows it: spec.approvedPlan takes nothing else.
PLAN_ID_PATTERN = r"^sha256:[0-9a-f]{64}$"


class BundleInstallationSpec(_Model):
    """A Bundle installed into one workspace of a platform."""

    bundle_ref: BundleRef = Field(
        description="The Bundle to install; cannot change.", json_schema_extra=_immutable("bundleRef")
    )
    workspace: str = Field(
        min_length=1,
        max_length=128,
        description="The platform workspace; cannot change.",
        json_schema_extra=_immutable("workspace"),
    )
    platform: PlatformConnection | None = Field(
        default=None, description="Overrides the operator's default platform connection."
    )
    # maxItems bounds the cost of the per-item CEL rule, which the apiserver estimates up front.
    setup: list[SetupValue] = Field(
        default_factory=list,
        max_length=MAX_SETUP_VALUES,
        description="Setup values, keyed by key.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]},
    )
    substitutions: dict[str, str] = Field(
        default_factory=dict, description='Requirement substitutions, e.g. {"model:gpt-4.1": "gpt-5"}.'
    )
    activate: bool = Field(default=False, description="Enable the bundle's channels and automations.")
    update_policy: UpdatePolicy = Field(
        default_factory=UpdatePolicy,
        description="How updates treat fields changed both in the bundle and on the platform.",
    )
    drift_policy: DriftPolicy = Field(
        default_factory=DriftPolicy,
        description="How often the platform is compared with what was installed, and what happens on drift.",
    )
    deletion_policy: Literal["Delete", "Orphan"] = Field(
        default="Delete",
        description="Delete uninstalls (keeping edited entities) when the resource is deleted; "
        "Orphan leaves the platform alone.",
    )
    suspend: bool = Field(default=False, description="Stop writing to the platform until false again.")
    approval: Literal["Auto", "Manual"] = Field(
        default="Auto",
        description="Auto applies every plan; Manual shows each plan in status.plan and writes nothing "
        "until spec.approvedPlan names it.",
    )
    approved_plan: str | None = Field(
        default=None,
        pattern=PLAN_ID_PATTERN,
        description="The id of the plan a person approved (status.plan.id); only that exact plan is applied.",
    )


class PlanEntity(_Model):
    """What a plan does to one entity."""

    kind: str = Field(description="The entity's kind, e.g. mcp or agent.")
    key: str = Field(description="The entity's key in the bundle.")
    action: Literal["create", "update", "delete", "keep"] = Field(description="What the plan does with it.")
    paths: list[str] = Field(default_factory=list, description="The JSON Pointer paths an update changes.")


class PlanStatus(_Model):
    """The plan waiting for approval under spec.approval Manual, and the last one applied."""

    id: str | None = Field(
        default=None, description="The waiting plan's id; approve it in spec.approvedPlan."
    )
    operation: Literal["Install", "Update", "Correct", "Uninstall"] | None = Field(
        default=None, description="What the waiting plan does."
    )
    summary: str | None = Field(
        default=None, description="The operation and how many entities get each action."
    )
    entities: list[PlanEntity] = Field(
        default_factory=list, description="What the plan does, entity by entity."
    )
    last_applied_id: str | None = Field(
        default=None, description="The id of the last approved plan that was applied; it is spent."
    )


class PreviewEntity(_Model):
    """What an install would do with one entity."""

    kind: str = Field(description="The entity's kind, e.g. mcp or agent.")
    key: str = Field(description="The entity's key in the bundle.")
    action: Literal["Create", "Reuse", "Update", "Skipped"] = Field(description="What an install would do.")
    reason: str | None = Field(default=None, description="Why, for Reuse and Skipped.")
    id: str | None = Field(default=None, description="The platform id of an entity that exists already.")


class Preview(_Model):
    """Analyze's result before the first write."""

    entities: list[PreviewEntity] = Field(default_factory=list, description="What happens to each entity.")
    issues: list[StatusIssue] = Field(default_factory=list, description="What analyze found.")
    blocking: bool = Field(default=False, description="Whether a Blocking issue stops the install.")


class InstalledEntity(_Model):
    """An entity the installation wrote, with its platform id."""

    kind: str = Field(description="The entity's kind, e.g. mcp or agent.")
    key: str = Field(description="The entity's key in the bundle.")
    id: str | None = Field(default=None, description="The entity's platform id.")
    action: Literal["Created", "Updated", "Reused", "Kept", "Skipped"] = Field(
        description="What the last install or update did with it."
    )


class ConflictStatus(_Model):
    """A field changed both in the bundle and on the platform."""

    entity: str = Field(description="The entity, kind:key.")
    path: str = Field(description="A JSON Pointer to the field, inside the entity.")


class DriftStatus(_Model):
    """An entity whose live state differs from what was installed."""

    entity: str = Field(description="The entity, kind:key.")
    paths: list[str] = Field(default_factory=list, description="JSON Pointers to the fields that differ.")


class BundleInstallationStatus(_Status):
    """What is installed, what an install would do, and whether the platform still matches."""

    installed_digest: str | None = Field(default=None, description="sha256 of the installed document.")
    installed_version: str | None = Field(default=None, description="The installed document's version.")
    preview: Preview | None = Field(default=None, description="What an install would do, before it writes.")
    plan: PlanStatus | None = Field(
        default=None, description="Under spec.approval Manual: the plan that waits."
    )
    entities: list[InstalledEntity] = Field(
        default_factory=list, description="The entities installed, with their platform ids."
    )
    conflicts: list[ConflictStatus] = Field(
        default_factory=list, description="Fields changed both in the bundle and on the platform."
    )
    drift: list[DriftStatus] = Field(
        default_factory=list, description="Entities whose live state differs from what was installed."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled, Analyzed, Installed, Drifted, Conflict, Activated.",
        json_schema_extra=_CONDITIONS,
    )


# ----------------------------------------------------------------------------------------- Endpoint

# The platform names an endpoint's URL path after it: {gateway}/{name}/mcp.
ENDPOINT_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$"
# auth.mode with its default filled in, as CEL sees it in `self` or `oldSelf`.
_AUTH_MODE = "(has({s}.auth) && has({s}.auth.mode) ? {s}.auth.mode : 'ApiKey')"


class InstallationRef(_Model):
    """The BundleInstallation whose gateway the Endpoint exposes, in the same namespace."""

    name: str = Field(min_length=1, max_length=253, description="The BundleInstallation's name.")


_SCOPE = r"^[\x21\x23-\x5b\x5d-\x7e]{1,256}$"
# platform/models/endpoints.py ORIGIN_PATTERN: scheme http or https, a host, an optional port.
_ORIGIN = (
    r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]{1,5})?$"
)


class EndpointOAuth(_Model):
    """Whose bearer tokens an OAuth endpoint accepts, and what they must carry (DESIGN.md §9.4)."""

    issuer: str = Field(
        pattern=r"^https://[^\s?#]+$",
        max_length=2048,
        description="The authorization server (https); its keys are found through its metadata.",
    )
    audience: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="What a token's aud must contain; default the endpoint's URL.",
    )
    required_scopes: list[Annotated[str, Field(pattern=_SCOPE)]] = Field(
        default_factory=list, max_length=64, description="Scopes every request's token must carry."
    )
    tool_scopes: dict[str, list[Annotated[str, Field(pattern=_SCOPE)]]] = Field(
        default_factory=dict,
        description="Presented tool name or glob (e.g. github__*) -> the scopes a token needs to see "
        "and call the tools it matches; tools no pattern matches need none.",
        json_schema_extra={"maxProperties": 256},
    )


class EndpointAuth(_Model):
    """How clients authenticate to the endpoint."""

    mode: Literal["ApiKey", "OAuth"] = Field(
        default="ApiKey",
        description="ApiKey: the platform issues a key, written to credentialsSecretName. OAuth: "
        "clients bring bearer tokens of auth.oauth.issuer; no key exists.",
    )
    oauth: EndpointOAuth | None = Field(default=None, description="Required for OAuth; refused for ApiKey.")


class EndpointRateLimit(_Model):
    """A token bucket per client (API key, or token subject) over tools/call."""

    requests_per_minute: int = Field(ge=1, le=1_000_000, description="Calls a minute the bucket refills.")
    burst: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Calls at once; default requestsPerMinute."
    )


class EndpointSpec(_Model):
    """A gateway of a BundleInstallation, exposed as one MCP endpoint named after the resource."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"has(self.credentialsSecretName) || {_AUTH_MODE.format(s='self')} == 'OAuth'",
                    "message": "credentialsSecretName is required when auth.mode is ApiKey (the default)",
                },
                {
                    "rule": f"{_AUTH_MODE.format(s='self')} != 'OAuth' || "
                    "(has(self.auth) && has(self.auth.oauth))",
                    "message": "auth.oauth (at least its issuer) is required when auth.mode is OAuth",
                },
                {
                    "rule": "!(has(self.auth) && has(self.auth.oauth)) || "
                    f"{_AUTH_MODE.format(s='self')} == 'OAuth'",
                    "message": "auth.oauth is only for auth.mode OAuth",
                },
                {
                    # On spec, not on auth: a rule on auth would not see auth added where it was left out.
                    "rule": f"{_AUTH_MODE.format(s='self')} == {_AUTH_MODE.format(s='oldSelf')}",
                    "message": "auth.mode cannot change (the platform cannot switch an endpoint's auth "
                    "mode); create a new Endpoint",
                },
            ]
        }
    )

    installation_ref: InstallationRef = Field(
        description="The BundleInstallation whose bundle has a gateway section; cannot change.",
        json_schema_extra=_immutable("installationRef", "Endpoint"),
    )
    auth: EndpointAuth = Field(
        default_factory=EndpointAuth,
        description="How clients authenticate; its mode cannot change.",
    )
    profile: Literal["Default", "ChatGPT"] = Field(
        default="Default",
        description="How tools are presented: Default, or ChatGPT (write-as-read annotations).",
    )
    enabled: bool = Field(
        default=True, description="Serve the endpoint; false disables it on the platform without deleting it."
    )
    rate_limit: EndpointRateLimit | None = Field(
        default=None, description="Tool calls a client may make; none: no limit. Past it: HTTP 429."
    )
    allowed_origins: list[Annotated[str, Field(max_length=2048, pattern=_ORIGIN)]] = Field(
        default_factory=list,
        max_length=64,
        description="Browser origins (scheme://host[:port], e.g. https://app.example) whose requests "
        "the endpoint serves besides the public URL's; any other Origin is answered 403.",
    )
    credentials_secret_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The Secret the issued API key (key apiKey) and the URL (key url) are written to, "
        "owned by the Endpoint; an existing Secret not owned by it is never overwritten.",
    )


class EndpointMember(_Model):
    """A member MCP server of the gateway, as the platform last reported it."""

    name: str = Field(description="The member's name, the prefix of its presented tools.")
    healthy: bool = Field(description="Whether the platform reaches the member.")
    message: str = Field(
        default="",
        description="Why the member is unhealthy, or which of its tools the gateway cannot present; "
        "empty when neither.",
    )


class EndpointWithheldTool(_Model):
    """A tool of the bundle the gateway does not serve although nothing disabled it."""

    name: str = Field(description="The tool as member__tool.")
    reason: str = Field(description="Why it is not served and what to change.")


class EndpointStatus(_Status):
    """Where the endpoint is served and what it serves."""

    url: str | None = Field(default=None, description="Where MCP clients connect.")
    presented_tools: list[str] = Field(
        default_factory=list,
        description="The names of the tools the endpoint serves, in the platform's order.",
    )
    withheld_tools: list[EndpointWithheldTool] = Field(
        default_factory=list,
        description="Tools the bundle curates as served that the gateway does not serve: an override "
        "holds their name, or MCP does not allow it; refreshed with members.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    members: list[EndpointMember] = Field(
        default_factory=list,
        description="The gateway's members with their health, refreshed periodically.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready, Reconciling and Stalled.", json_schema_extra=_CONDITIONS
    )
