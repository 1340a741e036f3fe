"""Two real MCP servers ("members" of a gateway), served over streamable HTTP on loopback.

Built on the official MCP Python SDK (`mcp`, v2 API) with its low-level `Server`, so each handler is
a plain function and the benchmark's `echo` costs nothing beyond the SDK's own dispatch.

- `weather`: tools `forecast` (read-only), `set_alert` (a destructive write) and `echo`; advertises
  tools `listChanged` and can grow a tool at runtime (`add_tool`), telling connected clients of both
  protocol eras the SDK speaks.
- `notes`: prompt `summarize`, resources `notes://today` and `bundle://resources/secret-note` (the
  one a gateway must hide), tool `add_note`.

Ways to run them:

- in the current asyncio loop: ``async with running_members() as members: ...``
- in a background thread (sync tests): ``with members_thread() as members: ...``
- as a process: ``python tests/mcp_members.py --ready-file PATH`` writes (and prints)
  ``{"weather": URL, "notes": URL}`` once both accept connections and stops cleanly on SIGTERM;
  ``with members_subprocess() as members: ...`` does that and gives the same handle.

Every handle has ``url(member)`` (``http://127.0.0.1:<port>/mcp``), ``add_tool`` / ``add_tool_sync``,
``remove_tool`` / ``remove_tool_sync`` and ``last_headers``. Next to ``/mcp`` each server answers
``POST /admin/tools`` (``{"name": ..., "description": ...}``), ``DELETE /admin/tools/{name}`` and
``GET /admin/last-headers``, which is how the subprocess handle reaches them.

How change notifications reach clients:

- 2026-07-28 ("modern") era: no session and no standing stream; a client opens a
  ``subscriptions/listen`` request whose SSE response is the stream. The server's `ListenHandler`
  serves those streams from a `SubscriptionBus`; publishing `ToolsListChanged()` on the bus fans it
  out (client side: ``async with client.listen(tools_list_changed=True) as sub: async for event in sub``).
- handshake ("legacy") era: ``notifications/tools/list_changed`` goes on the session's standalone
  channel (the client's GET SSE stream, which the SDK client opens right after
  ``notifications/initialized``); the client hands it to ``message_handler``. A middleware here
  remembers each legacy session's `ServerSession` when its ``notifications/initialized`` arrives, and
  `add_tool` calls ``send_tool_list_changed()`` on each. A notification sent before the client's GET
  stream is up is dropped by the SDK (no replay without an event store): wait for
  ``legacy_streams(member) >= 1`` first when it matters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MEMBER_NAMES: tuple[str, ...] = ("weather", "notes")
MCP_PATH = "/mcp"
ADMIN_PATH = "/admin"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
SECRET_RESOURCE_URI = "bundle://resources/secret-note"
TODAY_RESOURCE_URI = "notes://today"
# Sessions remembered for legacy list_changed delivery; the oldest are forgotten beyond this.
_MAX_LEGACY_SESSIONS = 1024

_T = TypeVar("_T")
ToolFn = Callable[[Mapping[str, Any]], str]


def _schema(*required: str, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object schema of string properties."""
    properties = {name: {"type": "string"} for name in (*required, *optional)}
    return {"type": "object", "properties": properties, "required": list(required)}


@dataclass(frozen=True)
class _ToolDef:
    tool: Tool
    run: ToolFn
    required: tuple[str, ...]


