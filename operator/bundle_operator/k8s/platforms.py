"""One platform client per (URL, token), shared by every installation that talks to it."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any

from bundle_operator.platform.client import PlatformClient


class PlatformPool:
    """Hands out clients and closes them all at shutdown."""

    def __init__(self, event_hooks: dict[str, list[Callable[..., Any]]] | None = None) -> None:
        self._clients: dict[tuple[str, str], PlatformClient] = {}
        self._event_hooks = event_hooks
        self._closing: set[asyncio.Future[None]] = set()
        self.max_clients = 64

    def get(self, url: str, token: str | None) -> PlatformClient:
        """The client for ``url`` with ``token``; a rotated token gets a new client."""
        # The token is only a dictionary key here, hashed so it does not sit in the key as text.
        key = (url.rstrip("/"), hashlib.sha256((token or "").encode()).hexdigest())
        client = self._clients.pop(key, None)
        if client is None:
            client = PlatformClient(url, token=token, event_hooks=self._event_hooks)
        self._clients[key] = client  # most recently used last
        while len(self._clients) > self.max_clients:
            # Rotated tokens leave old clients behind; the least recently used one goes.
            oldest = self._clients.pop(next(iter(self._clients)))
            self._closing.add(asyncio.ensure_future(oldest.aclose()))
        return client

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
