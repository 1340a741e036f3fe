"""How the SDK's server answers a handshake-era request: one JSON body, or an SSE stream.

A stream is what lets a member's progress and requests reach the caller mid-call (DESIGN.md
§9.6), and it costs the client and the server more than a JSON body. So the door chooses per
request: JSON when nothing can come before the answer on the request's own stream (the caller
gave no progress token and declared no capability a member could ask of it); log messages of such
a call go on the session's standalone stream. The SDK's transport fixes the choice per session,
so its transports read it from a context variable the door sets around each request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

_PLAIN: ContextVar[bool | None] = ContextVar("gateway_plain_answer", default=None)
_DEFAULT = "_gateway_json_default"


class _ChosenPerRequest(StreamableHTTPServerTransport):
    """A transport whose JSON-or-SSE choice is the door's for the request it serves."""

    @property
    def is_json_response_enabled(self) -> bool:
        chosen = _PLAIN.get()
        # Outside a request (the transport's message router), the session's own setting: SSE.
        return bool(self.__dict__.get(_DEFAULT, False)) if chosen is None else chosen

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        self.__dict__[_DEFAULT] = value


class ChoosingSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, whose sessions answer as the door chose for each request."""

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            transport.__class__ = _ChosenPerRequest
        return transport


@contextlib.contextmanager
def answering(plain: bool) -> Iterator[None]:
    """Requests served inside this block are answered with one JSON body when ``plain``."""
    token = _PLAIN.set(plain)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def can_answer_plainly(capabilities: types.ClientCapabilities | None, message: Any) -> bool:
    """Whether a request needs no stream: no progress token, and nothing a member could ask back."""
    if capabilities is None or not isinstance(message, dict):
        return False  # a session not seen initialized, a batch: the stream is always right
    if capabilities.sampling is not None or capabilities.elicitation is not None or capabilities.roots:
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return not (isinstance(meta, dict) and "progressToken" in meta)
