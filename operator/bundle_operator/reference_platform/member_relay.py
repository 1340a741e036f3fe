"""The relay between a client's call and the member serving it (DESIGN.md §9.6).

While a member serves a call it may report progress, log, and ask the client something
(sampling, elicitation, roots). Those go to the client that made the call, on that call's stream.
An SDK client cannot say which of its calls a server's request belongs to, so each call through
the relay holds a member client of its own for its length: ``RelayPool`` keeps connected clients
per member and checks one out per call, pointing its callbacks at the call's ``Route``.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from bundle_operator.reference_platform.member_link import HeldClient, MemberLink, hold_open

log = logging.getLogger("bundle_operator.platform.gateway")

# Connected member clients kept idle per member for the next call; more are closed after a call.
IDLE_PER_MEMBER = 8
# How long a server-to-client request relayed to the calling client may take (a person may answer it).
CLIENT_ANSWER_TIMEOUT = 600.0
# Syslog order of the protocol's log levels (RFC 5424), least severe first.
LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_T = TypeVar("_T")
# Relaying logs is what DESIGN.md §9.6 asks of the gateway on every wire, deprecated there or not.
warnings.filterwarnings("ignore", "The logging capability is deprecated", MCPDeprecationWarning)
_R = TypeVar("_R", bound=types.Result)


@dataclass
class Route:
    """Where a member's messages during one call go: the calling client's session and request."""

    session: ServerSession
    request_id: types.RequestId | None
    member: str
    # The least severe level the calling client wants (its session's ``logging/setLevel``), if any.
    log_level: types.LoggingLevel | None = None
    # Whether the call's answer streams; a call answered with one JSON body (gateway_answers.py)
    # gets its log messages on the session's standalone stream.
    streamed: bool = True

    def _scoped(self) -> ServerMessageMetadata:
        return ServerMessageMetadata(related_request_id=self.request_id)

    @property
    def modern(self) -> bool:
        """Whether the calling client speaks the 2026-07-28 wire (no requests back to it mid-call)."""
        return self.session.protocol_version in MODERN_PROTOCOL_VERSIONS

    def capabilities(self) -> dict[str, Any]:
        """The capabilities the caller declared, as a 2026-07-28 request to the member carries them.

        The member then asks (with an input-required result) only what the caller can answer.
        """
        have = self.session.client_capabilities
        return have.model_dump(by_alias=True, mode="json", exclude_none=True) if have else {}

    async def notified(self, message: dict[str, Any]) -> None:
        """A notification the member sent on the call's stream (the 2026-07-28 wire), relayed."""
        params = message.get("params")
        try:
            if message.get("method") == "notifications/progress" and isinstance(params, dict):
                await self.progress(params["progress"], params.get("total"), params.get("message"))
            elif message.get("method") == "notifications/message":
                await self.log(types.LoggingMessageNotificationParams.model_validate(params))
        except (KeyError, TypeError, ValueError):
            log.debug("a member's notification the gateway could not read was dropped")

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The member's progress, against the token the calling client gave (none given: dropped)."""
        await self.session.report_progress(progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """The member's log message, its logger named after the member, if the client wants its level."""
        if self.log_level is not None and LEVELS.index(params.level) < LEVELS.index(self.log_level):
            return
        logger = f"{self.member}/{params.logger}" if params.logger else self.member
        related = self.request_id if self.streamed else None
        await self.session.send_log_message(
            params.level, params.data, logger=logger, related_request_id=related
        )

    async def ask(
        self,
        request: types.ServerRequest,
        result_type: type[_R],
        needs: types.ClientCapabilities,
        method: str,
    ) -> _R | types.ErrorData:
        """Ask the calling client on the member's behalf; what it answers (or refuses) goes back."""
        if not self.session.check_client_capability(needs):
            # What the member would hear from this client directly: it never offered the method.
            return types.ErrorData(
                code=types.METHOD_NOT_FOUND, message=f"the client does not support {method}"
            )
        try:
            answer = await self.session.send_request(
                request,
                result_type,
                request_read_timeout_seconds=CLIENT_ANSWER_TIMEOUT,
                metadata=self._scoped(),
            )
        except MCPError as exc:
            return exc.error
        return answer


def _url_mode(params: types.ElicitRequestParams) -> bool:
    return isinstance(params, types.ElicitRequestURLParams)


def _elicits(have: types.ClientCapabilities | None, *, url: bool) -> bool:
    """Whether a client declared the elicitation mode (an empty ``elicitation`` means form only)."""
    if have is None or have.elicitation is None:
        return False
    declared = have.elicitation
    if url:
        return declared.url is not None
    return declared.form is not None or declared.url is None


@dataclass(eq=False)  # held in sets by identity
class _Relay:
    """One connected member client and the call it serves now (None between calls)."""

    route: Route | None = None
    held: HeldClient | None = None

    def _route(self) -> Route:
        if self.route is None:
            raise MCPError(code=types.INVALID_REQUEST, message="the gateway has no call in progress here")
        return self.route

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        needs = types.ClientCapabilities(
            sampling=types.SamplingCapability(tools=types.SamplingToolsCapability() if params.tools else None)
        )
        result_type: type[Any] = (
            types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        )
        request = types.CreateMessageRequest(params=params)
        return await self._route().ask(request, result_type, needs, "sampling/createMessage")

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        route = self._route()
        if not _elicits(route.session.client_capabilities, url=_url_mode(params)):
            mode = "URL" if _url_mode(params) else "form"
            return types.ErrorData(
                code=types.METHOD_NOT_FOUND, message=f"the client does not support {mode} elicitation"
            )
        return await route.ask(
            types.ElicitRequest(params=params),
            types.ElicitResult,
            types.ClientCapabilities(elicitation=types.ElicitationCapability()),
            "elicitation/create",
        )

    async def roots(self, context: ClientRequestContext) -> Any:
        return await self._route().ask(
            types.ListRootsRequest(),
            types.ListRootsResult,
            types.ClientCapabilities(roots=types.RootsCapability()),
            "roots/list",
        )

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        if self.route is not None:
            with contextlib.suppress(Exception):
                await self.route.log(params)


class RelayPool:
    """Member clients that relay for one call at a time, kept connected between calls."""

    def __init__(self, idle_per_member: int = IDLE_PER_MEMBER) -> None:
        self._idle: dict[str, list[_Relay]] = {}
        self._limit = idle_per_member
        self._all: set[_Relay] = set()

    async def _open(self, link: MemberLink, modern: bool) -> _Relay:
        relay = _Relay()
        relay.held = await hold_open(
            link,
            "gateway-member-relay",
            sampling_callback=relay.sampling,
            elicitation_callback=relay.elicitation,
            list_roots_callback=relay.roots,
            logging_callback=relay.logging,
            # The member sends every level on the 2026-07-28 wire; the route applies the client's.
            log_level="debug",
            # The member is spoken to in the caller's era, so it asks the caller the way it would
            # directly: mid-call requests on the handshake wire, input-required results on the
            # 2026-07-28 wire.
            mode="auto" if modern else "legacy",
        )
        self._all.add(relay)
        return relay

    async def _close(self, relay: _Relay) -> None:
        self._all.discard(relay)
        if relay.held is not None:
            await relay.held.close()

    async def call(self, link: MemberLink, route: Route, action: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run ``action`` on a member client whose progress, logs and requests go to ``route``.

        A client that fails or is cancelled is closed; one that answered goes back to the idle
        ones. A kept client the member no longer knows (it restarted), or cannot be reached on,
        is replaced and the action tried once more on a new one: the member never ran it.
        """
        key = f"{link.fingerprint}/{'modern' if route.modern else 'legacy'}"
        idle = self._idle.setdefault(key, [])
        relay = self._reuse(idle)
        if relay is not None:
            try:
                return await self._run(relay, route, action, idle)
            except MCPError as exc:
                if exc.code != types.INVALID_REQUEST or "session" not in exc.message.lower():
                    raise
            except httpx2.ConnectError:
                pass
            log.info("a kept relay to a member went stale; connecting anew")
        return await self._run(await self._open(link, route.modern), route, action, idle)

    def _reuse(self, idle: list[_Relay]) -> _Relay | None:
        while idle:
            candidate = idle.pop()
            if candidate.held is not None and candidate.held.alive:
                return candidate
            self._all.discard(candidate)
        return None

    async def _run(
        self, relay: _Relay, route: Route, action: Callable[[Client], Awaitable[_T]], idle: list[_Relay]
    ) -> _T:
        assert relay.held is not None
        relay.route = route
        try:
            result = await action(relay.held.client)
        except BaseException:
            relay.route = None
            await self._close(relay)
            raise
        relay.route = None
        if len(idle) < self._limit:
            idle.append(relay)
        else:
            await self._close(relay)
        return result

    async def close(self) -> None:
        """Close every client."""
        self._idle.clear()
        for relay in list(self._all):
            await self._close(relay)