class _ListChangedServer(Server[Any]):
    """A low-level `Server` whose handshake-era `initialize` result advertises tools `listChanged`.

    The streamable-HTTP session manager calls `create_initialization_options()` with no arguments,
    which advertises no list_changed flags; at 2026-07-28 they derive from `subscriptions/listen`
    being served instead, so only the handshake era needs this.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class _Member:
    """One MCP server: its tools (changeable at runtime), prompts, resources and change fan-out."""

    def __init__(
        self,
        name: str,
        tools: list[_ToolDef],
        *,
        prompts: Mapping[str, tuple[Prompt, Callable[[Mapping[str, str]], GetPromptResult]]] | None = None,
        resources: Mapping[str, tuple[Resource, str]] | None = None,
    ) -> None:
        self.name = name
        self._tools: dict[str, _ToolDef] = {d.tool.name: d for d in tools}
        self._listing = ListToolsResult(tools=[d.tool for d in self._tools.values()])
        self._prompts = dict(prompts or {})
        self._resources = dict(resources or {})
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._legacy_sessions: dict[str, ServerSession] = {}
        self.last_headers: dict[str, str] = {}
        self.legacy_streams = 0
        self.tool_calls: Counter[str] = Counter()
        self.last_call: dict[str, Any] = {}  # the params of the last tools/call, as sent
        # Results answered as written, by tool: the SDK's model would add defaults (isError) to them.
        self.raw_results: dict[str, dict[str, Any]] = {}
        # Set: a request on the 2026-07-28 wire is refused, as by a server of an older SDK.
        self.handshake_only = False
        self.closing: anyio.Event | None = None  # set on shutdown: ends the legacy GET streams
        self.server = _ListChangedServer(
            name,
            version="1.0.0",
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.listen,
            on_list_prompts=self._list_prompts if self._prompts else None,
            on_get_prompt=self._get_prompt if self._prompts else None,
            on_list_resources=self._list_resources if self._resources else None,
            on_read_resource=self._read_resource if self._resources else None,
        )
        # Replaces the default OpenTelemetry middleware (a no-op without an exporter): cheaper calls.
        self.server.middleware[:] = [self._remember_legacy_session]

    # ------------------------------------------------------------------------------ handlers

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        found = self._tools.get(name)
        return None if found is None else found.tool.input_schema

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return self._listing

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | dict[str, Any]:
        found = self._tools.get(params.name)
        self.tool_calls[params.name] += 1
        self.last_call = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        if params.name in self.raw_results:
            return dict(self.raw_results[params.name])
        if found is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        arguments = params.arguments or {}
        for key in found.required:
            if not isinstance(arguments.get(key), str):
                text = f"argument {key!r} (a string) is required"
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return CallToolResult(content=[TextContent(type="text", text=found.run(arguments))])

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return ListPromptsResult(prompts=[prompt for prompt, _ in self._prompts.values()])

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        found = self._prompts.get(params.name)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
        prompt, render = found
        arguments = params.arguments or {}
        for argument in prompt.arguments or []:
            if argument.required and not arguments.get(argument.name):
                raise MCPError(INVALID_PARAMS, f"Missing required argument: {argument.name}")
        return render(arguments)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[resource for resource, _ in self._resources.values()])

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        found = self._resources.get(params.uri)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"Unknown resource: {params.uri}", {"uri": params.uri})
        resource, text = found
        return ReadResourceResult(
            contents=[TextResourceContents(uri=resource.uri, mime_type=resource.mime_type, text=text)]
        )

    async def _remember_legacy_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "notifications/initialized" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            request = ctx.request
            key = request.headers.get("mcp-session-id") if isinstance(request, Request) else None
            self._legacy_sessions[key or f"anonymous-{id(ctx.session)}"] = ctx.session
            while len(self._legacy_sessions) > _MAX_LEGACY_SESSIONS:
                del self._legacy_sessions[next(iter(self._legacy_sessions))]
        return await call_next(ctx)

    def forget_session(self, session_id: str) -> None:
        self._legacy_sessions.pop(session_id, None)

    # ------------------------------------------------------------------------------ changes

    async def add_tool(self, name: str, description: str = "", *, quiet: bool = False) -> None:
        """Add a tool (input ``{text?: string}``, answers ``<name> called``) and tell connected clients.

        ``quiet`` tells nobody, as a server that changed behind its clients' backs.
        """
        if name in self._tools:
            raise ValueError(f"{self.name} already has a tool named {name!r}")
        tool = Tool(
            name=name,
            description=description or f"{name} (added at runtime)",
            input_schema=_schema(optional=("text",)),
        )
        self._tools[name] = _ToolDef(tool, lambda _arguments: f"{name} called", ())
        if quiet:
            self._listing = ListToolsResult(tools=[d.tool for d in self._tools.values()])
            return
        await self._tools_changed()

    async def remove_tool(self, name: str) -> None:
        """Remove a tool and tell connected clients."""
        if self._tools.pop(name, None) is None:
            raise KeyError(f"{self.name} has no tool named {name!r}")
        await self._tools_changed()

    async def _tools_changed(self) -> None:
        self._listing = ListToolsResult(tools=[d.tool for d in self._tools.values()])
        # 2026-07-28: onto every subscriptions/listen stream that asked for tools changes.
        await self.bus.publish(ToolsListChanged())
        # Handshake era: on each session's standalone stream (dropped by the SDK if none is open).
        for session in list(self._legacy_sessions.values()):
            await session.send_tool_list_changed()

    def close_streams(self) -> None:
        """End every open listen and GET stream (so shutting down does not wait on them)."""
        self.listen.close()
        if self.closing is None:
            self.closing = anyio.Event()
        self.closing.set()

    # ------------------------------------------------------------------------------ HTTP

    def asgi_app(self, *, host: str, require_header: tuple[str, str] | None = None) -> ASGIApp:
        starlette_app = self.server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            transport_security=_transport_security(host),
            host=host,
            custom_starlette_routes=[
                Route(f"{ADMIN_PATH}/tools", self._admin_add_tool, methods=["POST"]),
                Route(f"{ADMIN_PATH}/tools/{{name}}", self._admin_remove_tool, methods=["DELETE"]),
                Route(f"{ADMIN_PATH}/last-headers", self._admin_last_headers, methods=["GET"]),
            ],
        )
        return _Gate(starlette_app, self, require_header)

    async def _admin_add_tool(self, request: Request) -> Response:
        body = await request.json()
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return JSONResponse(
                {"error": "body must be {name: string, description?: string}"}, status_code=400
            )
        description = body.get("description") or ""
        try:
            await self.add_tool(name, str(description))
        except ValueError as err:
            return JSONResponse({"error": str(err)}, status_code=409)
        return JSONResponse({"added": name})

    async def _admin_remove_tool(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            await self.remove_tool(name)
        except KeyError:
            return JSONResponse({"error": f"no tool named {name!r}"}, status_code=404)
        return JSONResponse({"removed": name})

    async def _admin_last_headers(self, request: Request) -> Response:
        return JSONResponse(self.last_headers)


class _Gate:
    """ASGI wrapper of the MCP endpoint: records headers, enforces a required header, tracks streams."""

    def __init__(self, app: ASGIApp, member: _Member, require_header: tuple[str, str] | None) -> None:
        self._app = app
        self._member = member
        # ASGI servers hand header names over in lower case.
        self._required = None if require_header is None else (require_header[0].lower(), require_header[1])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await self._app(scope, receive, send)
            return
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}
        self._member.last_headers = headers
        if self._required is not None and headers.get(self._required[0]) != self._required[1]:
            await JSONResponse(
                {"error": f"missing or wrong {self._required[0]} header"},
                status_code=401,
                headers={"WWW-Authenticate": "Header"},
            )(scope, receive, send)
            return
        if self._member.handshake_only and headers.get("mcp-protocol-version") in MODERN_PROTOCOL_VERSIONS:
            await JSONResponse({"error": "unsupported protocol version"}, status_code=400)(
                scope, receive, send
            )
            return
        method = scope["method"]
        if method == "GET":
            await self._serve_get(scope, receive, send)
            return
        await self._app(scope, receive, send)
        session_id = headers.get("mcp-session-id")
        if method == "DELETE" and session_id:
            self._member.forget_session(session_id)

    async def _serve_get(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a standalone (legacy) SSE stream: counted while open, ended as the server shuts down."""
        member = self._member
        if member.closing is None:
            member.closing = anyio.Event()
        closing = member.closing
        opened = finished = False

        async def counting_send(message: Message) -> None:
            nonlocal opened, finished
            if message["type"] == "http.response.start" and message["status"] == 200 and not opened:
                opened = True
                member.legacy_streams += 1
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        async def receive_until_closing() -> Message:
            # The SSE response ends when it receives a disconnect; shutting down is one too.
            received: Message = {"type": "http.disconnect"}
            async with anyio.create_task_group() as tg:

                async def from_client() -> None:
                    nonlocal received
                    received = await receive()
                    tg.cancel_scope.cancel()

                async def from_shutdown() -> None:
                    await closing.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(from_client)
                tg.start_soon(from_shutdown)
            return received

        try:
            await self._app(scope, receive_until_closing, counting_send)
            if opened and not finished and closing.is_set():
                # Ended by the shutdown, not the client: finish the response so it ends cleanly.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if opened:
                member.legacy_streams -= 1


