"""Endpoints of a gateway, their API keys, the gateway audit and idempotency records."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

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
