"""The async protocol the engine uses to reach an agent platform.

The engine depends on this protocol and the models only. ``PlatformClient`` implements it over
HTTP; a test may implement it in memory. Every method raises a ``PlatformError`` subclass from
``bundle_operator.platform.errors`` on failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import SecretStr

from bundle_operator.platform.catalog import ModelInfo

# The entity, create and update model variables Kind is generic over.
from bundle_operator.platform.kinds import C, E, Kind, U
from bundle_operator.platform.models import (
    App,
    AppVersion,
    AppVersionCreate,
    Artifact,
    IdempotencyRecord,
    KnowledgeSource,
    KnowledgeSourcePut,
    Page,
)
from bundle_operator.platform.models import gateway as gw


class Listed(list[E]):
    """A list of entities that also finds them by id. A shared list is read by every check of its
    workspace: each building its own id map would cost as much as the workspace is large."""

    _by_id: dict[str, E] | None = None

    def by_id(self) -> dict[str, E]:
        """The entities by id (built once; the list is never changed once listed)."""
        if self._by_id is None:
            self._by_id = {item.id: item for item in self}
        return self._by_id


Filters = Mapping[str, str | bool]


class PlatformAPI(Protocol):
    """Entities per kind (see ``kinds``), gateway bundle contents, knowledge set sources, app
    versions, endpoint keys and artifacts, per workspace."""

    async def create(self, workspace: str, kind: Kind[E, C, Any], body: C, *, idempotency_key: str) -> E:
        """Create an entity; repeating the same key returns the entity the first call created."""
        ...

    async def get(self, workspace: str, kind: Kind[E, Any, Any], entity_id: str) -> E:
        """One entity by id; NotFound when it does not exist."""
        ...

    async def list_page(
        self,
        workspace: str,
        kind: Kind[E, Any, Any],
        *,
        filters: Filters | None = ...,
        cursor: str | None = ...,
        limit: int = ...,
    ) -> Page[E]:
        """One page of entities in creation order, filtered by the kind's ``filters`` fields (the
        implementation holds the defaults: no filter, the first page, its own page size)."""
        ...

    async def list_all(
        self, workspace: str, kind: Kind[E, Any, Any], *, filters: Filters | None = None
    ) -> list[E]:
        """Every entity matching ``filters``, following the pages."""
        ...

    async def update(
        self, workspace: str, kind: Kind[E, Any, U], entity_id: str, body: U, *, revision: int
    ) -> E:
        """Change the fields set in ``body``; PreconditionFailed when ``revision`` is not the current one."""
        ...

    async def delete(
        self, workspace: str, kind: Kind[Any, Any, Any], entity_id: str, *, revision: int | None = None
    ) -> None:
        """Delete an entity (only at ``revision`` when given); NotFound when it was already gone.

        A repeat after a lost answer that finds the entity gone counts as success.
        """
        ...

    async def find_by_idempotency_key(self, workspace: str, key: str) -> IdempotencyRecord | None:
        """What a create sent with ``key`` made in the workspace; None when no such create was recorded."""
        ...

    async def list_models(self, workspace: str) -> list[ModelInfo]:
        """The models an agent may name. The tools an agent can use are the workspace's MCP
        instances: ``list_all(workspace, kinds.MCP_INSTANCES, filters={"name": ...})``."""
        ...

    async def rename_gateway_bundle(
        self, workspace: str, bundle_id: str, name: str, *, force: bool
    ) -> gw.GatewayBundle:
        """Rename a gateway bundle; Conflict unless ``force`` or when the name is held."""
        ...

    async def list_members(self, workspace: str, bundle_id: str) -> list[gw.GatewayMember]:
        """The bundle's members in order."""
        ...

    async def put_member(
        self, workspace: str, bundle_id: str, member: str, body: gw.GatewayMemberPut
    ) -> gw.GatewayMember:
        """Add a member (it joins at the end) or change an existing one."""
        ...

    async def delete_member(self, workspace: str, bundle_id: str, member: str) -> None:
        """Remove a member and its curation."""
        ...

    async def order_members(
        self, workspace: str, bundle_id: str, members: Sequence[str]
    ) -> list[gw.GatewayMember]:
        """Set the whole member order; Refused unless every member is named exactly once."""
        ...

    async def list_tools(self, workspace: str, bundle_id: str) -> list[gw.GatewayTool]:
        """Every tool the bundle can serve, with its curation and presented name."""
        ...

    async def put_tool(
        self, workspace: str, bundle_id: str, tool_id: str, body: gw.GatewayToolCuration
    ) -> gw.GatewayTool:
        """Replace the curation of tool ``member__tool``; Conflict when the override name is held."""
        ...

    async def list_member_prompts(self, workspace: str, bundle_id: str) -> list[gw.GatewayMemberPrompt]:
        """Members' prompts with their curation in this bundle."""
        ...

    async def put_member_prompt(
        self, workspace: str, bundle_id: str, member: str, prompt: str, body: gw.GatewayEntryCuration
    ) -> gw.GatewayMemberPrompt:
        """Replace how a member's prompt shows in this bundle."""
        ...

    async def list_member_resources(self, workspace: str, bundle_id: str) -> list[gw.GatewayMemberResource]:
        """Members' resources with their curation in this bundle."""
        ...

    async def put_member_resource(
        self, workspace: str, bundle_id: str, member: str, uri: str, body: gw.GatewayEntryCuration
    ) -> gw.GatewayMemberResource:
        """Replace how a member's resource shows in this bundle."""
        ...

    async def list_prompts(self, workspace: str, bundle_id: str) -> list[gw.GatewayPrompt]:
        """The bundle's own prompts in name order."""
        ...

    async def get_prompt(self, workspace: str, bundle_id: str, name: str) -> gw.GatewayPrompt:
        """One of the bundle's own prompts."""
        ...

    async def put_prompt(self, workspace: str, bundle_id: str, body: gw.GatewayPromptPut) -> gw.GatewayPrompt:
        """Create or replace a bundle prompt by its name."""
        ...

    async def delete_prompt(self, workspace: str, bundle_id: str, name: str) -> None:
        """Delete a bundle prompt."""
        ...

    async def list_resources(self, workspace: str, bundle_id: str) -> list[gw.GatewayResource]:
        """The bundle's own resources in name order."""
        ...

    async def get_resource(self, workspace: str, bundle_id: str, name: str) -> gw.GatewayResource:
        """One of the bundle's own resources."""
        ...

    async def put_resource(
        self, workspace: str, bundle_id: str, body: gw.GatewayResourcePut
    ) -> gw.GatewayResource:
        """Create or replace a bundle resource by its name."""
        ...

    async def delete_resource(self, workspace: str, bundle_id: str, name: str) -> None:
        """Delete a bundle resource; Conflict while a prompt embeds it."""
        ...

    async def issue_endpoint_key(self, workspace: str, endpoint_id: str) -> SecretStr:
        """Issue a new API key for an ApiKey endpoint; the previous key stops working."""
        ...

    async def list_sources(self, workspace: str, set_id: str) -> list[KnowledgeSource]:
        """A knowledge set's sources in creation order (a set also embeds them in ``sources``)."""
        ...

    async def put_source(
        self, workspace: str, set_id: str, key: str, body: KnowledgeSourcePut, *, revision: int | None = None
    ) -> KnowledgeSource:
        """Create or replace the source with ``key``; null credentials keep the stored ones; with
        ``revision``, PreconditionFailed unless the source is at that revision."""
        ...

    async def add_source(self, workspace: str, set_id: str, body: KnowledgeSourcePut) -> KnowledgeSource:
        """Add a source of the user's own (it has no key); not repeated after a lost answer."""
        ...

    async def delete_source(
        self, workspace: str, set_id: str, ref: str, *, revision: int | None = None
    ) -> None:
        """Delete a source by its key or its ``src_`` id, with the credentials it stored; with
        ``revision``, PreconditionFailed unless the source is at that revision."""
        ...

    async def list_app_versions(self, workspace: str, app_id: str) -> list[AppVersion]:
        """An app's versions, oldest first."""
        ...

    async def add_app_version(self, workspace: str, app_id: str, body: AppVersionCreate) -> App:
        """Add the app's next version; returns the app, which shows it as ``latest_version``."""
        ...

    async def set_app_version_archived(
        self, workspace: str, app_id: str, version: int, archived: bool
    ) -> AppVersion:
        """Archive or restore one version; the app then shows its latest unarchived one."""
        ...

    async def put_artifact(self, workspace: str, digest: str, data: bytes) -> Artifact:
        """Store an archive by its digest (``sha256:<hex>`` of ``data``); Refused on a mismatch or
        a refused archive; the same digest again answers the stored artifact."""
        ...

    async def get_artifact(self, workspace: str, digest: str) -> Artifact:
        """A stored artifact's metadata and who refers to it; NotFound when it is not stored."""
        ...

    async def list_artifacts(self, workspace: str) -> list[Artifact]:
        """Every artifact of the workspace."""
        ...

    async def delete_artifact(self, workspace: str, digest: str) -> None:
        """Delete an artifact; NotFound when it is not stored, Conflict while an MCP server spec
        refers to it."""
        ...