def _transport_security(host: str) -> TransportSecuritySettings:
    """Accept 127.0.0.1, localhost and [::1] (any port) when bound to loopback; anything otherwise."""
    if host not in LOOPBACK_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ("127.0.0.1", "localhost", "[::1]")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[*(f"http://{n}" for n in names), *(f"http://{n}:*" for n in names)],
    )


# ---------------------------------------------------------------------------------------- members


def _echo(arguments: Mapping[str, Any]) -> str:
    text: str = arguments["text"]
    return text


def weather_member() -> _Member:
    """The `weather` server: forecast (read-only), set_alert (write), echo (benchmarks)."""
    return _Member(
        "weather",
        [
            _ToolDef(
                Tool(
                    name="forecast",
                    title="Forecast",
                    description="Today's forecast for a city.",
                    input_schema=_schema("city"),
                    annotations=ToolAnnotations(title="Forecast", read_only_hint=True),
                ),
                lambda a: f"forecast for {a['city']}: sunny",
                ("city",),
            ),
            _ToolDef(
                Tool(
                    name="set_alert",
                    title="Set alert",
                    description="Set a weather alert for a city (a write).",
                    input_schema=_schema("city", "level"),
                    annotations=ToolAnnotations(
                        title="Set alert", read_only_hint=False, destructive_hint=True
                    ),
                ),
                lambda a: f"alert set for {a['city']}",
                ("city", "level"),
            ),
            _ToolDef(
                Tool(
                    name="echo",
                    description="Return the text unchanged.",
                    input_schema=_schema("text"),
                    annotations=ToolAnnotations(read_only_hint=True),
                ),
                _echo,
                ("text",),
            ),
        ],
    )


