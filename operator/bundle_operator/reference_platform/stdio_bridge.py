"""Each instance the platform runs, served to the gateway as a streamable-HTTP MCP server on loopback.

The gateway reaches its members over HTTP (discovery, probes, relayed and direct calls); rather than
teach each of those a second transport, the platform serves every stdio instance at an internal path
of its own listener, behind a per-process bearer token (stdio_loopback.py). Its handlers pass each
request to the instance's one client session (stdio_runner.py), progress and log messages back to
the request they belong to. Sampling, elicitation and roots are not relayed: the session to the
process declares none of them, so a server that asks gets the error it would get from such a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp_types as types
from aiohttp import web
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from bundle_operator.reference_platform.asgi_bridge import serve_asgi
from bundle_operator.reference_platform.member_forward import as_written
from bundle_operator.reference_platform.member_probe import error_text
from bundle_operator.reference_platform.problems import ApiError
from bundle_operator.reference_platform.session_task import AnnouncingServer, ManagerTask, keep_legacy_session
from bundle_operator.reference_platform.stdio_loopback import LOOPBACK, STATE, UNAVAILABLE
from bundle_operator.reference_platform.stdio_runner import InstanceUnavailable, StdioRunner

log = logging.getLogger("bundle_operator.platform.stdio")

# A server that pages forever still ends: at most this many pages of one list are read.
MAX_PAGES = 50
# Handshake-era sessions told of list changes; the gateway holds a few per member, so the oldest go.
MAX_LEGACY_SESSIONS = 64
_EVENTS: dict[str, Callable[[], ServerEvent]] = {
    "tools": ToolsListChanged,
    "prompts": PromptsListChanged,
    "resources": ResourcesListChanged,
}
_T = TypeVar("_T")


def unavailable(state: str, message: str) -> MCPError:
    """The bridge's error for an instance that cannot serve, marked so the gateway names its member."""
    return MCPError(code=types.INTERNAL_ERROR, message=message, data={UNAVAILABLE: message, STATE: state})


def _every(capability: str, method: str, attr: str) -> Callable[[Client], Awaitable[list[Any]]]:
    """Every item of one of the process's lists, page after page; none when its server does not
    declare the ``capability`` the list belongs to."""

    async def fetch(client: Client) -> list[Any]:
        if getattr(client.server_capabilities, capability) is None:
            return []
        listing = getattr(client, method)
        return await _pages(lambda cursor: listing(cursor=cursor), attr)

    return fetch


