"""The async httpx client of the platform API v1; implements ``PlatformAPI``.

A call is repeated only when repeating it cannot do harm: connection failures and 429 (the
platform did not act), and 5xx or lost responses for GET, PUT, DELETE and creates that carry an
idempotency key. Request bodies are never logged or echoed in errors: they may hold secrets.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote, unquote

import httpx
from pydantic import BaseModel, SecretStr, ValidationError

from bundle_operator.platform.catalog import ModelInfo
from bundle_operator.platform.errors import NotFound, PlatformError, Unavailable, error_for_status
from bundle_operator.platform.gate import OK, CallGate, CircuitOpen, Outcome
from bundle_operator.platform.kinds import Kind
from bundle_operator.platform.models import (
    ApiKeyIssued,
    ApiModel,
    App,
    AppVersion,
    AppVersionCreate,
    AppVersionUpdate,
    Entity,
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
    Problem,
    member_resource_id,
)
from bundle_operator.platform.protocol import Filters
from bundle_operator.platform.retry import RetryPolicy, parse_retry_after
from bundle_operator.platform.sharing import SharedReads

E = TypeVar("E", bound=Entity)
C = TypeVar("C", bound=ApiModel)
U = TypeVar("U", bound=ApiModel)
M = TypeVar("M", bound=BaseModel)

ENV_URL = "BUNDLE_PLATFORM_URL"
ENV_TOKEN = "BUNDLE_PLATFORM_TOKEN"
PROBLEM_JSON = "application/problem+json"
_PAGE_LIMIT = 500

# Transport failures where the request never reached the platform: repeating is always safe.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A pause of the whole platform at most this long is waited out inside one call; a longer one
# fails the call, so the reconcile reports the outage and backs off.
_WAIT_OUT_PAUSE = 2.0


def _wire_default(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot send a {type(value).__name__}")


def encode_body(model: BaseModel, *, only_set: bool = False) -> bytes:
    """The JSON a model is sent as; secret fields carry their real values (they are write-only)."""
    data = model.model_dump(mode="python", exclude_unset=only_set)
    return json.dumps(data, default=_wire_default).encode()


def page_of(model: type[M]) -> type[Page[M]]:
    """The Page model whose items are ``model``."""
    return Page[model]  # type: ignore[valid-type]


def _seg(value: str) -> str:
    return quote(value, safe="")


def _workspace_of(path: str) -> str:
    """The workspace segment of ``/v1/workspaces/{ws}/...`` as sent (quoted), or ''."""
    parts = path.split("/")
    return unquote(parts[3]) if len(parts) > 3 and parts[1:3] == ["v1", "workspaces"] else ""


def _check_member(member: str) -> None:
    # member__name is split at the first '__': a member name holding '__' or starting or ending
    # with '_' would address another member's entry, so it is refused before anything is sent.
    if not member or "__" in member or member.startswith("_") or member.endswith("_"):
        raise ValueError(f"{member!r} cannot be a gateway member name")


class PlatformClient:
    """Talks to one platform over HTTP; use as an async context manager or call ``aclose``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
        gate: CallGate | None = None,
        shared: SharedReads | None = None,
    ) -> None:
        headers = {"Accept": f"application/json, {PROBLEM_JSON}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            transport=transport,
            event_hooks=dict(event_hooks) if event_hooks else None,
        )
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        # Shared with the other clients of the same platform (see k8s/platforms.py); None for the
        # CLI and tests, which call the platform directly.
        self.gate = gate
        self.shared = shared

    @classmethod
    def from_env(cls, **kwargs: Any) -> PlatformClient:
        """A client for ``$BUNDLE_PLATFORM_URL`` with ``$BUNDLE_PLATFORM_TOKEN``."""
        url = os.environ.get(ENV_URL)
        if not url:
            raise ValueError(f"{ENV_URL} is not set")
        return cls(url, token=os.environ.get(ENV_TOKEN) or None, **kwargs)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> PlatformClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- transport --------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        safe: bool,
    ) -> httpx.Response:
        """Send one call, repeating it per the retry policy; raises a PlatformError on failure."""
        all_headers = dict(headers or {})
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        # Whether an earlier attempt may have been carried out although its answer was lost.
        maybe_done = False
        for attempt in range(self._retry.attempts):
            last = attempt == self._retry.attempts - 1
            try:
                response = await self._send(method, path, body, params, all_headers)
            except CircuitOpen as exc:
                if last or (exc.retry_after or 0.0) > _WAIT_OUT_PAUSE:
                    raise
                await self._sleep(exc.retry_after or 0.0)
                continue
            except _NOT_SENT as exc:
                error: PlatformError = Unavailable(
                    f"could not reach the platform at {self.base_url} ({type(exc).__name__})",
                    code="unreachable",
                )
                retryable = True
            except httpx.TransportError as exc:
                error = Unavailable(
                    f"the call to the platform at {self.base_url} failed ({type(exc).__name__})",
                    code="transport_error",
                )
                retryable = safe
                maybe_done = True
            else:
                if response.status_code < 400:
                    return response
                if response.status_code == 404 and method == "DELETE" and maybe_done:
                    # The earlier attempt deleted it and its answer was lost: the delete is done.
                    return response
                error = problem_error(response)
                maybe_done = maybe_done or response.status_code >= 500
                retryable = response.status_code == 429 or (response.status_code >= 500 and safe)
            if last or not retryable:
                raise error
            await self._sleep(self._retry.delay(attempt, error.retry_after, self._rng))
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns or raises

    async def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
    ) -> httpx.Response:
        """One HTTP call, through the platform's gate when there is one."""
        if self.gate is None:
            return await self._http.request(method, path, content=body, params=params, headers=headers)
        try:
            async with self.gate.slot() as report:
                try:
                    response = await self._http.request(
                        method, path, content=body, params=params, headers=headers
                    )
                except _NOT_SENT:
                    report(Outcome(overloaded=True))
                    raise
                except httpx.TransportError:
                    report(OK)
                    raise
                pause = response.headers.get("Retry-After")
                if response.status_code == 429 or (response.status_code == 503 and pause is not None):
                    report(Outcome(overloaded=True, retry_after=parse_retry_after(pause)))
                else:
                    report(OK)
                return response
        finally:
            if method != "GET" and self.shared is not None:
                self.shared.wrote(_workspace_of(path))

    async def _call(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        safe: bool,
    ) -> M:
        response = await self.request(method, path, body=body, params=params, headers=headers, safe=safe)
        try:
            return model.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise PlatformError(
                f"the platform answered {method} {path} with a body that does not match the API: {exc}",
                status=response.status_code,
                code="bad_response",
            ) from None

    def _ws(self, workspace: str) -> str:
        return f"/v1/workspaces/{_seg(workspace)}"

    def _gw(self, workspace: str, bundle_id: str) -> str:
        return f"{self._ws(workspace)}/gateway-bundles/{_seg(bundle_id)}"

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
            "GET", f"{self._ws(workspace)}/{kind.path}/{_seg(entity_id)}", kind.entity, safe=True
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
        items: list[E] = []
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
            f"{self._ws(workspace)}/{kind.path}/{_seg(entity_id)}",
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
            "DELETE", f"{self._ws(workspace)}/{kind.path}/{_seg(entity_id)}", headers=headers, safe=True
        )

    async def find_by_idempotency_key(self, workspace: str, key: str) -> IdempotencyRecord | None:
        """What a create sent with ``key`` made in the workspace; None when no such create was recorded."""
        path = f"{self._ws(workspace)}/idempotency-keys/{_seg(key)}"
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
        path = f"{self._gw(workspace, bundle_id)}/members/{_seg(member)}"
        return await self._call("PUT", path, GatewayMember, body=encode_body(body), safe=True)

    async def delete_member(self, workspace: str, bundle_id: str, member: str) -> None:
        """Remove a member and its curation."""
        await self.request("DELETE", f"{self._gw(workspace, bundle_id)}/members/{_seg(member)}", safe=True)

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
        path = f"{self._gw(workspace, bundle_id)}/tools/{_seg(tool_id)}"
        return await self._call("GET", path, GatewayTool, safe=True)

    async def put_tool(
        self, workspace: str, bundle_id: str, tool_id: str, body: GatewayToolCuration
    ) -> GatewayTool:
        """Replace the curation of tool ``member__tool``; Conflict when the override name is held."""
        path = f"{self._gw(workspace, bundle_id)}/tools/{_seg(tool_id)}"
        return await self._call("PUT", path, GatewayTool, body=encode_body(body), safe=True)

    async def list_member_prompts(self, workspace: str, bundle_id: str) -> list[GatewayMemberPrompt]:
        """Members' prompts with their curation in this bundle."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/member-prompts", GatewayMemberPrompt)

    async def put_member_prompt(
        self, workspace: str, bundle_id: str, member: str, prompt: str, body: GatewayEntryCuration
    ) -> GatewayMemberPrompt:
        """Replace how a member's prompt shows in this bundle."""
        _check_member(member)
        path = f"{self._gw(workspace, bundle_id)}/member-prompts/{_seg(f'{member}__{prompt}')}"
        return await self._call("PUT", path, GatewayMemberPrompt, body=encode_body(body), safe=True)

    async def list_member_resources(self, workspace: str, bundle_id: str) -> list[GatewayMemberResource]:
        """Members' resources with their curation in this bundle."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/member-resources", GatewayMemberResource)

    async def put_member_resource(
        self, workspace: str, bundle_id: str, member: str, uri: str, body: GatewayEntryCuration
    ) -> GatewayMemberResource:
        """Replace how a member's resource shows in this bundle."""
        _check_member(member)
        path = f"{self._gw(workspace, bundle_id)}/member-resources/{_seg(member_resource_id(member, uri))}"
        return await self._call("PUT", path, GatewayMemberResource, body=encode_body(body), safe=True)

    async def list_prompts(self, workspace: str, bundle_id: str) -> list[GatewayPrompt]:
        """The bundle's own prompts in name order."""
        return await self._all(f"{self._gw(workspace, bundle_id)}/prompts", GatewayPrompt)

    async def get_prompt(self, workspace: str, bundle_id: str, name: str) -> GatewayPrompt:
        """One of the bundle's own prompts."""
        return await self._call(
            "GET", f"{self._gw(workspace, bundle_id)}/prompts/{_seg(name)}", GatewayPrompt, safe=True
        )

    async def put_prompt(self, workspace: str, bundle_id: str, body: GatewayPromptPut) -> GatewayPrompt:
        """Create or replace a bundle prompt by its name."""
        path = f"{self._gw(workspace, bundle_id)}/prompts/{_seg(body.name)}"
        return await self._call("PUT", path, GatewayPrompt, body=encode_body(body), safe=True)

    async def delete_prompt(self, workspace: str, bundle_id: str, name: str) -> None:
        """Delete a bundle prompt."""
        await self.request("DELETE", f"{self._gw(workspace, bundle_id)}/prompts/{_seg(name)}", safe=True)

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
        path = f"{self._ws(workspace)}/endpoints/{_seg(endpoint_id)}/api-key"
        issued = await self._call("POST", path, ApiKeyIssued, safe=False)
        return issued.api_key

    # --- knowledge set sources --------------------------------------------------------------

    def _sources(self, workspace: str, set_id: str) -> str:
        return f"{self._ws(workspace)}/knowledge-sets/{_seg(set_id)}/sources"

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
        path = f"{self._sources(workspace, set_id)}/{_seg(key)}"
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
            "DELETE", f"{self._sources(workspace, set_id)}/{_seg(ref)}", headers=headers, safe=True
        )

    # --- app versions -----------------------------------------------------------------------

    def _versions(self, workspace: str, app_id: str) -> str:
        return f"{self._ws(workspace)}/apps/{_seg(app_id)}/versions"

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

    # --- operations -------------------------------------------------------------------------

    async def health(self) -> bool:
        """True when the platform answers its health route."""
        await self.request("GET", "/healthz", safe=True)
        return True


def problem_error(response: httpx.Response) -> PlatformError:
    """The typed error for a failed response, read from its problem+json body when it has one."""
    status = response.status_code
    cls = error_for_status(status)
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    problem: Problem | None = None
    if response.headers.get("Content-Type", "").split(";")[0].strip() in (PROBLEM_JSON, "application/json"):
        try:
            problem = Problem.model_validate(response.json())
        except (ValueError, ValidationError):
            problem = None
    if problem is None:
        return cls(
            f"the platform answered HTTP {status} {response.reason_phrase}",
            status=status,
            code=f"http_{status}",
            retry_after=retry_after,
        )
    return cls(
        problem.detail,
        status=status,
        code=problem.code,
        errors=problem.errors,
        holders=problem.holders,
        retry_after=retry_after,
    )
