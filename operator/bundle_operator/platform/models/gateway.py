"""Gateway bundles: members, tool curation, prompts and resources."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    model_validator,
)

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.document.names import (
    RESOURCE_NAME_MAX,
    RESOURCE_NAME_PATTERN,
)
from bundle_operator.platform.models.base import (
    ApiModel,
    Entity,
    EntityId,
    Slug,
    Text,
    UrlName,
)
from bundle_operator.platform.models.mcp import CatalogPrompt, CatalogResource, CatalogTool

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
    # Whether the gateway serves the tool now: enabled, member enabled, not stale, not shadowed,
    # and presented under a name MCP allows.
    served: bool = True
    # Why the gateway does not serve it, following "the tool '<presented_name>'"; None while served.
    withheld_reason: str | None = None


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
