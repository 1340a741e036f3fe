"""Resource subscriptions through the gateway (DESIGN.md §9.6).

A client's ``resources/subscribe`` is passed on to the member serving the URI, over one client
per member that stays connected while any session wants a URI of that member, and the member's
``notifications/resources/updated`` go to every session subscribed to that URI. The member is
spoken to on the handshake wire, where ``resources/subscribe`` exists.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from bundle_operator.reference_platform.member_link import HeldClient, MemberLink, hold_open

log = logging.getLogger("bundle_operator.platform.gateway")

# Subscribed URIs a gateway holds in all (a client picks them: they are bounded like sessions).
MAX_SUBSCRIPTIONS = 4096
# The handshake wire's subscribe methods are what a member serves here, deprecated on the newer wire.
warnings.filterwarnings("ignore", "resources/(un)?subscribe is removed", MCPDeprecationWarning)

Notify = Callable[[str], Awaitable[None]]


@dataclass(eq=False)
class _Feed:
    """One member's client that carries its subscriptions, and the URIs subscribed there."""

    held: HeldClient
    uris: set[str] = field(default_factory=set)


class Subscriptions:
    """Who is subscribed to which member URI, and the member feeds that tell of updates."""

    def __init__(self, limit: int = MAX_SUBSCRIPTIONS) -> None:
        # uri -> {subscriber key -> how to tell that subscriber}
        self._subscribers: dict[str, dict[str, Notify]] = {}
        self._feeds: dict[str, _Feed] = {}
        self._member_of: dict[str, str] = {}  # uri -> feed key
        self._limit = limit

    def count(self) -> int:
        return sum(len(keys) for keys in self._subscribers.values())

    async def subscribe(self, link: MemberLink, uri: str, key: str, notify: Notify) -> None:
        """Subscribe ``key`` to ``uri`` at the member behind ``link``; errors are the member's."""
        if self.count() >= self._limit and key not in self._subscribers.get(uri, {}):
            raise MCPError(
                code=types.INTERNAL_ERROR, message=f"the gateway holds {self._limit} subscriptions already"
            )
        feed = await self._feed(link)
        if uri not in feed.uris:
            await feed.held.client.subscribe_resource(uri)
            feed.uris.add(uri)
        self._member_of[uri] = link.fingerprint
        self._subscribers.setdefault(uri, {})[key] = notify

    async def unsubscribe(self, uri: str, key: str) -> None:
        """Take ``key`` off ``uri``; the member is told when nobody wants the URI any more."""
        keys = self._subscribers.get(uri)
        if keys is None or keys.pop(key, None) is None:
            return
        if keys:
            return
        del self._subscribers[uri]
        feed = self._feeds.get(self._member_of.pop(uri, ""))
        if feed is None:
            return
        feed.uris.discard(uri)
        if feed.held.alive:
            with contextlib.suppress(Exception):
                await feed.held.client.unsubscribe_resource(uri)
        if not feed.uris:
            await self._close_feed(feed)

    async def forget(self, key_prefix: str) -> None:
        """Every subscription of the subscribers whose key starts with ``key_prefix`` (a session ended)."""
        for uri, keys in list(self._subscribers.items()):
            for key in [k for k in keys if k.startswith(key_prefix)]:
                await self.unsubscribe(uri, key)

    async def _updated(self, uri: str) -> None:
        for key, notify in list(self._subscribers.get(uri, {}).items()):
            try:
                await notify(uri)
            except Exception:
                # The session is gone: its subscriptions go with it.
                await self.unsubscribe(uri, key)

    async def _feed(self, link: MemberLink) -> _Feed:
        feed = self._feeds.get(link.fingerprint)
        if feed is not None and feed.held.alive:
            return feed

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                await self._updated(str(message.params.uri))

        held = await hold_open(
            link, "gateway-member-subscriptions", mode="legacy", message_handler=on_message
        )
        feed = _Feed(held)
        self._feeds[link.fingerprint] = feed
        return feed

    async def _close_feed(self, feed: _Feed) -> None:
        for key, known in list(self._feeds.items()):
            if known is feed:
                del self._feeds[key]
        await feed.held.close()

    async def close(self) -> None:
        """Close every member feed."""
        self._subscribers.clear()
        self._member_of.clear()
        for feed in list(self._feeds.values()):
            await self._close_feed(feed)
