"""The MCP server of one gateway endpoint: its SDK server, sessions, listen streams and handlers.

Handlers answer from the endpoint's view (gateway_view.py), fetched anew through the gateway on
every request, so a change to membership, curation, prompts or resources takes effect at once; the
same change is announced to connected sessions as the matching ``list_changed`` notification.

A session belongs to the principal whose request opened it: ``SessionOwners`` lets the door refuse
anyone else's request that names it, as the SDK's session manager does for the ASGI ``user``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE, DEFAULT_MAX_SESSIONS
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.context import Context

from bundle_operator.document.issues import cut_short
from bundle_operator.document.prompt_text import placeholder_names, render
from bundle_operator.reference_platform.asgi_bridge import AsgiApp, Message, Receive, Send
from bundle_operator.reference_platform.gateway_answers import ChoosingSessionManager, can_answer_plainly
from bundle_operator.reference_platform.gateway_oauth import Principal, principal_of, tool_allowed
from bundle_operator.reference_platform.gateway_spans import parent_of, serving
from bundle_operator.reference_platform.gateway_view import OWN_RESOURCE_PREFIX, EndpointView, Served
from bundle_operator.reference_platform.member_forward import as_written
from bundle_operator.reference_platform.member_link import MemberLink
from bundle_operator.reference_platform.member_relay import Route
from bundle_operator.reference_platform.session_task import AnnouncingServer, ManagerTask, keep_legacy_session
from bundle_operator.telemetry import tracing

log = logging.getLogger("bundle_operator.platform.gateway")

# The largest request body an endpoint takes (the SDK's own default), on either path.
MAX_REQUEST_BODY = DEFAULT_MAX_REQUEST_BODY_SIZE
# Handshake-era sessions remembered per endpoint for notifications; the oldest go beyond this.
MAX_LEGACY_SESSIONS = 1024
# Session owners remembered per endpoint: as many as the SDK keeps sessions open.
MAX_SESSION_OWNERS = DEFAULT_MAX_SESSIONS
# A rendered prompt of the bundle's own holds at most this many characters, whatever its arguments:
# a value repeated by every placeholder would otherwise multiply the answer.
MAX_RENDERED_PROMPT = 1024 * 1024
# Member URIs one listen stream may have the gateway subscribe to; more are acknowledged, never fired.
MAX_LISTEN_URIS = 100
# What a client sent is repeated in an error message up to this many characters.
MAX_SHOWN = 200
_SEPARATOR = "__"
_LISTS = ("tools", "prompts", "resources")
_EVENTS: dict[str, Callable[[], ServerEvent]] = {
    "tools": ToolsListChanged,
    "prompts": PromptsListChanged,
    "resources": ResourcesListChanged,
}


class Upstream(Protocol):
    """What an endpoint's handlers ask of the gateway that serves it."""

    async def current(self, endpoint: GatewayEndpoint) -> EndpointView: ...

    async def call_tool(
        self,
        view: EndpointView,
        principal: Principal | None,
        name: str,
        arguments: dict[str, Any],
        relayed: Relayed | None = None,
        *,
        parent: Context | None = None,
        request_id: str | int | None = None,
        session_id: str | None = None,
    ) -> types.CallToolResult | dict[str, Any]: ...

    async def on_member(
        self,
        link: MemberLink | None,
        member: str,
        action: Callable[[Client], Awaitable[Any]],
        route: Route | None = None,
    ) -> Any: ...

    async def subscribe(
        self, key: str, served: Served, uri: str, notify: Callable[[str], Awaitable[None]]
    ) -> None: ...

    async def unsubscribe(self, key: str, uri: str) -> None: ...


def _not_found(what: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=what)


def shown(text: str) -> str:
    """Client text as an error message repeats it: cut short, so no answer grows with the request."""
    return cut_short(text, MAX_SHOWN)


