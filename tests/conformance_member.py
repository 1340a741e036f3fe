"""An MCP server offering what the official conformance suite's server scenarios call.

`@modelcontextprotocol/conformance` (pinned in tests/conformance/build.py) runs its server scenarios
against a URL: it calls tools, resources, templates, prompts, completion, logging, subscriptions
and ping by fixed names (`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...). This
server is our own answer to those calls, on the official Python SDK (`mcp`, low-level `Server`), so
that the suite can be run against it directly and against a gateway Endpoint whose one member it is
(tests/integration/platform/test_conformance.py, scripts/conformance.py).

Run it as a process: ``python tests/conformance_member.py --port 0 --ready-file PATH`` serves
streamable HTTP on ``http://127.0.0.1:<port>/mcp``, writes (and prints) ``{"url": URL}`` once it
accepts connections and stops on SIGTERM. It keeps DNS-rebinding protection on (loopback `Host`
and `Origin` only), resumable SSE streams (an in-memory event store with a `retry` hint) and
per-session log levels.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    EmbeddedResource,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    ImageContent,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    Tool,
    UnsubscribeRequestParams,
)

MCP_PATH = "/mcp"
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _png_pixel() -> str:
    """A 1x1 opaque blue PNG, built here rather than pasted, base64-encoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    raw = zlib.compress(b"\x00\x20\x40\xc0")
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def _wav_silence() -> str:
    """A short silent mono 8 kHz 8-bit WAV, base64-encoded."""
    samples = b"\x80" * 80
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 8000, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(samples))
    return base64.b64encode(b"RIFF" + struct.pack("<I", len(body) + len(samples)) + body + samples).decode()


PNG = _png_pixel()
WAV = _wav_silence()
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