async def _pages(fetch: Callable[[str | None], Awaitable[Any]], attr: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


@dataclass(eq=False)
class InstanceBridge:
    """The MCP server standing for one instance, over its process's client session."""

    workspace: str
    instance_id: str
    runner: StdioRunner
    server: Server[Any] = field(init=False)
    manager: StreamableHTTPSessionManager = field(init=False)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    # Requests being served now: a log message of the process goes to each (stdio has no request id).
    serving: dict[int, ServerRequestContext[Any, Any]] = field(default_factory=dict)
    sessions: dict[int, ServerSession] = field(default_factory=dict)
    manager_task: ManagerTask | None = None

    def __post_init__(self) -> None:
        self.server = AnnouncingServer(
            f"stdio-instance/{self.instance_id}",
            version="1",
            on_list_tools=self._list_tools,
            on_list_prompts=self._list_prompts,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_completion=self._complete,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        # By method: the answers are the process's results as written (dicts), passed through.
        add = self.server.add_request_handler
        add("tools/call", types.CallToolRequestParams, self._call_tool)
        add("prompts/get", types.GetPromptRequestParams, self._get_prompt)
        add("resources/read", types.ReadResourceRequestParams, self._read_resource)
        self.server.middleware.insert(0, self._remember_session)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, json_response=False, session_idle_timeout=3600
        )

    async def start(self) -> None:
        """Run the session manager in a task of its own until ``close``."""
        self.manager_task = ManagerTask(self.manager, f"stdio-bridge-{self.instance_id}")
        await self.manager_task.start()

    async def close(self) -> None:
        """Stop serving; open sessions end."""
        if self.manager_task is not None:
            await self.manager_task.close()

    async def _remember_session(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        # Handshake-era sessions hear of list changes on their session; 2026-07-28 ones on the bus.
        keep_legacy_session(
            self.sessions, id(ctx.session), ctx.method, ctx.protocol_version, ctx.session, MAX_LEGACY_SESSIONS
        )
        return await call_next(ctx)

    async def told(self, message: Any) -> None:
        """A notification from the process: list changes announced, log messages to current requests."""
        if isinstance(message, types.LoggingMessageNotificationParams):
            for ctx in list(self.serving.values()):
                with contextlib.suppress(Exception):
                    await ctx.session.send_log_message(
                        message.level, message.data, logger=message.logger, related_request_id=ctx.request_id
                    )
            return
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        what = method.split("/")[1] if isinstance(method, str) and method.endswith("/list_changed") else None
        if what not in _EVENTS:
            return
        await self.bus.publish(_EVENTS[what]())
        for key, session in list(self.sessions.items()):
            try:
                if what == "tools":
                    await session.send_tool_list_changed()
                elif what == "prompts":
                    await session.send_prompt_list_changed()
                else:
                    await session.send_resource_list_changed()
            except Exception:
                self.sessions.pop(key, None)

    # --- forwarding --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _marked(self) -> AsyncIterator[None]:
        """Failures reaching the process as the gateway reads them: one that cannot serve marked."""
        try:
            yield
        except InstanceUnavailable as exc:
            raise unavailable(exc.state, str(exc)) from None
        except Exception as exc:
            raise self._broken(exc) from None

    @contextlib.asynccontextmanager
    async def _client(self, ctx: ServerRequestContext[Any, Any]) -> AsyncIterator[Client]:
        """The process's session for one request (its log messages go to the request meanwhile)."""
        self.serving[id(ctx)] = ctx
        try:
            async with self._marked(), self.runner.using(self.workspace, self.instance_id) as client:
                yield client
        finally:
            self.serving.pop(id(ctx), None)

    async def _listed(self, what: str, fetch: Callable[[Client], Awaitable[list[Any]]]) -> list[Any]:
        async with self._marked():
            listed: list[Any] = await self.runner.listing(self.workspace, self.instance_id, what, fetch)
        return listed

    def _broken(self, exc: Exception) -> Exception:
        """What a failure under a request says: the server's own errors as they are, a lost process marked."""
        if isinstance(exc, MCPError) and exc.code != types.CONNECTION_CLOSED:
            return exc
        if isinstance(exc, MCPError):
            return unavailable("crashed", "crashed: the server's process exited while serving the request")
        reason = self.runner.scrub(self.instance_id, error_text(exc))
        return unavailable("crashed", f"crashed: the server's process stopped answering ({reason})")

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=await self._listed("tools", _every("tools", "list_tools", "tools"))
        )

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        fetch = _every("prompts", "list_prompts", "prompts")
        return types.ListPromptsResult(prompts=await self._listed("prompts", fetch))

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        fetch = _every("resources", "list_resources", "resources")
        return types.ListResourcesResult(resources=await self._listed("resources", fetch))

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        every = _every("resources", "list_resource_templates", "resource_templates")

        async def fetch(client: Client) -> list[Any]:
            try:
                return await every(client)
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND:
                    raise
                return []  # resources without templates

        return types.ListResourceTemplatesResult(resource_templates=await self._listed("templates", fetch))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        meta = ctx.meta if isinstance(ctx.meta, dict) else {}
        token = meta.get("progressToken", meta.get("progress_token"))
        progress = ctx.session.report_progress if token is not None else None
        async with self._client(ctx) as client:
            result = await client.call_tool(params.name, params.arguments or {}, progress_callback=progress)
        return as_written(result)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> dict[str, Any]:
        arguments = {k: str(v) for k, v in (params.arguments or {}).items()}
        async with self._client(ctx) as client:
            return as_written(await client.get_prompt(params.name, arguments))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> dict[str, Any]:
        async with self._client(ctx) as client:
            return as_written(await client.read_resource(str(params.uri)))

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        context = params.context.arguments if params.context else None
        async with self._client(ctx) as client:
            return await client.complete(
                params.ref,
                {"name": params.argument.name, "value": params.argument.value},
                context_arguments=context,
            )


class Bridges:
    """The bridge of every instance asked for, served at the loopback route (stdio_loopback.py)."""

    def __init__(self, runner: StdioRunner) -> None:
        self.runner = runner
        self._bridges: dict[str, InstanceBridge] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        runner.notify = self._told

    async def _told(self, instance_id: str, message: Any) -> None:
        bridge = self._bridges.get(instance_id)
        if bridge is not None:
            await bridge.told(message)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Serve one request of the gateway to an instance's bridge."""
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), LOOPBACK.token.encode()
        ):
            raise ApiError(401, "unauthorized", "this route serves the platform's own gateway only")
        if self._closed:
            raise ApiError(503, "unavailable", "the platform is shutting down")
        workspace, instance_id = request.match_info["workspace"], request.match_info["instance"]
        bridge = await self._bridge(workspace, instance_id)
        return await serve_asgi(bridge.manager.handle_request, request)

    async def _bridge(self, workspace: str, instance_id: str) -> InstanceBridge:
        bridge = self._bridges.get(instance_id)
        if bridge is not None and bridge.workspace == workspace:
            return bridge
        async with self._lock:
            bridge = self._bridges.get(instance_id)
            if bridge is None or bridge.workspace != workspace:
                if bridge is not None:
                    await bridge.close()
                bridge = InstanceBridge(workspace, instance_id, self.runner)
                await bridge.start()
                self._bridges[instance_id] = bridge
            return bridge

    async def forget(self, instance_id: str) -> None:
        """The instance is gone: its bridge's sessions end."""
        bridge = self._bridges.pop(instance_id, None)
        if bridge is not None:
            await bridge.close()

    async def close(self) -> None:
        """Close every bridge; a request after this is refused."""
        self._closed = True
        bridges, self._bridges = list(self._bridges.values()), {}
        await asyncio.gather(*(bridge.close() for bridge in bridges))