@dataclass(frozen=True)
class Relayed:
    """A call through the SDK's server: where the member's messages go, and what the client carried."""

    route: Callable[[str], Route]  # the route for the member that serves the call
    input_responses: dict[str, Any] | None = None  # the client's answers (2026-07-28 wire)
    request_state: str | None = None
    # The request's ``_meta`` entries a member is sent as they are: progress token, log level.
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def progress(self) -> bool:
        """Whether the client gave a progress token."""
        return "progressToken" in self.meta

    def carried(self, route: Route) -> dict[str, Any]:
        """What a 2026-07-28 ``tools/call`` posted to the member carries (member_forward.py)."""
        carried: dict[str, Any] = {"capabilities": route.capabilities(), "meta": self.meta}
        if self.input_responses is not None:
            carried["inputResponses"] = self.input_responses
        if self.request_state is not None:
            carried["requestState"] = self.request_state
        return carried


def _progress_token(meta: Any) -> Any:
    if not isinstance(meta, dict):
        return None
    return meta.get("progressToken", meta.get("progress_token"))


def _passed_meta(meta: Any) -> dict[str, Any]:
    """The entries of a request's ``_meta`` that go to the member unchanged."""
    if not isinstance(meta, dict):
        return {}
    # The trace-context keys too (SEP-414): gateway_spans.member_meta decides what the member gets.
    passed: dict[str, Any] = {key: meta[key] for key in (LOG_LEVEL_META_KEY,) if key in meta}
    passed.update(tracing.trace_meta(meta))
    token = _progress_token(meta)
    if token is not None:
        passed["progressToken"] = token
    return passed


