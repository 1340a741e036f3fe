"""Endpoints of a gateway, their API keys, the gateway audit and idempotency records."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.platform.models.base import (
    ApiModel,
    Entity,
    EntityId,
    IssuedSecret,
    UrlName,
)

# --- Endpoints --------------------------------------------------------------------------------

Scope = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+$")]
ToolPattern = Annotated[str, Field(min_length=1, max_length=256)]
# An origin as a browser sends it: scheme http or https, a host, an optional port, nothing after.
# The same pattern is in k8s/resources.py, so the CRD refuses what the platform would.
ORIGIN_PATTERN = (
    r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]{1,5})?$"
)
AllowedOrigin = Annotated[str, Field(max_length=2048, pattern=ORIGIN_PATTERN)]


class EndpointOAuth(ApiModel):
    """Whose bearer tokens an OAuth endpoint accepts (DESIGN.md §9.4), and what they must carry."""

    issuer: Annotated[str, Field(pattern=r"^https://[^\s?#]+$", max_length=2048)] = Field(
        description="the authorization server; its keys are found through its metadata"
    )
    audience: Annotated[str, Field(min_length=1, max_length=2048)] | None = Field(
        default=None, description="what aud must contain; default the endpoint's URL"
    )
    required_scopes: list[Scope] = Field(default_factory=list, max_length=64)
    tool_scopes: dict[ToolPattern, list[Scope]] = Field(
        default_factory=dict,
        description="presented tool name or glob -> the scopes a token needs to see and call it",
    )


class EndpointRateLimit(ApiModel):
    """A token bucket per client over tools/call: ``burst`` at once, refilled at the rate per minute."""

    requests_per_minute: int = Field(ge=1, le=1_000_000)
    burst: int | None = Field(default=None, ge=1, le=1_000_000, description="default requests_per_minute")


class EndpointCreate(ApiModel):
    """An endpoint exposing a gateway bundle; ApiKey endpoints issue a key once, in the create response."""

    name: UrlName
    gateway_bundle_id: EntityId
    auth_mode: Literal["ApiKey", "OAuth"] = "ApiKey"
    oauth: EndpointOAuth | None = Field(default=None, description="required for OAuth, refused for ApiKey")
    rate_limit: EndpointRateLimit | None = None
    allowed_origins: list[AllowedOrigin] = Field(
        default_factory=list,
        max_length=64,
        description="browser origins (e.g. https://app.example) allowed besides the public URL's",
    )
    profile: Literal["Default", "ChatGPT"] = "Default"
    enabled: bool = True


class EndpointUpdate(ApiModel):
    """Changes to an endpoint."""

    profile: Literal["Default", "ChatGPT"] | None = None
    enabled: bool | None = None
    oauth: EndpointOAuth | None = None
    rate_limit: EndpointRateLimit | None = Field(default=None, description="null removes the limit")
    allowed_origins: list[AllowedOrigin] | None = Field(
        default=None, max_length=64, description="replaces the list; [] allows the public URL's origin only"
    )


class Endpoint(Entity):
    """A stored endpoint; ``api_key`` is present only in the response that issued it."""

    name: str
    gateway_bundle_id: str
    auth_mode: Literal["ApiKey", "OAuth"]
    oauth: EndpointOAuth | None = None
    rate_limit: EndpointRateLimit | None = None
    allowed_origins: list[str] = Field(default_factory=list)
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
    who: str | None = Field(default=None, description="key:<endpoint id> or sub:<token subject>")
    presented_name: str
    member: str | None
    tool: str | None
    duration_ms: float
    outcome: Literal["ok", "tool_error", "error", "refused", "forbidden", "rate_limited"]
    error: str | None


class IdempotencyRecord(ApiModel):
    """What a create sent with an Idempotency-Key made, for finding it again after a crash."""

    key: str
    kind: str = Field(description="the collection path of the entity, e.g. agents")
    id: str
    exists: bool = Field(description="false when the entity was deleted since")
