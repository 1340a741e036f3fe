"""The gateway's MCP side: every enabled endpoint is a streamable-HTTP MCP server at its URL.

Each endpoint gets an MCP server of its own (gateway_endpoint.py), started on first use and served
through the API's listener (``{public path}/{name}/mcp``). Every request first passes the
endpoint's own door: the method must be one the transport has (GET, POST, DELETE), the endpoint
must exist and be enabled, an ApiKey endpoint wants its current key as a bearer token, a session id
must be one its sender opened, and a body must fit the transport's limit. Before all that, the
``Host`` and ``Origin`` are checked against DNS rebinding (gateway_door.py); after it, a call of a
tool the token's scopes do not cover is a scope challenge (gateway_stepup.py). The gateway follows
the store and announces list changes to the endpoints it serves; tool calls go to the members
through one pool of clients and are audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import aiohttp
import mcp_types as types
from aiohttp import web
from mcp import Client
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.exceptions import MCPError
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.context import Context

from bundle_operator.reference_platform.asgi_bridge import serve_asgi
from bundle_operator.reference_platform.gateway_answers import answering
from bundle_operator.reference_platform.gateway_audit import AuditCall, AuditLog, Retention
from bundle_operator.reference_platform.gateway_direct import (
    DirectCall,
    answer,
    direct_call,
    failure,
    param_headers_agree,
)
from bundle_operator.reference_platform.gateway_door import Door
from bundle_operator.reference_platform.gateway_endpoint import (
    MAX_REQUEST_BODY,
    GatewayEndpoint,
    Relayed,
    shown,
)
from bundle_operator.reference_platform.gateway_limits import (
    RateLimiter,
    json_message,
    retry_after,
    tool_calls,
)
from bundle_operator.reference_platform.gateway_metrics import GatewayMetrics
from bundle_operator.reference_platform.gateway_oauth import (
    PRINCIPAL,
    OAuthSettings,
    Principal,
    TokenRefused,
    TokenVerifier,
    protected_resource_metadata,
    tool_allowed,
)
from bundle_operator.reference_platform.gateway_rules import MAX_PRESENTED_NAME
from bundle_operator.reference_platform.gateway_spans import (
    TRACE_CONTEXT,
    forwarding,
    member_meta,
    outcome,
    parent_of,
    refused,
    request_context,
    serving,
)
from bundle_operator.reference_platform.gateway_stepup import needs_scopes, refused_tool, step_up
from bundle_operator.reference_platform.gateway_view import EndpointView, Served, endpoint_view
from bundle_operator.reference_platform.member_forward import (
    HeaderMismatch,
    MemberForwarder,
    OnMessage,
    as_written,
)
from bundle_operator.reference_platform.member_link import MemberLink, MemberPool
from bundle_operator.reference_platform.member_relay import RelayPool, Route
from bundle_operator.reference_platform.member_subscriptions import Subscriptions
from bundle_operator.reference_platform.problems import ApiError
from bundle_operator.reference_platform.stdio_loopback import unavailable_of
from bundle_operator.reference_platform.storage import Store
from bundle_operator.telemetry import tracing

log = logging.getLogger("bundle_operator.platform.gateway")

ROUTE_NAME = "gateway-mcp"
METADATA_ROUTE_NAME = "gateway-oauth-metadata"
METADATA_PREFIX = "/.well-known/oauth-protected-resource"
CATALOG_ROUTE_NAME = "gateway-catalog"
DEBOUNCE = 0.05
# The methods of the streamable HTTP transport; HEAD and the rest answer 405 before anything else.
METHODS = ("GET", "POST", "DELETE")
_READ_CHUNK = 64 * 1024
# How often a call on the 2026-07-28 wire looks whether its client is still connected (seconds).
DISCONNECT_POLL = 0.25
_R = TypeVar("_R")


class Gateway:
    """Every endpoint's MCP server, the members' clients, and the audit log."""

    def __init__(
        self,
        store: Store,
        *,
        public_url: Callable[[], str] = lambda: "http://127.0.0.1/mcp",
        verifier: TokenVerifier | None = None,
        retention: Retention | None = None,
        allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self.store = store
        self.public_url = public_url
        self.door = Door(allowed_hosts)
        self.verifier = verifier or TokenVerifier()
        self.limiter = RateLimiter()
        self.metrics = GatewayMetrics()
        self.pool = MemberPool()
        self.relays = RelayPool()
        self.subscriptions = Subscriptions()
        self.forwarder = MemberForwarder()
        self.endpoints: dict[str, GatewayEndpoint] = {}
        self.audit_log = AuditLog(store, retention or Retention(), self.metrics)
        self._views: dict[str, tuple[int, EndpointView | None]] = {}
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self._announcer: asyncio.Task[None] | None = None
        # Told of every call a member could not answer, so its health shows it (discovery.py).
        self.member_failed: Callable[[MemberLink, str], None] = lambda _link, _reason: None

    def start(self) -> None:
        """Follow the store to announce list changes."""
        self.store.listen(lambda _generation: self._changed.set())
        self._announcer = asyncio.create_task(self._announce(), name="gateway-announcer")
        self.audit_log.start()

    async def stop(self) -> None:
        """Close every endpoint and member client."""
        if self._announcer is not None:
            self._announcer.cancel()
            with contextlib.suppress(BaseException):
                await self._announcer
        for endpoint in list(self.endpoints.values()):
            await endpoint.close()
        self.endpoints.clear()
        await self.audit_log.stop()
        await self.pool.close()
        await self.relays.close()
        await self.subscriptions.close()
        await self.forwarder.close()

    async def view(self, name: str) -> EndpointView | None:
        """The endpoint's view at the store's current generation."""
        generation = self.store.generation
        cached = self._views.get(name)
        if cached is not None and cached[0] == generation:
            return cached[1]
        view = await self.store.transact(lambda tx: endpoint_view(tx, name))
        if view is None:
            self._views.pop(name, None)  # unknown names are not remembered: a client picks them
        else:
            self._views[name] = (generation, view)
        return view

    async def current(self, endpoint: GatewayEndpoint) -> EndpointView:
        """The view a handler answers from; an endpoint deleted meanwhile answers not found."""
        view = await self.view(endpoint.name)
        if view is None:
            raise MCPError(code=types.INVALID_REQUEST, message="this endpoint no longer exists")
        endpoint.view = view
        return view

    async def endpoint(self, name: str) -> tuple[GatewayEndpoint | None, EndpointView | None]:
        """The live MCP server of an endpoint (started on first use), with its current view."""
        view = await self.view(name)
        live = self.endpoints.get(name)
        if view is None or (live is not None and live.view.endpoint_id != view.endpoint_id):
            # Deleted, or deleted and made again under the same name: the old sessions end.
            if live is not None:
                self.endpoints.pop(name, None)
                await live.close()
            live = None
        if view is None:
            return None, None
        if live is None:
            async with self._lock:
                live = self.endpoints.get(name)
                if live is None:
                    live = GatewayEndpoint(name, self, view)
                    await live.start()
                    self.endpoints[name] = live
        return live, view

    async def call_member_tool(
        self,
        link: MemberLink | None,
        member: str,
        tool: str,
        arguments: dict[str, Any],
        carried: dict[str, Any] | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """A member's answer to ``tools/call``: passed through raw on the 2026-07-28 wire."""
        forwarded = await self._forward(link, member, tool, arguments, carried)
        if forwarded is not None:
            return forwarded
        meta = _sdk_meta((carried or {}).get("meta"))
        result: types.CallToolResult = await self.on_member(
            link, member, lambda client: client.call_tool(tool, arguments, meta=meta)
        )
        return as_written(result)

    async def _forward(
        self,
        link: MemberLink | None,
        member: str,
        tool: str,
        arguments: dict[str, Any],
        carried: dict[str, Any] | None,
        on_message: OnMessage | None = None,
    ) -> dict[str, Any] | None:
        """The call posted to a member that speaks the 2026-07-28 wire (member_forward.py).

        None when the member does not, or wants the call as only its SDK client sends it: the
        member ran nothing, and the call goes through a client.
        """
        if link is None:
            return None
        version = (await self._guarded(link, member, self.pool.client(link))).protocol_version
        if version not in MODERN_PROTOCOL_VERSIONS:
            return None
        try:
            return await self.forwarder.call_tool(link, version, tool, arguments, carried, on_message)
        except (HeaderMismatch, aiohttp.ClientConnectorError):
            return None
        except MCPError as exc:
            raise self._cannot_run(link, member, exc) from None
        except Exception as exc:
            raise self._unavailable(link, member, exc) from None

    def _unavailable(self, link: MemberLink, member: str, exc: BaseException) -> MCPError:
        reason = link.scrub(f"{type(exc).__name__}: {exc}".strip().rstrip(":"))
        log.warning("the member %s did not answer: %s", member, reason)
        self.member_failed(link, reason)
        return MCPError(code=types.INTERNAL_ERROR, message=f"the member '{member}' did not answer: {reason}")

    def _cannot_run(self, link: MemberLink, member: str, exc: MCPError) -> MCPError:
        """``exc``, or, when the platform's own process of the member could not serve, an error naming it."""
        found = unavailable_of(exc)
        if found is None:
            return exc
        log.warning("the member %s cannot serve: %s", member, found.reason)
        if found.state != "crashed":
            # A crashed server starts again on the next use: its tools stay offered meanwhile.
            self.member_failed(link, found.reason)
        return MCPError(
            code=types.INTERNAL_ERROR, message=f"the member '{member}' cannot serve: {found.reason}"
        )

    async def relay_member_tool(
        self, link: MemberLink | None, member: str, tool: str, arguments: dict[str, Any], relayed: Relayed
    ) -> dict[str, Any]:
        """A member's answer to ``tools/call`` with its progress, logs and requests relayed.

        A client on the 2026-07-28 wire gets a member's request for input as the member wrote it
        (an input-required result) and answers it on its retry, which goes to the member as sent.
        """
        route = relayed.route(member)
        if not route.modern and not route.streamed:
            # A caller that cannot be asked anything and gave no progress token: the member is sent
            # the call as the direct path sends it, and its log messages go to the caller's session.
            sent = {LOG_LEVEL_META_KEY: "debug", **tracing.trace_meta(relayed.meta)}
            plain = {"capabilities": {}, "meta": sent}
            forwarded = await self._forward(link, member, tool, arguments, plain, route.notified)
            if forwarded is not None:
                return forwarded
        if route.modern:
            # Posted as the caller sent it, with its capabilities: the member's progress and logs
            # come back on the call's stream, its requests for input as its result.
            forwarded = await self._forward(
                link, member, tool, arguments, relayed.carried(route), route.notified
            )
            if forwarded is not None:
                return forwarded
        progress = route.progress if relayed.progress else None
        meta = _sdk_meta(relayed.meta)

        async def action(client: Client) -> dict[str, Any]:
            if route.modern:
                answer: types.Result = await client.session.call_tool(
                    tool,
                    arguments,
                    progress_callback=progress,
                    input_responses=relayed.input_responses,
                    request_state=relayed.request_state,
                    meta=meta,
                    allow_input_required=True,
                )
            else:
                answer = await client.call_tool(tool, arguments, progress_callback=progress, meta=meta)
            return as_written(answer)

        result: dict[str, Any] = await self.on_member(link, member, action, route)
        return result

    async def on_member(
        self,
        link: MemberLink | None,
        member: str,
        action: Callable[[Client], Awaitable[Any]],
        route: Route | None = None,
    ) -> Any:
        """Run ``action`` against a member; an unreachable member is an MCP error naming it.

        With a route, on a member client of the call's own, whose messages go to that route.
        """
        reachable = _reachable(link, member)
        if route is not None:
            return await self._guarded(reachable, member, self.relays.call(reachable, route, action))
        return await self._guarded(reachable, member, self.pool.call(reachable, action))

    async def _guarded(self, link: MemberLink, member: str, work: Awaitable[_R]) -> _R:
        """``work`` with the member; a failure other than the member's own MCP error names it."""
        try:
            return await work
        except MCPError as exc:
            raise self._cannot_run(link, member, exc) from None
        except Exception as exc:
            raise self._unavailable(link, member, exc) from None

    async def subscribe(
        self, key: str, served: Served, uri: str, notify: Callable[[str], Awaitable[None]]
    ) -> None:
        """Subscribe ``key`` to a member URI; ``notify`` is told of the member's updates of it."""
        link = _reachable(served.link, served.member)
        await self._guarded(link, served.member, self.subscriptions.subscribe(link, uri, key, notify))

    async def unsubscribe(self, key: str, uri: str) -> None:
        """Take a session's subscription off a URI (nothing when it had none)."""
        await self.subscriptions.unsubscribe(uri, key)

    def audit(self, call: AuditCall, result: str, error: str | None) -> None:
        """Record one tool call (never its arguments), and its outcome on the current span."""
        self.audit_log.record(call, result, error)
        outcome(result, error)

    async def _announce(self) -> None:
        while True:
            await self._changed.wait()
            # An install writes many rows in a burst; announce once it settles a little.
            await asyncio.sleep(DEBOUNCE)
            self._changed.clear()
            for name, endpoint in list(self.endpoints.items()):
                try:
                    view = await self.view(name)
                    if view is not None:
                        await endpoint.announce(view)
                except Exception:
                    log.exception("cannot announce list changes on the endpoint %s", name)

    # --- the HTTP door -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Serve one HTTP request to ``{public path}/{name}/mcp``; a refusal fails the request's span."""
        try:
            return await self._handle(request)
        except ApiError as exc:
            refused(exc.code, exc.detail)
            raise

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._check_host(request)
        if request.method not in METHODS:
            raise ApiError(
                405,
                "method_not_allowed",
                "an MCP endpoint takes GET, POST and DELETE",
                headers={"Allow": ", ".join(METHODS)},
            )
        name = request.match_info["endpoint"]
        live, view = await self.endpoint(name)
        if live is None or view is None:
            raise ApiError(404, "not_found", f"there is no endpoint '{name}'")
        self.door.check_origin(request.headers.get("Origin"), view.allowed_origins)
        if not view.enabled:
            raise ApiError(403, "endpoint_disabled", f"the endpoint '{name}' is disabled")
        principal = await self._principal(request, view)
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is not None and not live.owners.allows(session_id, principal.who):
            # Said as the SDK says an unknown session: another's session is not there for this sender.
            return _session_not_found()
        body = await _read_body(request) if request.method == "POST" else None
        # Read once, and only when the rate limit or the direct path (the 2026-07-28 wire) needs it.
        modern = request.headers.get("MCP-Protocol-Version") in MODERN_PROTOCOL_VERSIONS
        scoped = needs_scopes(view)
        message = json_message(body) if body and (view.rate_limit is not None or modern or scoped) else None
        if scoped and (forbidden := refused_tool(view, principal, message)) is not None:
            call = AuditCall(view, forbidden, view.tools.get(forbidden), time.perf_counter(), principal)
            self.audit(call, "forbidden", f"the token's scopes do not allow the tool '{forbidden}'")
            raise step_up(view, forbidden, resource_metadata_url(self.endpoint_url(view.name)))
        if view.rate_limit is not None:
            for tool in tool_calls(message):
                wait = self.limiter.take((view.endpoint_id, principal.who), *view.rate_limit)
                if wait is not None:
                    call = AuditCall(view, tool, None, time.perf_counter(), principal)
                    self.audit(call, "rate_limited", "rate limit")
                    raise ApiError(
                        429,
                        "rate_limited",
                        f"more than {view.rate_limit[0]} tool calls a minute (burst {view.rate_limit[1]}) "
                        "from this client; retry after the time Retry-After gives",
                        headers={"Retry-After": retry_after(wait)},
                    )
        if request.method == "POST" and (direct := self._direct(request, body, message, view)) is not None:
            return await _while_connected(request, self._answer_directly(direct, view, principal, live))
        live.view = view
        live.server.instructions = view.description or None
        plain = (
            not modern
            and body is not None
            and live.plainly(session_id, message if message is not None else json_message(body))
        )
        served = _answering(
            plain,
            serve_asgi(
                live.owners.recording(live.manager.handle_request, principal.who),
                request,
                body=body,
                state={PRINCIPAL: principal, TRACE_CONTEXT: request_context()},
                user=_sdk_user(principal),
            ),
        )
        # On the 2026-07-28 wire a client cancels a request by closing its stream; on the handshake
        # wire a dropped stream is no cancellation (the client may resume it).
        cancellable = modern and request.method == "POST"
        response = await (_while_connected(request, served) if cancellable else served)
        if request.method == "DELETE" and session_id and response.status < 400:
            live.forget(session_id)
            await self.subscriptions.forget(live.subscriber(None, session_id))
        return response

    def _direct(
        self, request: web.Request, body: bytes | None, message: Any, view: EndpointView
    ) -> DirectCall | None:
        """A modern ``tools/call`` the door answers without the SDK's server (gateway_direct.py)."""
        call = direct_call(request, body, message, MAX_REQUEST_BODY)
        if call is None:
            return None
        tool = view.tools.get(call.name)
        schema = tool.listing.get("inputSchema") if tool is not None else None
        return call if param_headers_agree(request, call, schema) else None

    async def _answer_directly(
        self, call: DirectCall, view: EndpointView, principal: Principal, live: GatewayEndpoint
    ) -> web.Response:
        live.view = view
        try:
            result = await self.call_tool(
                view,
                principal,
                call.name,
                call.arguments,
                carried=call.carried,
                parent=parent_of(call.carried.get("meta")),
                request_id=call.request_id,
            )
        except Exception as exc:
            return failure(call, exc)
        return answer(call, result, live.server.server_info_stamp)

    async def call_tool(
        self,
        view: EndpointView,
        principal: Principal | None,
        name: str,
        arguments: dict[str, Any],
        relayed: Relayed | None = None,
        *,
        carried: dict[str, Any] | None = None,
        parent: Context | None = None,
        request_id: str | int | None = None,
        session_id: str | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """Call the tool presented as ``name`` for ``principal``, audited; refusals are MCP errors.

        Through the SDK's server, ``relayed`` says where the member's messages go; on the door's
        direct path, ``carried`` is what the client's request brings the member besides. While
        tracing is on the call is a span continuing ``parent`` (gateway_spans.py).
        """
        known = name in view.tools
        with serving(
            view,
            "tools/call",
            name if known else shown(name),
            known=known,
            parent=parent,
            request_id=request_id,
            session_id=session_id,
        ):
            return await self._call_tool(view, principal, name, arguments, relayed, carried)

    async def _call_tool(
        self,
        view: EndpointView,
        principal: Principal | None,
        name: str,
        arguments: dict[str, Any],
        relayed: Relayed | None,
        carried: dict[str, Any] | None,
    ) -> types.CallToolResult | dict[str, Any]:
        tool = view.tools.get(name)
        call = AuditCall(view, name, tool, time.perf_counter(), principal)
        if len(name) > MAX_PRESENTED_NAME:
            # No presented tool has such a name: neither the answer nor the audit repeats it whole.
            message = (
                f"this bundle has no tool '{shown(name)}' (tool names have at most "
                f"{MAX_PRESENTED_NAME} characters)"
            )
            self.audit(call, "refused", message)
            raise MCPError(code=types.INVALID_PARAMS, message=message)
        if tool is None:
            reason = view.withheld_tools.get(name)
            message = f"the tool '{name}' {reason}" if reason else f"this bundle has no tool '{name}'"
            self.audit(call, "refused", message)
            raise MCPError(code=types.INVALID_PARAMS, message=message)
        if not tool_allowed(view.oauth, principal, name):
            # The door answers such calls with a scope challenge (gateway_stepup.py) before they get
            # here; this holds for a call it could not read. The member is never called.
            message = f"the token's scopes do not allow the tool '{name}'"
            self.audit(call, "forbidden", message)
            raise MCPError(code=types.INVALID_PARAMS, message=message)
        result: types.CallToolResult | dict[str, Any]
        try:
            with forwarding(tool.member, tool.tool, tool.link):
                if relayed is not None:
                    result = await self.relay_member_tool(
                        tool.link, tool.member, tool.tool, arguments, relayed
                    )
                else:
                    result = await self.call_member_tool(
                        tool.link, tool.member, tool.tool, arguments, carried
                    )
        except MCPError as exc:
            self.audit(call, "error", exc.message)
            raise
        except asyncio.CancelledError:
            self.audit(call, "error", "cancelled by the client")
            raise
        failed = result.get("isError") if isinstance(result, dict) else result.is_error
        self.audit(call, "tool_error" if failed else "ok", None)
        return result

    async def _principal(self, request: web.Request, view: EndpointView) -> Principal:
        """Who sends the request: the key holder of an ApiKey endpoint, a token's subject for OAuth."""
        if view.auth_mode == "OAuth" and view.oauth is not None:
            resource = self.endpoint_url(view.name)
            metadata = resource_metadata_url(resource)
            try:
                return await self.verifier.principal(
                    request.headers.get("Authorization"), OAuthSettings.of(view.oauth, resource)
                )
            except TokenRefused as refusal:
                self.metrics.token_refusals.labels(view.name, refusal.reason).inc()
                raise _challenge(refusal, metadata) from None
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        key = view.api_key or ""
        if (
            view.auth_mode != "ApiKey"
            or scheme.lower() != "bearer"
            or not key
            or not hmac.compare_digest(given.strip().encode(), key.encode())
        ):
            raise ApiError(
                401,
                "unauthorized",
                "send Authorization: Bearer <key> with this endpoint's current API key",
                headers={"WWW-Authenticate": 'Bearer realm="gateway"'},
            )
        return Principal(f"key:{view.endpoint_id}")

    def _check_host(self, request: web.Request) -> None:
        """403 host_not_allowed for a Host the platform is not reached by (gateway_door.py)."""
        self.door.follow(self.public_url())
        self.door.check_host(request.headers.get("Host"))

    def endpoint_url(self, name: str) -> str:
        """Where clients reach the endpoint ``name``."""
        return f"{self.public_url().rstrip('/')}/{name}/mcp"

    async def metadata(self, request: web.Request) -> web.Response:
        """GET /.well-known/oauth-protected-resource{endpoint path}: RFC 9728 metadata."""
        name = request.match_info["endpoint"]
        view = await self.view(name)
        if view is None or view.auth_mode != "OAuth" or view.oauth is None or not view.enabled:
            raise ApiError(404, "not_found", f"there is no OAuth endpoint '{name}'")
        resource = self.endpoint_url(name)
        settings = OAuthSettings.of(view.oauth, resource)
        return web.json_response(protected_resource_metadata(resource, settings, view.bundle_name))

    async def catalog(self, request: web.Request) -> web.Response:
        """GET {endpoint path}/catalog: what a person reads before connecting (seed 002).

        Only through an OAuth endpoint the reader's token could use: without one the bundle is not
        found (never forbidden), so nobody learns that a bundle exists when they have no way in.
        Tools are listed by title and description, and only those the token may call; prompts and
        resources by title and description too.
        """
        self._check_host(request)
        name = request.match_info["endpoint"]
        view = await self.view(name)
        if view is None or view.auth_mode != "OAuth" or view.oauth is None or not view.enabled:
            raise ApiError(404, "not_found", f"there is no catalogue at '{name}'")
        self.door.check_origin(request.headers.get("Origin"), view.allowed_origins)
        principal = await self._principal(request, view)
        tools = [
            {
                "title": _tool_title(t.listing, t.tool),
                "description": str(t.listing.get("description") or ""),
            }
            for presented, t in view.tools.items()
            if tool_allowed(view.oauth, principal, presented)
        ]
        prompts = [
            {"title": str(p.get("title") or p["name"]), "description": str(p.get("description") or "")}
            for p in view.own_prompts.values()
        ] + [
            {
                "title": str(p.listing.get("title") or p.name),
                "description": str(p.listing.get("description") or ""),
            }
            for p in view.member_prompts.values()
        ]
        return web.json_response(
            {
                "bundle": view.bundle_name,
                "overview": view.overview,
                "endpoint": self.endpoint_url(name),
                "tools": tools,
                "prompts": prompts,
                "resources": _catalog_resources(view),
            }
        )


def _catalog_resources(view: EndpointView) -> list[dict[str, str]]:
    """The bundle's own documents, then the members' resources and templates, by title and description."""
    own = [
        {"title": str(r.get("title") or r["name"]), "description": str(r.get("description") or "")}
        for r in view.own_resources.values()
    ]
    listings = [r.listing for r in view.member_resources.values()]
    listings += [t.listing for t in view.member_templates]
    members = [
        {
            "title": str(listing.get("title") or listing.get("name") or ""),
            "description": str(listing.get("description") or ""),
        }
        for listing in listings
    ]
    return own + members


def _sdk_meta(meta: dict[str, Any] | None) -> types.RequestParamsMeta | None:
    """The trace keys a member's SDK client sends in ``_meta`` (the client adds its progress token)."""
    sent = member_meta(tracing.trace_meta(meta))
    return cast(types.RequestParamsMeta, sent) if sent else None


def _reachable(link: MemberLink | None, member: str) -> MemberLink:
    """The member's link; a member without one is an MCP error naming it."""
    if link is None:
        raise MCPError(
            code=types.INTERNAL_ERROR, message=f"the member '{member}' has no URL the gateway can call"
        )
    return link


def _tool_title(listing: dict[str, Any], tool: str) -> str:
    """A tool's title for a person: its title, its annotations' title, or its name at the member."""
    annotations = listing.get("annotations")
    title = listing.get("title") or (annotations.get("title") if isinstance(annotations, dict) else None)
    return str(title or tool)


async def _answering(plain: bool, work: Awaitable[_R]) -> _R:
    """``work``, with its request answered as one JSON body when ``plain`` (gateway_answers.py)."""
    with answering(plain):
        return await work


async def _while_connected(request: web.Request, work: Awaitable[_R]) -> _R:
    """``work``'s answer; once the client has closed the connection, ``work`` is cancelled.

    aiohttp goes on with a handler whose client left; a member's call it waits for would go on too.
    The handler then ends as aiohttp ends one whose client disconnected (nothing is answered).
    """
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL)
        if done:
            return task.result()
        transport = request.transport
        if transport is None or transport.is_closing():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise ConnectionResetError("the client closed the connection")