class SessionOwners:
    """Who opened each session of an endpoint (a principal's ``who``), newest use last.

    Only ids the SDK minted are kept (read from the answer that opened the session), so a client
    cannot grow this with ids it makes up; beyond the bound the least recently used are forgotten,
    and the SDK's own check of the ASGI ``user`` still stands for them.
    """

    def __init__(self, limit: int = MAX_SESSION_OWNERS) -> None:
        self._limit = limit
        self._owners: OrderedDict[str, str] = OrderedDict()

    def allows(self, session_id: str, who: str) -> bool:
        """Whether ``who`` may use the session (True too for a session not known here)."""
        owner = self._owners.get(session_id)
        if owner is None:
            return True
        self._owners.move_to_end(session_id)
        return owner == who

    def claim(self, session_id: str, who: str) -> None:
        """Record ``who`` as the owner of a session the SDK just opened for them."""
        self._owners[session_id] = who
        self._owners.move_to_end(session_id)
        while len(self._owners) > self._limit:
            self._owners.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """The session ended."""
        self._owners.pop(session_id, None)

    def recording(self, app: AsgiApp, who: str) -> AsgiApp:
        """``app`` for a request of ``who``, claiming the session id its answer opens.

        Claimed as the answer starts, before the client can read the id and use it.
        """

        async def recorded(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
            async def watch(message: Message) -> None:
                if message["type"] == "http.response.start" and int(message["status"]) < 400:
                    for name, value in message.get("headers", []):
                        if bytes(name).lower() == MCP_SESSION_ID_HEADER.encode():
                            self.claim(bytes(value).decode("latin-1"), who)
                await send(message)

            await app(scope, receive, watch)

        return recorded


class _RelayedListen:
    """``subscriptions/listen`` (2026-07-28 wire) whose resource subscriptions reach the members.

    While a listen stream wants a member URI, the gateway holds a subscription to it at the member
    and publishes the member's updates on the endpoint's bus, which the SDK's handler filters per
    stream. One member subscription per URI serves every stream of the endpoint that wants it.
    """

    def __init__(self, endpoint: GatewayEndpoint) -> None:
        self._endpoint = endpoint
        self._inner = ListenHandler(endpoint.bus)
        self._holders: dict[str, int] = {}

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        wanted = list(params.notifications.resource_subscriptions or ())[:MAX_LISTEN_URIS]
        held: list[str] = []
        try:
            for uri in dict.fromkeys(wanted):
                if await self._hold(uri):
                    held.append(uri)
            return await self._inner(ctx, params)
        finally:
            for uri in held:
                await self._release(uri)

    def _key(self) -> str:
        return f"{self._endpoint.name}/listen/"

    async def _hold(self, uri: str) -> bool:
        if self._holders.get(uri):
            self._holders[uri] += 1
            return True
        endpoint = self._endpoint
        served = (await endpoint.gateway.current(endpoint)).serving(uri)
        if served is None:
            return False  # the bundle's own resources, or none: nothing a member would tell of

        async def publish(updated: str) -> None:
            await endpoint.bus.publish(ResourceUpdated(updated))

        try:
            await endpoint.gateway.subscribe(self._key(), served, uri, publish)
        except MCPError as exc:
            # The stream still serves its other events; this URI just never fires.
            log.warning("cannot subscribe to a resource of the member %s: %s", served.member, exc.message)
            return False
        self._holders[uri] = 1
        return True

    async def _release(self, uri: str) -> None:
        self._holders[uri] -= 1
        if self._holders[uri] == 0:
            del self._holders[uri]
            await self._endpoint.gateway.unsubscribe(self._key(), uri)


@dataclass
class GatewayEndpoint:
    """The MCP server of one endpoint, with its sessions and listen streams."""

    name: str
    gateway: Upstream
    view: EndpointView
    server: Server[Any] = field(init=False)
    manager: ChoosingSessionManager = field(init=False)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    sessions: dict[str, ServerSession] = field(default_factory=dict)
    owners: SessionOwners = field(default_factory=SessionOwners)
    announced: dict[str, str] = field(default_factory=dict)
    # Each handshake-era session's ``logging/setLevel``, newest last (bounded like ``sessions``).
    levels: OrderedDict[str, types.LoggingLevel] = field(default_factory=OrderedDict)
    manager_task: ManagerTask | None = None

    def __post_init__(self) -> None:
        self.server = AnnouncingServer(
            f"bundle-gateway/{self.name}",
            version="1",
            instructions=self.view.description or None,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_list_prompts=self._list_prompts,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_completion=self._complete,
            on_set_logging_level=self._set_level,
            on_subscriptions_listen=_RelayedListen(self),
        )
        # Registered by method: their answers may be the member's raw results (dicts), passed through.
        add = self.server.add_request_handler
        add("tools/call", types.CallToolRequestParams, self._call_tool)
        add("prompts/get", types.GetPromptRequestParams, self._get_prompt)
        add("resources/read", types.ReadResourceRequestParams, self._read_resource)
        self.server.middleware.insert(0, self._remember_session)
        if tracing.enabled():
            self.server.middleware.insert(0, self._traced)
        # Answers stream (SSE) so that a member's progress, logs and requests reach the caller
        # mid-call, unless the door chose one JSON body for a request that cannot need a stream
        # (gateway_answers.py); plain tool calls on the 2026-07-28 wire take the door's JSON path
        # (gateway_direct.py).
        self.manager = ChoosingSessionManager(
            app=self.server,
            json_response=False,
            session_idle_timeout=3600,
            max_request_body_size=MAX_REQUEST_BODY,
        )
        self.announced = {what: self.view.fingerprint(what) for what in _LISTS}

    async def start(self) -> None:
        """Run the session manager in a task of its own until ``close``."""
        self.manager_task = ManagerTask(self.manager, f"gateway-endpoint-{self.name}")
        await self.manager_task.start()

    async def close(self) -> None:
        """Stop serving; open sessions end."""
        if self.manager_task is not None:
            await self.manager_task.close()

    async def _traced(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # A span for each request but tools/call, which the gateway's call_tool spans on either path.
        if ctx.method == "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        name = ctx.params.get("name") if ctx.params else None
        target = name if isinstance(name, str) else None
        with serving(
            self.view,
            ctx.method,
            shown(target) if target is not None else None,
            known=target in self.view.own_prompts or target in self.view.member_prompts,
            parent=parent_of(ctx.meta, ctx.request),
            request_id=ctx.request_id,
            session_id=self._session_id(ctx),
        ):
            return await call_next(ctx)

    async def _remember_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        # Handshake-era sessions get list_changed on their session (the 2026-07-28 wire has none:
        # its clients listen on the bus). The session object is made per message, so keep one.
        keep_legacy_session(
            self.sessions,
            self._session_key(ctx),
            ctx.method,
            ctx.protocol_version,
            ctx.session,
            MAX_LEGACY_SESSIONS,
        )
        return await call_next(ctx)

    async def announce(self, view: EndpointView) -> None:
        """Tell connected clients which lists changed since the last announcement."""
        self.view = view
        self.server.instructions = view.description or None
        for what in _LISTS:
            fingerprint = view.fingerprint(what)
            if self.announced.get(what) == fingerprint:
                continue
            self.announced[what] = fingerprint
            await self.bus.publish(_EVENTS[what]())
            for session in list(self.sessions.values()):
                try:
                    if what == "tools":
                        await session.send_tool_list_changed()
                    elif what == "prompts":
                        await session.send_prompt_list_changed()
                    else:
                        await session.send_resource_list_changed()
                except Exception:
                    self._forget(session)

    def _forget(self, session: ServerSession) -> None:
        for key, known in list(self.sessions.items()):
            if known is session:
                del self.sessions[key]

    def plainly(self, session_id: str | None, message: Any) -> bool:
        """Whether a handshake-era request of this session can be answered with one JSON body."""
        session = self.sessions.get(session_id) if session_id is not None else None
        return session is not None and can_answer_plainly(session.client_capabilities, message)

    def forget(self, session_id: str) -> None:
        """The session's owner ended it (an HTTP DELETE the SDK accepted)."""
        self.sessions.pop(session_id, None)
        self.levels.pop(session_id, None)
        self.owners.forget(session_id)

    # --- the relay -----------------------------------------------------------------------------

    @staticmethod
    def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
        headers = getattr(ctx.request, "headers", None)
        return headers.get(MCP_SESSION_ID_HEADER) if headers is not None else None

    @classmethod
    def _session_key(cls, ctx: ServerRequestContext[Any, Any]) -> str:
        """The request's session id, or a stand-in for a request that names none."""
        return cls._session_id(ctx) or f"anonymous-{id(ctx.session)}"

    def _relayed(self, ctx: ServerRequestContext[Any, Any], params: Any = None) -> Relayed:
        """How a member's messages during this request reach its client (member_relay.py)."""
        session_id = self._session_id(ctx)
        level = self.levels.get(session_id) if session_id is not None else None

        # False when the door answers with one JSON body: nothing may go on the request's stream.
        streamed = ctx.session.can_send_request or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

        def route(member: str) -> Route:
            return Route(ctx.session, ctx.request_id, member, level, streamed)

        inputs = getattr(params, "input_responses", None)
        return Relayed(
            route,
            {k: v.model_dump(by_alias=True, mode="json", exclude_none=True) for k, v in inputs.items()}
            if inputs
            else None,
            getattr(params, "request_state", None),
            _passed_meta(ctx.meta),
        )

    async def _member_answer(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: Any,
        served: Served,
        modern: Callable[[ClientSession, dict[str, Any]], Awaitable[types.Result]],
        handshake: Callable[[Client], Awaitable[types.Result]],
    ) -> dict[str, Any]:
        """A member's answer, as written, on a member client of the call's own (member_relay.py).

        A 2026-07-28 caller's answers and echoed state go to the member as sent (``modern`` gets
        them as keyword arguments), and an input-required result comes back to the caller.
        """
        relayed = self._relayed(ctx, params)
        route = relayed.route(served.member)

        async def answer(client: Client) -> dict[str, Any]:
            if route.modern:
                mrtr = {
                    "input_responses": relayed.input_responses,
                    "request_state": relayed.request_state,
                    "allow_input_required": True,
                }
                return as_written(await modern(client.session, mrtr))
            return as_written(await handshake(client))

        result: dict[str, Any] = await self.gateway.on_member(served.link, served.member, answer, route)
        return result

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        session_id = self._session_key(ctx)
        self.levels[session_id] = params.level
        self.levels.move_to_end(session_id)
        while len(self.levels) > MAX_LEGACY_SESSIONS:
            self.levels.popitem(last=False)
        return types.EmptyResult()

    # --- tools ---------------------------------------------------------------------------------

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.view.tools.get(name)
        return tool.listing["inputSchema"] if tool else None

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        view = await self.gateway.current(self)
        principal = principal_of(ctx.request)
        return types.ListToolsResult(
            tools=[
                types.Tool.model_validate(t.listing)
                for name, t in view.tools.items()
                if tool_allowed(view.oauth, principal, name)
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | dict[str, Any]:
        view = await self.gateway.current(self)
        return await self.gateway.call_tool(
            view,
            principal_of(ctx.request),
            params.name,
            params.arguments or {},
            self._relayed(ctx, params),
            parent=parent_of(ctx.meta, ctx.request),
            request_id=ctx.request_id,
            session_id=self._session_id(ctx),
        )

    # --- prompts -------------------------------------------------------------------------------

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        view = await self.gateway.current(self)
        prompts = [
            types.Prompt(
                name=p["name"],
                title=p.get("title"),
                description=p.get("description"),
                arguments=[
                    types.PromptArgument(name=a["name"], required=bool(a.get("required", False)))
                    for a in p.get("arguments", [])
                ],
            )
            for p in view.own_prompts.values()
        ]
        prompts += [types.Prompt.model_validate(p.listing) for p in view.member_prompts.values()]
        return types.ListPromptsResult(prompts=prompts)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | dict[str, Any]:
        view = await self.gateway.current(self)
        arguments = {k: str(v) for k, v in (params.arguments or {}).items()}
        if _SEPARATOR not in params.name:
            return self._own_prompt(view, params.name, arguments)
        prompt = view.member_prompts.get(params.name)
        if prompt is None:
            raise _not_found(f"this bundle has no prompt '{shown(params.name)}'")
        return await self._member_answer(
            ctx,
            params,
            prompt,
            lambda session, mrtr: session.get_prompt(prompt.name, arguments, **mrtr),
            lambda client: client.get_prompt(prompt.name, arguments),
        )

    @staticmethod
    def _own_prompt(view: EndpointView, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        prompt = view.own_prompts.get(name)
        if prompt is None:
            raise _not_found(f"this bundle has no prompt '{shown(name)}'")
        for argument in prompt.get("arguments", []):
            if argument.get("required") and argument["name"] not in arguments:
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"the prompt '{name}' needs the argument '{argument['name']}'",
                )
        size = sum(_rendered_size(m["text"], arguments) for m in prompt.get("messages", []) if m.get("text"))
        if size > MAX_RENDERED_PROMPT:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"the arguments would make the prompt '{name}' longer than "
                f"{MAX_RENDERED_PROMPT} characters",
            )
        messages: list[types.PromptMessage] = []
        for message in prompt.get("messages", []):
            role = message.get("role", "user")
            if message.get("text") is not None:
                content: Any = types.TextContent(type="text", text=render(message["text"], arguments))
            else:
                resource = view.own_resources.get(message["resource"], {})
                content = types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri=OWN_RESOURCE_PREFIX + message["resource"],
                        mime_type=resource.get("mime_type") or "text/markdown",
                        text=resource.get("content", ""),
                    ),
                )
            messages.append(types.PromptMessage(role=role, content=content))
        return types.GetPromptResult(description=prompt.get("description") or None, messages=messages)

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        view = await self.gateway.current(self)
        ref, argument = params.ref, params.argument
        if not isinstance(ref, types.PromptReference):
            template = next((t for t in view.member_templates if t.uri_template == ref.uri), None)
            if template is None:
                # As a server of its own answers a reference to what it does not have (DESIGN.md §9.6).
                raise _not_found(f"this bundle has no resource template '{shown(ref.uri)}'")
            upstream_ref = types.ResourceTemplateReference(type="ref/resource", uri=template.uri_template)
            answer: types.CompleteResult = await self.gateway.on_member(
                template.link,
                template.member,
                lambda client: client.complete(
                    upstream_ref,
                    {"name": argument.name, "value": argument.value},
                    context_arguments=params.context.arguments if params.context else None,
                ),
            )
            return answer
        own = view.own_prompts.get(ref.name)
        if own is not None:
            typed = argument.value.lower()
            values = [
                value
                for declared in own.get("arguments", [])
                if declared["name"] == argument.name
                for value in declared.get("values") or []
                if value.lower().startswith(typed)
            ]
            return types.CompleteResult(
                completion=types.Completion(values=values[:100], total=len(values), has_more=False)
            )
        member_prompt = view.member_prompts.get(ref.name)
        if member_prompt is None:
            raise _not_found(f"this bundle has no prompt '{shown(ref.name)}'")
        upstream = types.PromptReference(type="ref/prompt", name=member_prompt.name)
        result: types.CompleteResult = await self.gateway.on_member(
            member_prompt.link,
            member_prompt.member,
            lambda client: client.complete(upstream, {"name": argument.name, "value": argument.value}),
        )
        return result

    # --- resources -----------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        view = await self.gateway.current(self)
        resources = [
            types.Resource(
                uri=OWN_RESOURCE_PREFIX + name,
                name=name,
                title=r.get("title"),
                mime_type=r.get("mime_type") or "text/markdown",
                size=r.get("size"),
            )
            for name, r in view.own_resources.items()
        ]
        resources += [types.Resource.model_validate(r.listing) for r in view.member_resources.values()]
        return types.ListResourcesResult(resources=resources)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | dict[str, Any]:
        view = await self.gateway.current(self)
        uri = str(params.uri)
        if uri.lower().startswith("bundle:"):
            name = uri[len(OWN_RESOURCE_PREFIX) :] if uri.startswith(OWN_RESOURCE_PREFIX) else None
            own = view.own_resources.get(name) if name is not None else None
            if own is None or name is None:
                raise _not_found(f"this bundle has no resource '{shown(uri)}'")
            return types.ReadResourceResult(
                contents=[
                    types.TextResourceContents(
                        uri=uri,
                        mime_type=own.get("mime_type") or "text/markdown",
                        text=own.get("content", ""),
                    )
                ]
            )
        served = view.serving(uri)
        if served is None:
            raise _not_found(f"this bundle serves no resource '{shown(uri)}'")
        return await self._member_answer(
            ctx,
            params,
            served,
            lambda session, mrtr: session.read_resource(uri, **mrtr),
            lambda client: client.read_resource(uri),
        )

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        view = await self.gateway.current(self)
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate.model_validate(t.listing) for t in view.member_templates
            ]
        )

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        view = await self.gateway.current(self)
        uri = str(params.uri)
        served = view.serving(uri)
        if served is None:
            raise _not_found(f"this bundle serves no resource '{shown(uri)}'")
        await self.gateway.subscribe(self.subscriber(ctx), served, uri, ctx.session.send_resource_updated)
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self.gateway.unsubscribe(self.subscriber(ctx), str(params.uri))
        return types.EmptyResult()

    def subscriber(self, ctx: ServerRequestContext[Any, Any] | None, session_id: str | None = None) -> str:
        """The key of a session's subscriptions: every key of one session starts with it."""
        if ctx is not None:
            session_id = self._session_key(ctx)
        return f"{self.name}/{session_id}/"


def _rendered_size(text: str, arguments: dict[str, str]) -> int:
    """No less than the length of ``text`` rendered with ``arguments``, counted without rendering it."""
    return len(text) + sum(len(arguments.get(name, "")) for name in placeholder_names(text))