TOOLS: list[Tool] = [
    Tool(name="test_simple_text", description="Answers with one text block.", input_schema=NO_ARGS),
    Tool(name="test_image_content", description="Answers with a PNG image.", input_schema=NO_ARGS),
    Tool(name="test_audio_content", description="Answers with a WAV clip.", input_schema=NO_ARGS),
    Tool(
        name="test_embedded_resource", description="Answers with an embedded resource.", input_schema=NO_ARGS
    ),
    Tool(
        name="test_multiple_content_types",
        description="Answers with text, an image and an embedded resource.",
        input_schema=NO_ARGS,
    ),
    Tool(
        name="test_tool_with_logging", description="Logs three messages while it runs.", input_schema=NO_ARGS
    ),
    Tool(
        name="test_tool_with_progress",
        description="Reports progress 0, 50 and 100 of 100.",
        input_schema=NO_ARGS,
    ),
    Tool(name="test_error_handling", description="Always answers with a tool error.", input_schema=NO_ARGS),
    Tool(
        name="test_sampling",
        description="Asks the client's model to complete a prompt.",
        input_schema={"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    Tool(
        name="test_elicitation",
        description="Asks the user for a username and an email address.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    ),
    Tool(
        name="test_elicitation_sep1034_defaults",
        description="Asks for a form whose every primitive field has a default.",
        input_schema=NO_ARGS,
    ),
    Tool(
        name="test_elicitation_sep1330_enums",
        description="Asks for a form with every kind of enum field.",
        input_schema=NO_ARGS,
    ),
    Tool(
        name="test_reconnection",
        description="Closes its SSE stream mid-call; the answer arrives after the client reconnects.",
        input_schema=NO_ARGS,
    ),
    # Beyond the suite's: what the gateway's relay tests ask of a member (test_gateway_relay.py).
    Tool(
        name="test_wait_for_cancellation",
        description="Waits until the call is cancelled (counted at test://cancellations).",
        input_schema=NO_ARGS,
    ),
    Tool(
        name="test_list_roots",
        description="Asks the client for its roots and answers with their URIs.",
        input_schema=NO_ARGS,
    ),
    Tool(
        name="test_touch_resource",
        description="Tells the sessions subscribed to a URI that it was updated.",
        input_schema={"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
    ),
    Tool(
        name="json_schema_2020_12_tool",
        description="Takes input described with JSON Schema 2020-12 keywords.",
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
]

RESOURCES: list[Resource] = [
    Resource(
        uri="test://static-text",
        name="static-text",
        description="A fixed text resource.",
        mime_type="text/plain",
    ),
    Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A fixed PNG resource.",
        mime_type="image/png",
    ),
    Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource clients may subscribe to.",
        mime_type="text/plain",
    ),
]
TEMPLATE = ResourceTemplate(
    uri_template="test://template/{id}/data",
    name="template-data",
    description="JSON data for an id.",
    mime_type="application/json",
)
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"

PROMPTS: list[Prompt] = [
    Prompt(name="test_simple_prompt", description="A prompt without arguments."),
    Prompt(
        name="test_prompt_with_arguments",
        description="A prompt quoting its two arguments.",
        arguments=[
            PromptArgument(name="arg1", description="First argument", required=True),
            PromptArgument(name="arg2", description="Second argument", required=True),
        ],
    ),
    Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding the resource it is given.",
        arguments=[PromptArgument(name="resourceUri", description="URI to embed", required=True)],
    ),
    Prompt(name="test_prompt_with_image", description="A prompt showing an image."),
]
COMPLETIONS: Mapping[str, tuple[str, ...]] = {"arg1": ("paris", "park", "party"), "arg2": ("alpha", "beta")}


class MemoryEventStore(EventStore):
    """Every SSE event kept in memory, so a client that reconnects with Last-Event-ID gets the rest."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, Any]] = []  # (event id, stream id, message)
        self._next = 0

    async def store_event(self, stream_id: str, message: Any) -> str:
        self._next += 1
        event_id = str(self._next)
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        found = next((i for i, (eid, _, _) in enumerate(self._events) if eid == last_event_id), None)
        if found is None:
            return None
        stream_id = self._events[found][1]
        for event_id, stream, message in self._events[found + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _session_id(ctx: ServerRequestContext[Any]) -> str:
    headers = getattr(ctx.request, "headers", None)
    found = headers.get("mcp-session-id") if headers is not None else None
    return str(found or id(ctx.session))


class ConformanceMember:
    """The handlers, with per-session log levels and subscriptions."""

    def __init__(self) -> None:
        self.log_levels: dict[int, str] = {}
        self.subscriptions: dict[int, set[str]] = {}
        # uri -> {Mcp-Session-Id -> that session}: who is told when test_touch_resource updates it.
        self.watchers: dict[str, dict[str, ServerSession]] = {}
        self.cancellations = 0
        self.server: Server[Any] = Server(
            "conformance-member",
            version="1.0.0",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_completion=self._complete,
            on_set_logging_level=self._set_level,
        )

    # ------------------------------------------------------------------------------ tools

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=TOOLS)

    async def _log(self, ctx: ServerRequestContext[Any], level: str, text: str) -> None:
        threshold = self.log_levels.get(id(ctx.session), "debug")
        if LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold):
            await ctx.session.send_log_message(
                level,  # type: ignore[arg-type]
                text,
                logger="conformance-member",
                related_request_id=ctx.request_id,
            )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        args = dict(params.arguments or {})
        name = params.name
        if name == "test_simple_text":
            return CallToolResult(content=[_text("This is a simple text response for testing.")])
        if name == "test_image_content":
            return CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")])
        if name == "test_audio_content":
            return CallToolResult(content=[AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
        if name == "test_embedded_resource":
            embedded = TextResourceContents(
                uri="test://embedded-resource",
                mime_type="text/plain",
                text="This is an embedded resource content.",
            )
            return CallToolResult(content=[EmbeddedResource(type="resource", resource=embedded)])
        if name == "test_multiple_content_types":
            mixed = TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            )
            return CallToolResult(
                content=[
                    _text("Multiple content types test:"),
                    ImageContent(type="image", data=PNG, mime_type="image/png"),
                    EmbeddedResource(type="resource", resource=mixed),
                ]
            )
        if name == "test_tool_with_logging":
            for step, text in enumerate(
                ("Tool execution started", "Tool processing data", "Tool execution completed")
            ):
                if step:
                    await asyncio.sleep(0.05)
                await self._log(ctx, "info", text)
            return CallToolResult(content=[_text("Logged three messages.")])
        if name == "test_tool_with_progress":
            # A no-op when the call carried no `_meta.progressToken`.
            for step, progress in enumerate((0, 50, 100)):
                if step:
                    await asyncio.sleep(0.05)
                await ctx.session.report_progress(progress, 100)
            return CallToolResult(content=[_text("Progress reported: 0, 50, 100 of 100.")])
        if name == "test_error_handling":
            return CallToolResult(
                content=[_text("This tool intentionally returns an error for testing")], is_error=True
            )
        if name == "test_sampling":
            return await self._sampling(ctx, str(args.get("prompt", "")))
        if name == "test_elicitation":
            schema = {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            }
            return await self._elicit(ctx, str(args.get("message", "")), schema, "User response")
        if name == "test_elicitation_sep1034_defaults":
            schema = {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {
                        "type": "string",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": {"type": "boolean", "default": True},
                },
            }
            return await self._elicit(ctx, "Confirm or change the defaults", schema, "Elicitation completed")
        if name == "test_elicitation_sep1330_enums":
            schema = {
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {
                        "type": "string",
                        "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"},
                        ],
                    },
                    "legacyEnum": {
                        "type": "string",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    },
                    "titledMulti": {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                {"const": "value1", "title": "First Choice"},
                                {"const": "value2", "title": "Second Choice"},
                                {"const": "value3", "title": "Third Choice"},
                            ]
                        },
                    },
                },
            }
            return await self._elicit(ctx, "Pick from each list", schema, "Elicitation completed")
        if name == "test_reconnection":
            await asyncio.sleep(0.05)
            if ctx.close_sse_stream is not None:
                await ctx.close_sse_stream()
            await asyncio.sleep(0.3)
            return CallToolResult(content=[_text("Answered after the stream was closed and resumed.")])
        if name == "test_wait_for_cancellation":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancellations += 1
                raise
            return CallToolResult(content=[_text("Never cancelled.")])
        if name == "test_list_roots":
            try:
                roots = await ctx.session.list_roots()
            except MCPError as error:
                return CallToolResult(content=[_text(f"Roots failed: {error}")], is_error=True)
            return CallToolResult(content=[_text("Roots: " + " ".join(str(r.uri) for r in roots.roots))])
        if name == "test_touch_resource":
            uri = str(args.get("uri", ""))
            watchers = list(self.watchers.get(uri, {}).values())
            for session in watchers:
                await session.send_resource_updated(uri)
            return CallToolResult(content=[_text(f"Told {len(watchers)} session(s).")])
        if name == "json_schema_2020_12_tool":
            return CallToolResult(content=[_text(f"Received: {json.dumps(args, sort_keys=True)}")])
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")

    async def _sampling(self, ctx: ServerRequestContext[Any], prompt: str) -> CallToolResult:
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=_text(prompt))],
                max_tokens=100,
                related_request_id=ctx.request_id,
            )
        except MCPError as error:
            return CallToolResult(content=[_text(f"Sampling failed: {error}")], is_error=True)
        content = result.content
        text = content.text if isinstance(content, TextContent) else str(content)
        return CallToolResult(content=[_text(f"LLM response: {text}")])

    async def _elicit(
        self, ctx: ServerRequestContext[Any], message: str, schema: dict[str, Any], label: str
    ) -> CallToolResult:
        try:
            result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        except MCPError as error:
            return CallToolResult(content=[_text(f"Elicitation failed: {error}")], is_error=True)
        content = json.dumps(result.content, sort_keys=True)
        return CallToolResult(content=[_text(f"{label}: action={result.action}, content={content}")])

    # ------------------------------------------------------------------------------ resources

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=RESOURCES)

    async def _list_templates(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        if uri == "test://static-text":
            text = "This is the content of the static text resource."
            return ReadResourceResult(
                contents=[TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
            )
        if uri == "test://static-binary":
            return ReadResourceResult(
                contents=[BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)]
            )
        if uri == "test://watched-resource":
            text = "Watched content."
            return ReadResourceResult(
                contents=[TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
            )
        if uri == "test://cancellations":
            text = str(self.cancellations)
            return ReadResourceResult(
                contents=[TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
            )
        if uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
            ident = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
            if ident and "/" not in ident:
                data = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
                return ReadResourceResult(
                    contents=[TextResourceContents(uri=uri, mime_type="application/json", text=data)]
                )
        raise MCPError(-32002, f"Resource not found: {uri}")

    async def _subscribe(self, ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
        self.subscriptions.setdefault(id(ctx.session), set()).add(str(params.uri))
        self.watchers.setdefault(str(params.uri), {})[_session_id(ctx)] = ctx.session
        return EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        self.subscriptions.get(id(ctx.session), set()).discard(str(params.uri))
        self.watchers.get(str(params.uri), {}).pop(_session_id(ctx), None)
        return EmptyResult()

    # ------------------------------------------------------------------------------ prompts

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return ListPromptsResult(prompts=PROMPTS)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        args = dict(params.arguments or {})
        if params.name == "test_simple_prompt":
            return GetPromptResult(
                messages=[PromptMessage(role="user", content=_text("This is a simple prompt for testing."))]
            )
        if params.name == "test_prompt_with_arguments":
            text = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
            return GetPromptResult(messages=[PromptMessage(role="user", content=_text(text))])
        if params.name == "test_prompt_with_embedded_resource":
            embedded = TextResourceContents(
                uri=args.get("resourceUri", "test://example-resource"),
                mime_type="text/plain",
                text="Embedded resource content for testing.",
            )
            return GetPromptResult(
                messages=[
                    PromptMessage(role="user", content=EmbeddedResource(type="resource", resource=embedded)),
                    PromptMessage(role="user", content=_text("Please process the embedded resource above.")),
                ]
            )
        if params.name == "test_prompt_with_image":
            return GetPromptResult(
                messages=[
                    PromptMessage(
                        role="user", content=ImageContent(type="image", data=PNG, mime_type="image/png")
                    ),
                    PromptMessage(role="user", content=_text("Please analyze the image above.")),
                ]
            )
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: CompleteRequestParams
    ) -> CompleteResult:
        ref = params.ref
        if isinstance(ref, PromptReference) and ref.name not in {p.name for p in PROMPTS}:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {ref.name}")
        known = COMPLETIONS.get(params.argument.name, ())
        values = [v for v in known if v.startswith(params.argument.value)]
        return CompleteResult(completion=Completion(values=values, total=len(values), has_more=False))

    async def _set_level(self, ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
        self.log_levels[id(ctx.session)] = params.level
        return EmptyResult()


def _write_ready(path: str, line: str) -> None:
    with open(path + ".tmp", "w") as out:
        out.write(line)
    os.replace(path + ".tmp", path)


def serve(port: int, ready_file: str | None) -> None:
    """Serve on 127.0.0.1:port (0: any free port) until SIGTERM or SIGINT."""
    member = ConformanceMember()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    bound = sock.getsockname()[1]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    app = member.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        event_store=MemoryEventStore(),
        retry_interval=200,
        transport_security=security,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.02)
        line = json.dumps({"url": f"http://127.0.0.1:{bound}{MCP_PATH}"})
        if ready_file:
            _write_ready(ready_file, line)
        print(line, flush=True)
        await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", help="write {'url': ...} here once serving")
    args = parser.parse_args()
    serve(args.port, args.ready_file)


if __name__ == "__main__":
    main()