def _summarize(arguments: Mapping[str, str]) -> GetPromptResult:
    text = f"Summarize my notes about {arguments['topic']}."
    if style := arguments.get("style"):
        text += f" Write it in a {style} style."
    return GetPromptResult(
        description="Summarize the notes on a topic",
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


def notes_member() -> _Member:
    """The `notes` server: prompt summarize, resources notes://today and a bundle: one, tool add_note."""
    summarize = Prompt(
        name="summarize",
        title="Summarize notes",
        description="Summarize the notes on a topic",
        arguments=[
            PromptArgument(name="topic", description="What to summarize", required=True),
            PromptArgument(name="style", description="How to write it", required=False),
        ],
    )
    today = Resource(name="today", title="Today's notes", uri=TODAY_RESOURCE_URI, mime_type="text/plain")
    secret = Resource(
        name="secret-note",
        title="Secret note",
        description="A resource in the gateway's own bundle: scheme, which it must not pass through.",
        uri=SECRET_RESOURCE_URI,
        mime_type="text/plain",
    )
    return _Member(
        "notes",
        [
            _ToolDef(
                Tool(name="add_note", description="Add a note.", input_schema=_schema("text")),
                lambda _a: "noted",
                ("text",),
            )
        ],
        prompts={"summarize": (summarize, _summarize)},
        resources={
            TODAY_RESOURCE_URI: (today, "buy milk"),
            SECRET_RESOURCE_URI: (secret, "the secret note (a gateway must never show this)"),
        },
    )


_FACTORIES: dict[str, Callable[[], _Member]] = {"weather": weather_member, "notes": notes_member}


# ---------------------------------------------------------------------------------------- handles


class MembersHandle(Protocol):
    """What every way of running the members gives back."""

    urls: dict[str, str]

    def url(self, member: str) -> str: ...

    def admin_url(self, member: str) -> str: ...

    async def add_tool(self, member: str, name: str, description: str = "") -> None: ...

    def add_tool_sync(self, member: str, name: str, description: str = "") -> None: ...

    async def remove_tool(self, member: str, name: str) -> None: ...

    def remove_tool_sync(self, member: str, name: str) -> None: ...

    def last_headers(self, member: str) -> dict[str, str]: ...


def _admin_base(url: str) -> str:
    return url.removesuffix(MCP_PATH) + ADMIN_PATH


@dataclass
class Members:
    """The members running in this process (in the caller's loop or in a background thread)."""

    urls: dict[str, str]
    _members: dict[str, _Member] = field(repr=False)
    _loop: asyncio.AbstractEventLoop = field(repr=False)

    def url(self, member: str) -> str:
        """``http://127.0.0.1:<port>/mcp`` of `member` ("weather" or "notes")."""
        return self.urls[member]

    def admin_url(self, member: str) -> str:
        """``http://127.0.0.1:<port>/admin`` of `member`."""
        return _admin_base(self.urls[member])

    def legacy_streams(self, member: str) -> int:
        """How many standalone (handshake-era GET) SSE streams `member` has open right now."""
        return self._members[member].legacy_streams

    def last_headers(self, member: str) -> dict[str, str]:
        """The headers (lower-case names) of the last request that reached `member`'s ``/mcp``."""
        return dict(self._members[member].last_headers)

    def tool_calls(self, member: str, tool: str) -> int:
        """How many ``tools/call`` of `tool` reached `member`."""
        return self._members[member].tool_calls[tool]

    def last_call(self, member: str) -> dict[str, Any]:
        """The params of the last ``tools/call`` that reached `member`, as it read them."""
        return dict(self._members[member].last_call)

    def answer_raw(self, member: str, tool: str, result: dict[str, Any]) -> None:
        """Make `member` answer calls of `tool` with `result` as it is, no field added."""
        self._members[member].raw_results[tool] = result

    def speak_handshake_only(self, member: str) -> None:
        """Make `member` refuse the 2026-07-28 wire, so that clients use the initialize handshake."""
        self._members[member].handshake_only = True

    async def add_tool(self, member: str, name: str, description: str = "", *, quiet: bool = False) -> None:
        """Add a tool to `member` and notify its connected clients (both eras; nobody when `quiet`)."""
        await self._on_loop(lambda: self._members[member].add_tool(name, description, quiet=quiet))

    def add_tool_sync(self, member: str, name: str, description: str = "") -> None:
        self._on_loop_sync(lambda: self._members[member].add_tool(name, description))

    async def remove_tool(self, member: str, name: str) -> None:
        await self._on_loop(lambda: self._members[member].remove_tool(name))

    def remove_tool_sync(self, member: str, name: str) -> None:
        self._on_loop_sync(lambda: self._members[member].remove_tool(name))

    async def wait_legacy_streams(self, member: str, count: int = 1, *, within: float = 5.0) -> None:
        """Wait until `member` has `count` standalone SSE streams open; TimeoutError after `within` s."""
        deadline = time.monotonic() + within
        while self.legacy_streams(member) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{member} has {self.legacy_streams(member)} legacy streams, not {count}")
            await anyio.sleep(0.01)
        # The stream is registered as its response starts; give the writer task a turn.
        await anyio.sleep(0.02)

    async def _on_loop(self, make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:  # not an asyncio loop (trio)
            here = None
        if here is self._loop:
            return await make()
        future = asyncio.run_coroutine_threadsafe(make(), self._loop)
        return await anyio.to_thread.run_sync(lambda: future.result(timeout=30))

    def _on_loop_sync(self, make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("called from the members' own event loop: await add_tool/remove_tool instead")
        return asyncio.run_coroutine_threadsafe(make(), self._loop).result(timeout=30)


class _QuietUvicorn(uvicorn.Server):
    """Leaves signal handling to whoever runs the loop (uvicorn would take SIGINT/SIGTERM)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio only sets TCP_NODELAY on accepted sockets that say so, and
    # without it every response on a kept-alive connection waits out the peer's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@contextlib.asynccontextmanager
async def running_members(
    *,
    require_header: tuple[str, str] | None = None,
    host: str = "127.0.0.1",
    ports: Mapping[str, int] | None = None,
    startup_timeout: float = 10.0,
) -> AsyncIterator[Members]:
    """Serve both members with uvicorn in the running asyncio loop until the block ends.

    `require_header` (name, value) makes weather's ``/mcp`` answer 401 to requests without it.
    `ports` pins ports per member (default: free ones). Do not block this loop while the members
    are in use (they share it); sync code wants `members_thread()`.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("running_members needs an asyncio event loop (uvicorn runs on asyncio)") from None
    members = {name: factory() for name, factory in _FACTORIES.items()}
    servers: list[_QuietUvicorn] = []
    finished: list[anyio.Event] = []
    urls: dict[str, str] = {}

    async def serve(server: _QuietUvicorn, sock: socket.socket, done: anyio.Event) -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            done.set()

    sockets: dict[str, socket.socket] = {}
    try:
        for name in members:
            sockets[name] = _bind(host, (ports or {}).get(name, 0))
    except OSError:
        for sock in sockets.values():
            sock.close()
        raise

    async with anyio.create_task_group() as tg:
        for name, member in members.items():
            sock = sockets[name]
            urls[name] = f"http://{_url_host(host)}:{sock.getsockname()[1]}{MCP_PATH}"
            app = member.asgi_app(host=host, require_header=require_header if name == "weather" else None)
            config = uvicorn.Config(
                app,
                interface="asgi3",
                lifespan="on",
                log_config=None,
                log_level="warning",
                access_log=False,
                server_header=False,
                timeout_graceful_shutdown=1,
            )
            server = _QuietUvicorn(config)
            done = anyio.Event()
            servers.append(server)
            finished.append(done)
            tg.start_soon(serve, server, sock, done)
        try:
            with anyio.fail_after(startup_timeout):
                while not all(s.started for s in servers):
                    if any(d.is_set() for d in finished):
                        raise RuntimeError("an MCP member server stopped during startup")
                    await anyio.sleep(0.01)
            yield Members(urls=urls, _members=members, _loop=loop)
        finally:
            for member in members.values():
                member.close_streams()
            for server in servers:
                server.should_exit = True
            with anyio.move_on_after(15, shield=True):
                for done in finished:
                    await done.wait()
            tg.cancel_scope.cancel()


@contextlib.contextmanager
def members_thread(
    *,
    require_header: tuple[str, str] | None = None,
    host: str = "127.0.0.1",
    ports: Mapping[str, int] | None = None,
    startup_timeout: float = 10.0,
) -> Iterator[Members]:
    """Serve both members from a background thread's own asyncio loop; for sync tests and fixtures."""
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        stop = asyncio.Event()
        try:
            async with running_members(
                require_header=require_header, host=host, ports=ports, startup_timeout=startup_timeout
            ) as members:
                state["members"], state["stop"] = members, stop
                ready.set()
                await stop.wait()
        except BaseException as err:
            state.setdefault("error", err)
            raise
        finally:
            ready.set()

    def run() -> None:
        with contextlib.suppress(BaseException):
            asyncio.run(main())

    thread = threading.Thread(target=run, name="mcp-members", daemon=True)
    thread.start()
    if not ready.wait(startup_timeout + 5) or "members" not in state:
        thread.join(timeout=5)
        raise RuntimeError("the MCP members did not start") from state.get("error")
    members: Members = state["members"]
    try:
        yield members
    finally:
        stop: asyncio.Event = state["stop"]
        with contextlib.suppress(RuntimeError):  # loop already closed
            members._loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=20)


# ---------------------------------------------------------------------------------------- process


@dataclass
class RemoteMembers:
    """The members running in another process, reached through their ``/admin`` routes."""

    urls: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    def url(self, member: str) -> str:
        return self.urls[member]

    def admin_url(self, member: str) -> str:
        return _admin_base(self.urls[member])

    def _admin(self, member: str, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.admin_url(member) + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")
            if err.code == 409:  # the same errors as the in-process handle
                raise ValueError(detail) from None
            if err.code == 404:
                raise KeyError(detail) from None
            raise

    def add_tool_sync(self, member: str, name: str, description: str = "") -> None:
        self._admin(member, "POST", "/tools", {"name": name, "description": description})

    async def add_tool(self, member: str, name: str, description: str = "") -> None:
        await anyio.to_thread.run_sync(lambda: self.add_tool_sync(member, name, description))

    def remove_tool_sync(self, member: str, name: str) -> None:
        self._admin(member, "DELETE", f"/tools/{urllib.parse.quote(name, safe='')}")

    async def remove_tool(self, member: str, name: str) -> None:
        await anyio.to_thread.run_sync(lambda: self.remove_tool_sync(member, name))

    def last_headers(self, member: str) -> dict[str, str]:
        headers: dict[str, str] = self._admin(member, "GET", "/last-headers")
        return headers


@contextlib.contextmanager
def members_subprocess(
    *,
    require_header: tuple[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    startup_timeout: float = 30.0,
) -> Iterator[RemoteMembers]:
    """Run ``python tests/mcp_members.py`` and stop it with SIGTERM when the block ends."""
    with tempfile.TemporaryDirectory(prefix="mcp-members-") as tmp:
        ready = Path(tmp) / "ready.json"
        args = [sys.executable, str(Path(__file__).resolve()), "--ready-file", str(ready), *extra_args]
        if require_header is not None:
            args += ["--require-header", f"{require_header[0]}={require_header[1]}"]
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + startup_timeout
            while not ready.exists():
                if process.poll() is not None:
                    raise RuntimeError(f"mcp_members.py exited with {process.returncode} before it was ready")
                if time.monotonic() > deadline:
                    raise RuntimeError("mcp_members.py did not get ready in time")
                time.sleep(0.02)
            yield RemoteMembers(urls=json.loads(ready.read_text()), process=process)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _header_arg(value: str) -> tuple[str, str]:
    name, sep, header_value = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME=VALUE")
    return name.strip(), header_value


async def _serve_until_signalled(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ports = {"weather": args.weather_port, "notes": args.notes_port}
    async with running_members(require_header=args.require_header, host=args.host, ports=ports) as members:
        if args.handshake_only:
            for name in members.urls:
                members.speak_handshake_only(name)
        announcement = json.dumps(members.urls)
        if args.ready_file is not None:
            ready = Path(args.ready_file)
            partial = ready.with_name(ready.name + ".partial")
            partial.write_text(announcement)
            os.replace(partial, ready)
        print(announcement, flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve the weather and notes MCP servers over streamable HTTP."
    )
    parser.add_argument(
        "--ready-file", help="write {weather: URL, notes: URL} here once both accept connections"
    )
    parser.add_argument(
        "--require-header",
        type=_header_arg,
        metavar="NAME=VALUE",
        help="weather answers 401 without this header",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--handshake-only", action="store_true", help="refuse the 2026-07-28 wire (initialize handshake only)"
    )
    parser.add_argument("--weather-port", type=int, default=0)
    parser.add_argument("--notes-port", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(_serve_until_signalled(args))
    return 0


__all__ = [
    "MEMBER_NAMES",
    "SECRET_RESOURCE_URI",
    "TODAY_RESOURCE_URI",
    "Members",
    "MembersHandle",
    "RemoteMembers",
    "main",
    "members_subprocess",
    "members_thread",
    "notes_member",
    "running_members",
    "weather_member",
]

if __name__ == "__main__":
    sys.exit(main())
