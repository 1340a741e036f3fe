"""The gateway's short way for ``tools/call`` on the 2026-07-28 wire.

On that wire a tool call is one self-contained JSON-RPC POST, and the gateway already holds its
body (the rate limit reads it). Handing it to the SDK's server costs an ASGI bridge, a Starlette
request, a per-request connection and a middleware chain: most of the platform's CPU per call
(bench/gateway.py). So the door answers a well-formed modern ``tools/call`` itself, with the
checks the SDK's modern entry makes, and the same answer on the wire (result sieved by the
protocol's result surface, the gateway's ``serverInfo`` stamp; errors as JSON-RPC
errors with the SDK's HTTP status). Anything it is not sure of (another method, a malformed or
inconsistent request, an ``Mcp-Param-*`` header that does not match) goes to the SDK, which gives
the error it always gave.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from aiohttp import web
from mcp.server.runner import modern_error_data
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from bundle_operator.telemetry import tracing

_METHOD = "tools/call"
_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
_PARAM_PREFIX = "mcp-param-"
_JSON_TYPES = ("application/json", "application/*", "*/*")
# Request ``_meta`` keys that ask for messages during the call, which a JSON answer cannot carry.
_STREAMED = ("progressToken", LOG_LEVEL_META_KEY)
# Call parameters of the multi-round-trip exchange (2026-07-28), passed to the member as sent.
_CARRIED = ("inputResponses", "requestState")


@dataclass(frozen=True)
class DirectCall:
    """A modern ``tools/call`` the door may answer itself."""

    request_id: str | int
    version: str
    name: str
    arguments: dict[str, Any]
    # What the member is sent besides: the client's answers to input requests, the state it echoes,
    # the capabilities it declared, so that the member asks it what it would ask directly, and the
    # trace-context keys of its ``_meta``.
    carried: dict[str, Any] = field(default_factory=dict)


def direct_call(request: web.Request, body: bytes | None, decoded: Any, max_body: int) -> DirectCall | None:
    """The call in ``request`` when it is a well-formed modern ``tools/call``; None sends it to the SDK.

    ``decoded`` is the body as JSON (gateway_limits.json_message), read once by the door.
    """
    headers = request.headers
    version = headers.get("MCP-Protocol-Version")
    if (
        body is None
        or version not in MODERN_PROTOCOL_VERSIONS
        or len(body) > max_body
        or not headers.get("Content-Type", "").lower().startswith("application/json")
        or not _accepts_json(headers.get("Accept", ""))
    ):
        return None
    if (
        not isinstance(decoded, dict)
        or decoded.get("jsonrpc") != "2.0"
        or decoded.get("method") != _METHOD
        or not isinstance(decoded.get("id"), str | int)
        or isinstance(decoded.get("id"), bool)
    ):
        return None
    raw_headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in request.raw_headers]
    if find_duplicated_routing_header(raw_headers) is not None:
        return None
    lowered = {name.lower(): value for name, value in raw_headers}
    route = classify_inbound_request(decoded, headers=lowered)
    if not isinstance(route, InboundModernRoute):
        return None
    try:
        params = types.CallToolRequestParams.model_validate(decoded.get("params"))
    except ValidationError:
        return None
    raw = decoded.get("params")
    meta = raw.get("_meta") if isinstance(raw, dict) else None
    if isinstance(meta, dict) and any(key in meta for key in _STREAMED):
        return None  # progress or log messages need the answer streamed: the SDK's path relays them
    carried = {key: raw[key] for key in _CARRIED if isinstance(raw, dict) and key in raw}
    if isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
        carried["capabilities"] = meta[CLIENT_CAPABILITIES_META_KEY]
    # The client's trace context (SEP-414): the call's span continues it (gateway_spans.py).
    if isinstance(meta, dict) and (traced := tracing.trace_meta(meta)):
        carried["meta"] = traced
    return DirectCall(
        decoded["id"], route.protocol_version, params.name, dict(params.arguments or {}), carried
    )


def param_headers_agree(
    request: web.Request, call: DirectCall, input_schema: Mapping[str, Any] | None
) -> bool:
    """Whether the call's ``Mcp-Param-*`` headers agree with its arguments, as the SDK checks them.

    The validator is given every header line, repeated ones too (a multidict's items), as the
    SDK gives it Starlette's headers: a recognized header sent twice is a mismatch.
    """
    headers = request.headers
    if not call.arguments and not any(name.lower().startswith(_PARAM_PREFIX) for name in headers):
        return True
    if input_schema is None:
        return True
    return validate_mcp_param_headers(input_schema, call.arguments, headers) is None


def answer(
    call: DirectCall, result: types.CallToolResult | dict[str, Any], server_info: dict[str, Any]
) -> web.Response:
    """The JSON-RPC response to ``call`` carrying the tool's result, shaped as the SDK's server shapes it."""
    dumped = (
        result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(result, types.CallToolResult)
        else dict(result)
    )
    try:
        dumped = methods.serialize_server_result(_METHOD, call.version, dumped)
    except ValidationError:
        # A member's result that is not a tool result never reaches the client (the SDK does the same).
        return failure(
            call, types.ErrorData(code=types.INTERNAL_ERROR, message="Handler returned an invalid result")
        )
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {_SERVER_INFO: server_info}
    elif isinstance(meta, dict) and meta.get(_SERVER_INFO) is None:
        dumped["_meta"] = {**meta, _SERVER_INFO: server_info}
    return _reply({"jsonrpc": "2.0", "id": call.request_id, "result": dumped}, 200)


def failure(call: DirectCall, error: types.ErrorData | Exception) -> web.Response:
    """The JSON-RPC error for ``call``, with the HTTP status the SDK's modern entry gives its code."""
    data = error if isinstance(error, types.ErrorData) else modern_error_data(error)
    body = {
        "jsonrpc": "2.0",
        "id": call.request_id,
        "error": data.model_dump(by_alias=True, mode="json", exclude_none=True),
    }
    return _reply(body, ERROR_CODE_HTTP_STATUS.get(data.code, 200))


def _reply(message: dict[str, Any], status: int) -> web.Response:
    return web.Response(
        body=json.dumps(message, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _accepts_json(accept: str) -> bool:
    return any(part.split(";")[0].strip().lower() in _JSON_TYPES for part in accept.split(","))