async def _read_body(request: web.Request) -> bytes:
    """The request's body; 413 (problem+json) past what the transport takes, before reading it all."""
    too_large = ApiError(
        413, "payload_too_large", f"the request body is larger than {MAX_REQUEST_BODY} bytes"
    )
    if request.content_length is not None and request.content_length > MAX_REQUEST_BODY:
        raise too_large
    body = bytearray()
    async for chunk in request.content.iter_chunked(_READ_CHUNK):
        body += chunk
        if len(body) > MAX_REQUEST_BODY:
            raise too_large
    return bytes(body)


def _sdk_user(principal: Principal) -> AuthenticatedUser:
    """The principal as the SDK's session manager knows a user: it binds each session to its opener."""
    # The token itself never goes here: the principal's ``who`` is all the SDK compares.
    return AuthenticatedUser(AccessToken(token="", client_id=principal.who, scopes=[]))


def _session_not_found() -> web.Response:
    """The SDK's answer for a session it does not hold: 404 with a JSON-RPC error."""
    error = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": types.INVALID_REQUEST, "message": "Session not found"},
    }
    return web.json_response(error, status=404)


def resource_metadata_url(resource: str) -> str:
    """Where RFC 9728 puts a resource's metadata: the well-known path before the resource's path."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{METADATA_PREFIX}{parts.path}"


def _challenge(refusal: TokenRefused, metadata: str) -> ApiError:
    """A refused token as RFC 6750 says: 401 invalid_token (or none given), 403 insufficient_scope."""
    params = [f'resource_metadata="{metadata}"']
    if refusal.status == 403:
        params.insert(0, f'error="insufficient_scope", scope="{refusal.scope or ""}"')
        code = "insufficient_scope"
    elif refusal.reason != "missing":
        # A quoted-string (RFC 9110 section 5.6.4): no quote or backslash may end it early.
        description = refusal.description.replace("\\", "/").replace('"', "'")
        params.insert(0, f'error="invalid_token", error_description="{description}"')
        # An issuer that cannot be reached is no fault of the token: the client may retry it as is.
        code = "issuer_unavailable" if refusal.reason == "issuer_unavailable" else "invalid_token"
    else:
        code = "unauthorized"
    return ApiError(
        refusal.status, code, refusal.description, headers={"WWW-Authenticate": "Bearer " + ", ".join(params)}
    )


def mcp_path_prefix(public_url: str | None) -> str:
    """The path under which endpoints are served: the public URL's path, ``/mcp`` by default."""
    if not public_url:
        return "/mcp"
    path = urlsplit(public_url).path.strip("/")
    # A public URL at the host's root serves endpoints at /{name}/mcp.
    return f"/{path}" if path else ""
