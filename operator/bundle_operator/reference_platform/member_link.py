"""How the gateway reaches a member: its URL and headers, and MCP client sessions to it.

A member is an MCP instance of a url server, or one the platform runs itself over stdio, which the
gateway reaches at its loopback bridge (stdio_bridge.py) like any url member. A URL and headers may
be secret references; they are resolved here, inside a store transaction, and never leave the
process in a message: errors about a member name the member, not where it lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

from bundle_operator.platform import kinds
from bundle_operator.reference_platform.mcp_rules import target_url
from bundle_operator.reference_platform.stdio_launch import runs_itself
from bundle_operator.reference_platform.stdio_loopback import LOOPBACK
from bundle_operator.reference_platform.storage import Row, Tx

log = logging.getLogger("bundle_operator.platform.gateway")

# How long the gateway waits for a member before giving up on one call or one discovery step.
MEMBER_TIMEOUT = 30.0


@dataclass(frozen=True)
class MemberLink:  # not slotted: the fingerprint is cached on the instance
    """Where a member lives and what it is sent, secret values resolved."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def fingerprint(self) -> str:
        """A hash that changes when the URL or any header changes (safe to keep and compare)."""
        raw = json.dumps([self.url, list(self.headers)]).encode()
        return hashlib.sha256(raw).hexdigest()

    def scrub(self, text: str) -> str:
        """``text`` with the URL and header values blanked out, for messages and logs."""
        for secret in [self.url, *(value for _, value in self.headers)]:
            if secret:
                text = text.replace(secret, "***")
        return text


def member_link(tx: Tx, workspace: str, instance: Row) -> MemberLink | None:
    """The link to an MCP instance when it is a member the gateway can call, else None."""
    url = target_url(tx, workspace, instance.data)
    if url is None:
        server = server_of(tx, workspace, instance)
        bridge = LOOPBACK.url(workspace, instance.id)
        if server is None or not runs_itself(server.data) or bridge is None:
            return None
        return MemberLink(bridge, (("Authorization", f"Bearer {LOOPBACK.token}"),))
    headers: list[tuple[str, str]] = []
    for name, value in sorted((instance.data.get("headers") or {}).items()):
        if isinstance(value, str):
            headers.append((name, value))
        elif isinstance(value, dict) and value.get("secret_id"):
            resolved = tx.secret(str(value["secret_id"]))
            if resolved is not None:
                headers.append((name, resolved))
    return MemberLink(url, tuple(headers))


def server_of(tx: Tx, workspace: str, instance: Row) -> Row | None:
    """The server spec behind an MCP instance."""
    return tx.get(workspace, kinds.MCP_SERVERS.path, instance.data["server_id"])


@contextlib.asynccontextmanager
async def connected(link: MemberLink, **options: Any) -> AsyncIterator[Client]:
    """A client session to a member over streamable HTTP for the length of a ``with`` block."""
    timeout = httpx2.Timeout(MEMBER_TIMEOUT, read=MEMBER_TIMEOUT * 10)
    async with httpx2.AsyncClient(headers=dict(link.headers), timeout=timeout) as http:
        transport = streamable_http_client(link.url, http_client=http)
        async with Client(transport, cache=None, read_timeout_seconds=MEMBER_TIMEOUT, **options) as client:
            yield client


@dataclass(eq=False)  # kept in sets, by identity
class HeldClient:
    """A client session to a member held open in a task of its own until ``close``.

    A client's context must be entered and left in one task, so a client shared by calls made
    from many tasks lives in a task that holds it.
    """

    client: Client
    task: asyncio.Task[None]
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def alive(self) -> bool:
        """Whether the session is still open (the member may have dropped it)."""
        return not self.task.done()

    async def close(self) -> None:
        """End the session and wait (a little) for its task."""
        self.stop.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(self.task, timeout=5)


async def hold_open(link: MemberLink, name: str, **options: Any) -> HeldClient:
    """A client session to ``link`` (``options`` as ``connected`` takes them), held open by a task."""
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with connected(link, **options) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise

    task = asyncio.create_task(hold(), name=name)
    return HeldClient(await ready, task, stop)


class MemberPool:
    """Connected clients to members, one per link, shared by every call that goes there."""

    def __init__(self) -> None:
        self._held: dict[str, HeldClient] = {}
        self._opening: dict[str, asyncio.Future[HeldClient]] = {}

    async def _open(self, link: MemberLink) -> HeldClient:
        return await hold_open(link, "gateway-member-client")

    async def client(self, link: MemberLink) -> Client:
        """A connected client for ``link``, opened on first use."""
        key = link.fingerprint
        held = self._held.get(key)
        if held is not None and held.alive:
            return held.client
        pending = self._opening.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._open(link))
            self._opening[key] = pending
            try:
                held = await pending
                self._held[key] = held
            finally:
                self._opening.pop(key, None)
            return held.client
        return (await asyncio.shield(pending)).client

    async def drop(self, link: MemberLink) -> None:
        """Close the client for ``link`` (after a failure: the next call reconnects)."""
        held = self._held.pop(link.fingerprint, None)
        if held is not None:
            await held.close()

    async def call(self, link: MemberLink, action: Callable[[Client], Awaitable[Any]]) -> Any:
        """Run ``action`` on the member's client.

        A connection that cannot be made, or a session the member no longer knows (it restarted),
        is opened anew and the action tried once more: in both cases the member never ran it. Any
        other failure drops the client for the next call but is not retried, since a tool that
        writes may already have run.
        """
        client = await self.client(link)
        try:
            return await action(client)
        except MCPError as exc:
            if exc.code != INVALID_REQUEST or "session" not in exc.message.lower():
                raise
            log.info("the member forgot the gateway's session; opening a new one")
        except httpx2.ConnectError:
            log.info("reconnecting to a member")
        except BaseException:
            await self.drop(link)
            raise
        await self.drop(link)
        client = await self.client(link)
        return await action(client)

    async def close(self) -> None:
        """Close every client."""
        held, self._held = list(self._held.values()), {}
        for one in held:
            one.stop.set()
        for one in held:
            await one.close()
