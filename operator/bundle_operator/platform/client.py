"""The async client of the platform API v1, one method a route; implements ``PlatformAPI``.

The HTTP underneath (retries, the call gate, typed errors) is http_calls.py's; transport.py
sends it through aiohttp where the operator asks for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, SecretStr

from bundle_operator.platform.catalog import ModelInfo
from bundle_operator.platform.errors import NotFound
from bundle_operator.platform.http_calls import ENV_TOKEN as ENV_TOKEN
from bundle_operator.platform.http_calls import ENV_URL as ENV_URL
from bundle_operator.platform.http_calls import PlatformHttp, encode_body, page_of, seg
from bundle_operator.platform.kinds import C, E, Kind, U
from bundle_operator.platform.models import (
    DIGEST_PATTERN,
    ApiKeyIssued,
    App,
    AppVersion,
    AppVersionCreate,
    AppVersionUpdate,
    Artifact,
    GatewayAuditEntry,
    GatewayBundle,
    GatewayEntryCuration,
    GatewayMember,
    GatewayMemberOrder,
    GatewayMemberPrompt,
    GatewayMemberPut,
    GatewayMemberResource,
    GatewayPrompt,
    GatewayPromptPut,
    GatewayRename,
    GatewayResource,
    GatewayResourcePut,
    GatewayTool,
    GatewayToolCuration,
    IdempotencyRecord,
    KnowledgeSource,
    KnowledgeSourcePut,
    Page,
    member_resource_id,
)
from bundle_operator.platform.protocol import Filters, Listed

M = TypeVar("M", bound=BaseModel)

_PAGE_LIMIT = 500
_DIGEST = re.compile(DIGEST_PATTERN)
# An upload waits while the platform extracts the archive and measures its tree: up to 128 MiB
# packed, 512 MiB unpacked, longer than any other call takes.
_UPLOAD_READ_TIMEOUT = 300.0


def _check_digest(digest: str) -> None:
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"{digest!r} is not an artifact digest (sha256: and 64 lowercase hex digits)")


def _check_member(member: str) -> None:
    # member__name is split at the first '__': a member name holding '__' or starting or ending
    # with '_' would address another member's entry, so it is refused before anything is sent.
    if not member or "__" in member or member.startswith("_") or member.endswith("_"):
        raise ValueError(f"{member!r} cannot be a gateway member name")


class PlatformClient(PlatformHttp):
    """Talks to one platform over HTTP; use as an async context manager or call ``aclose``."""

    # --- entities ---------------------------------------------------------------------------

    async def create(self, workspace: str, kind: Kind[E, C, Any], body: C, *, idempotency_key: str) -> E:
        """Create an entity; repeating the same key returns the entity the first call created."""
        return await self._call(
            "POST",
            f"{self._ws(workspace)}/{kind.path}",
            kind.entity,
            body=encode_body(body),
            headers={"Idempotency-Key": idempotency_key},
            safe=True,
        )

    async def get(self, workspace: str, kind: Kind[E, Any, Any], entity_id: str) -> E:
        """One entity by id; NotFound when it does not exist."""
        return await self._call(
            "GET", f"{self._ws(workspace)}/{kind.path}/{seg(entity_id)}", kind.entity, safe=True
        )

    async def list_page(
        self,
        workspace: str,
        kind: Kind[E, Any, Any],
        *,
        filters: Filters | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[E]:
        """One page of entities in creation order, filtered by the kind's ``filters`` fields."""
        params = {"limit": str(limit)}
        for key, value in (filters or {}).items():
            if key not in kind.filters:
                raise ValueError(f"{kind.path} cannot be filtered by {key!r}; use one of {kind.filters}")
            params[key] = ("true" if value else "false") if isinstance(value, bool) else value
        if cursor is not None:
            params["cursor"] = cursor
        return await self._call(
            "GET", f"{self._ws(workspace)}/{kind.path}", page_of(kind.entity), params=params, safe=True
        )

    async def list_all(
        self, workspace: str, kind: Kind[E, Any, Any], *, filters: Filters | None = None
    ) -> list[E]:
        """Every entity matching ``filters``, following the pages (shared per workspace when the
        running reconcile allows it; see ``sharing``)."""
        if self.shared is not None:
            shared: list[E] = await self.shared.read(
                workspace, kind.path, filters, lambda: self._list_all(workspace, kind, filters)
            )
            return shared
        return await self._list_all(workspace, kind, filters)

    async def _list_all(self, workspace: str, kind: Kind[E, Any, Any], filters: Filters | None) -> list[E]:
        items: Listed[E] = Listed()
        cursor: str | None = None
        while True:
            page = await self.list_page(workspace, kind, filters=filters, cursor=cursor, limit=_PAGE_LIMIT)
            items.extend(page.items)
            if page.next_cursor is None:
                return items
            cursor = page.next_cursor

    async def update(
        self, workspace: str, kind: Kind[E, Any, U], entity_id: str, body: U, *, revision: int
    ) -> E:
        """Change the fields set in ``body``; PreconditionFailed when ``revision`` is not the current one."""
        return await self._call(
            "PATCH",
            f"{self._ws(workspace)}/{kind.path}/{seg(entity_id)}",
            kind.entity,
            body=encode_body(body, only_set=True),
            headers={"If-Match": f'"{revision}"'},
            safe=False,
        )

    async def delete(
        self, workspace: str, kind: Kind[Any, Any, Any], entity_id: str, *, revision: int | None = None
    ) -> None:
        """Delete an entity (only at ``revision`` when given); NotFound when it was already gone.

        A repeat after a lost answer that finds the entity gone counts as success.
        """
        headers = {"If-Match": f'"{revision}"'} if revision is not None else None
        await self.request(
            "DELETE", f"{self._ws(workspace)}/{kind.path}/{seg(entity_id)}", headers=headers, safe=True
        )

    async def find_by_idempotency_key(self, workspace: str, key: str) -> IdempotencyRecord | None:
        """What a create sent with ``key`` made in the workspace; None when no such create was recorded."""
        path = f"{self._ws(workspace)}/idempotency-keys/{seg(key)}"
        try:
            return await self._call("GET", path, IdempotencyRecord, safe=True)
        except NotFound:
            return None

    # --- what the platform offers ---------------------------------------------------------

    async def list_models(self, workspace: str) -> list[ModelInfo]:
        """The models an agent may name (the tools it can use are the workspace's MCP instances)."""
        path = f"{self._ws(workspace)}/models"
        if self.shared is not None:
            models: list[ModelInfo] = await self.shared.read(
                workspace, "models", None, lambda: self._all(path, ModelInfo)
            )
            return models
        return await self._all(path, ModelInfo)

    # --- gateway bundles --------------------------------------------------------------------

    async def rename_gateway_bundle(
        self, workspace: str, bundle_id: str, name: str, *, force: bool
    ) -> GatewayBundle:
        """Rename a gateway bundle; Conflict unless ``force`` or when the name is held."""
        body = encode_body(GatewayRename.model_construct(name=name, force=force))
        return await self._call(
            "POST", f"{self._gw(workspace, bundle_id)}/rename", GatewayBundle, body=body, safe=False
        )

    async def _all(self, path: str, model: type[M]) -> list[M]:
        items: list[M] = []
        cursor: str | None = None
        while True:
            params = {"limit": str(_PAGE_LIMIT)} | ({"cursor": cursor} if cursor else {})
            page = await self._call("GET", path, page_of(model), params=params, safe=True)
            items.extend(page.items)
            if page.next_cursor is None:
                return items
            cursor = page.next_cursor

    async def list_members(self, workspace: str, bundle_id: str) -> list[GatewayMember]:
        """The bundle's members in order."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/members", GatewayMember)

    async def put_member(
        self, workspace: str, bundle_id: str, member: str, body: GatewayMemberPut
    ) -> GatewayMember:
        """Add a member (it joins at the end) or change an existing one."""
        path = f"{self._gw(workspace, bundle_id)}/members/{seg(member)}"
        return await self._call("PUT", path, GatewayMember, body=encode_body(body), safe=True)

    async def delete_member(self, workspace: str, bundle_id: str, member: str) -> None:
        """Remove a member and its curation."""
        await self.request("DELETE", f"{self._gw(workspace, bundle_id)}/members/{seg(member)}", safe=True)

    async def order_members(
        self, workspace: str, bundle_id: str, members: Sequence[str]
    ) -> list[GatewayMember]:
        """Set the whole member order; Refused unless every member is named exactly once."""
        body = encode_body(GatewayMemberOrder.model_construct(members=list(members)))
        path = f"{self._gw(workspace, bundle_id)}/members:order"
        page = await self._call("PUT", path, Page[GatewayMember], body=body, safe=True)
        return page.items

    async def list_audit(self, workspace: str, bundle_id: str) -> list[GatewayAuditEntry]:
        """The latest tool calls through the bundle's endpoints, newest first."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/audit", GatewayAuditEntry)

    async def list_tools(self, workspace: str, bundle_id: str) -> list[GatewayTool]:
        """Every tool the bundle can serve, with its curation and presented name."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/tools", GatewayTool)

    async def get_tool(self, workspace: str, bundle_id: str, tool_id: str) -> GatewayTool:
        """One tool of the bundle by ``member__tool``."""
        path = f"{self._gw(workspace, bundle_id)}/tools/{seg(tool_id)}"
        return await self._call("GET", path, GatewayTool, safe=True)

    async def put_tool(
        self, workspace: str, bundle_id: str, tool_id: str, body: GatewayToolCuration
    ) -> GatewayTool:
        """Replace the curation of tool ``member__tool``; Conflict when the override name is held."""
        path = f"{self._gw(workspace, bundle_id)}/tools/{seg(tool_id)}"
        return await self._call("PUT", path, GatewayTool, body=encode_body(body), safe=True)

    async def list_member_prompts(self, workspace: str, bundle_id: str) -> list[GatewayMemberPrompt]:
        """Members' prompts with their curation in this bundle."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/member-prompts", GatewayMemberPrompt)

    async def put_member_prompt(
        self, workspace: str, bundle_id: str, member: str, prompt: str, body: GatewayEntryCuration
    ) -> GatewayMemberPrompt:
        """Replace how a member's prompt shows in this bundle."""
        entry = f"member-prompts/{seg(f'{member}__{prompt}')}"
        return await self._curate(workspace, bundle_id, member, entry, GatewayMemberPrompt, body)

    async def list_member_resources(self, workspace: str, bundle_id: str) -> list[GatewayMemberResource]:
        """Members' resources with their curation in this bundle."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/member-resources", GatewayMemberResource)

    async def put_member_resource(
        self, workspace: str, bundle_id: str, member: str, uri: str, body: GatewayEntryCuration
    ) -> GatewayMemberResource:
        """Replace how a member's resource shows in this bundle."""
        entry = f"member-resources/{seg(member_resource_id(member, uri))}"
        return await self._curate(workspace, bundle_id, member, entry, GatewayMemberResource, body)

    async def _curate(
        self,
        workspace: str,
        bundle_id: str,
        member: str,
        entry: str,
        model: type[M],
        body: GatewayEntryCuration,
    ) -> M:
        """PUT the curation of one member entry (``entry``: its path below the bundle)."""
        _check_member(member)
        return await self._call(
            "PUT", f"{self._gw(workspace, bundle_id)}/{entry}", model, body=encode_body(body), safe=True
        )

    async def list_prompts(self, workspace: str, bundle_id: str) -> list[GatewayPrompt]:
        """The bundle's own prompts in name order."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/prompts", GatewayPrompt)

    async def get_prompt(self, workspace: str, bundle_id: str, name: str) -> GatewayPrompt:
        """One of the bundle's own prompts."""
        return await self._call(
            "GET", f"{self._gw(workspace, bundle_id)}/prompts/{seg(name)}", GatewayPrompt, safe=True
        )

    async def put_prompt(self, workspace: str, bundle_id: str, body: GatewayPromptPut) -> GatewayPrompt:
        """Create or replace a bundle prompt by its name."""
        path = f"{self._gw(workspace, bundle_id)}/prompts/{seg(body.name)}"
        return await self._call("PUT", path, GatewayPrompt, body=encode_body(body), safe=True)

    async def delete_prompt(self, workspace: str, bundle_id: str, name: str) -> None:
        """Delete a bundle prompt."""
        await self.request("DELETE", f"{self._gw(workspace, bundle_id)}/prompts/{seg(name)}", safe=True)

    async def list_resources(self, workspace: str, bundle_id: str) -> list[GatewayResource]:
        """The bundle's own resources in name order."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/resources", GatewayResource)

    def _resource_path(self, workspace: str, bundle_id: str, name: str) -> str:
        # Resource names are folders joined by '/': the slashes stay literal in the path.
        return f"{self._gw(workspace, bundle_id)}/resources/{quote(name, safe='/')}"

    async def get_resource(self, workspace: str, bundle_id: str, name: str) -> GatewayResource:
        """One of the bundle's own resources."""
        return await self._call(
            "GET", self._resource_path(workspace, bundle_id, name), GatewayResource, safe=True
        )

    async def put_resource(self, workspace: str, bundle_id: str, body: GatewayResourcePut) -> GatewayResource:
        """Create or replace a bundle resource by its name."""
        path = self._resource_path(workspace, bundle_id, body.name)
        return await self._call("PUT", path, GatewayResource, body=encode_body(body), safe=True)

    async def delete_resource(self, workspace: str, bundle_id: str, name: str) -> None:
        """Delete a bundle resource; Conflict while a prompt embeds it."""
        await self.request("DELETE", self._resource_path(workspace, bundle_id, name), safe=True)

    # --- endpoints --------------------------------------------------------------------------

    async def issue_endpoint_key(self, workspace: str, endpoint_id: str) -> SecretStr:
        """Issue a new API key for an ApiKey endpoint; the previous key stops working."""
        path = f"{self._ws(workspace)}/endpoints/{seg(endpoint_id)}/api-key"
        issued = await self._call("POST", path, ApiKeyIssued, safe=False)
        return issued.api_key

    # --- knowledge set sources --------------------------------------------------------------

    def _sources(self, workspace: str, set_id: str) -> str:
        return f"{self._ws(workspace)}/knowledge-sets/{seg(set_id)}/sources"

    async def list_sources(self, workspace: str, set_id: str) -> list[KnowledgeSource]:
        """A knowledge set's sources in creation order (a set also embeds them in ``sources``)."""
        return await self._all(self._sources(workspace, set_id), KnowledgeSource)

    async def put_source(
        self, workspace: str, set_id: str, key: str, body: KnowledgeSourcePut, *, revision: int | None = None
    ) -> KnowledgeSource:
        """Create or replace the source with ``key``; null credentials keep the stored ones.

        With ``revision``, only at that revision of the source (PreconditionFailed otherwise), and
        then not repeated after a lost answer: the repeat would find the revision moved on.
        """
        path = f"{self._sources(workspace, set_id)}/{seg(key)}"
        headers = {"If-Match": f'"{revision}"'} if revision is not None else None
        return await self._call(
            "PUT", path, KnowledgeSource, body=encode_body(body), headers=headers, safe=revision is None
        )

    async def add_source(self, workspace: str, set_id: str, body: KnowledgeSourcePut) -> KnowledgeSource:
        """Add a source of the user's own (it has no key); not repeated after a lost answer."""
        path = self._sources(workspace, set_id)
        return await self._call("POST", path, KnowledgeSource, body=encode_body(body), safe=False)

    async def delete_source(
        self, workspace: str, set_id: str, ref: str, *, revision: int | None = None
    ) -> None:
        """Delete a source by its key or its ``src_`` id, with the credentials it stored (only at
        ``revision`` of the source when given)."""
        headers = {"If-Match": f'"{revision}"'} if revision is not None else None
        await self.request(
            "DELETE", f"{self._sources(workspace, set_id)}/{seg(ref)}", headers=headers, safe=True
        )

    # --- app versions -----------------------------------------------------------------------

    def _versions(self, workspace: str, app_id: str) -> str:
        return f"{self._ws(workspace)}/apps/{seg(app_id)}/versions"

    async def list_app_versions(self, workspace: str, app_id: str) -> list[AppVersion]:
        """An app's versions, oldest first."""
        return await self._all(self._versions(workspace, app_id), AppVersion)

    async def add_app_version(self, workspace: str, app_id: str, body: AppVersionCreate) -> App:
        """Add the app's next version; returns the app, which shows it as ``latest_version``.

        Not repeated after a lost answer: a repeat would add another version.
        """
        path = self._versions(workspace, app_id)
        return await self._call("POST", path, App, body=encode_body(body), safe=False)

    async def set_app_version_archived(
        self, workspace: str, app_id: str, version: int, archived: bool
    ) -> AppVersion:
        """Archive or restore one version; the app then shows its latest unarchived one."""
        path = f"{self._versions(workspace, app_id)}/{version}"
        body = encode_body(AppVersionUpdate(archived=archived))
        # Setting a flag to a value: repeating it is harmless.
        return await self._call("PATCH", path, AppVersion, body=body, safe=True)

    # --- artifacts --------------------------------------------------------------------------

    def _artifact(self, workspace: str, digest: str) -> str:
        _check_digest(digest)
        return f"{self._ws(workspace)}/artifacts/{digest}"

    async def put_artifact(self, workspace: str, digest: str, data: bytes) -> Artifact:
        """Store an archive by its digest; Refused when the bytes hash otherwise or the archive is
        refused. Storing the same digest again answers the stored artifact."""
        timeout = self._http.timeout
        return await self._call(
            "PUT",
            self._artifact(workspace, digest),
            Artifact,
            body=data,
            headers={"Content-Type": "application/octet-stream"},
            safe=True,
            http_timeout=httpx.Timeout(
                connect=timeout.connect,
                read=max(timeout.read or 0.0, _UPLOAD_READ_TIMEOUT),
                write=timeout.write,
                pool=timeout.pool,
            ),
        )

    async def get_artifact(self, workspace: str, digest: str) -> Artifact:
        """A stored artifact's metadata and who refers to it; NotFound when it is not stored."""
        return await self._call("GET", self._artifact(workspace, digest), Artifact, safe=True)

    async def list_artifacts(self, workspace: str) -> list[Artifact]:
        """Every artifact of the workspace, in upload order."""
        return await self._all(f"{self._ws(workspace)}/artifacts", Artifact)

    async def delete_artifact(self, workspace: str, digest: str) -> None:
        """Delete an artifact and its extracted files; NotFound when it is not stored, Conflict
        while an MCP server spec refers to it."""
        await self.request("DELETE", self._artifact(workspace, digest), safe=True)
