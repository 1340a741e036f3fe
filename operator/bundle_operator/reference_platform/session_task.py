"""A streamable-HTTP session manager run in a task of its own, and the handshake-era sessions it keeps.

An endpoint's MCP server and a stdio instance's loopback bridge both serve over the SDK's session
manager, which must run inside an ``async with`` for as long as it serves; and both tell
handshake-era sessions of list changes on the session itself, so they keep those sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable
from typing import Any, Protocol

from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


class _Runs(Protocol):
    def run(self) -> contextlib.AbstractAsyncContextManager[Any]: ...


class ManagerTask:
    """Runs a session manager until ``close``."""

    def __init__(self, manager: _Runs, name: str) -> None:
        self.manager, self.name = manager, name
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start serving; returns once the manager runs (raises what stopped it from starting)."""
        ready = asyncio.Event()

        async def run() -> None:
            async with self.manager.run():
                ready.set()
                await self.stop.wait()

        self.task = asyncio.create_task(run(), name=self.name)
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({self.task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self.task.done():
            self.task.result()

    async def close(self) -> None:
        """Stop serving; open sessions end."""
        self.stop.set()
        if self.task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.task, timeout=5)


class AnnouncingServer(Server[Any]):
    """An SDK ``Server`` whose handshake-era ``initialize`` says that all three lists can change.

    The session manager asks for initialization options without arguments, which would advertise
    no ``listChanged``; on the 2026-07-28 wire the flags follow from serving subscriptions/listen.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        every_list = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(
            notification_options or every_list, experimental_capabilities, extensions
        )


def keep_legacy_session(
    sessions: dict[Any, ServerSession],
    key: Hashable,
    method: str,
    protocol_version: str | None,
    session: ServerSession,
    most: int,
) -> None:
    """Keep a handshake-era session once it is initialized, at most ``most`` (the oldest go): the
    SDK makes the session object per message, and list changes reach such a session only on it."""
    if method == "notifications/initialized" and protocol_version not in MODERN_PROTOCOL_VERSIONS:
        sessions[key] = session
        while len(sessions) > most:
            del sessions[next(iter(sessions))]
