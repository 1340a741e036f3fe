"""One platform client per (URL, token), shared by every installation that talks to it; one call
gate per platform URL, and one table of shared lists per (URL, token)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable

import httpx

from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.gate import DEFAULT_LIMIT, CallGate
from bundle_operator.platform.sharing import SharedReads

# Seconds: a platform that does not answer its health route this fast is not back yet.
PROBE_TIMEOUT = 2.0


class PlatformPool:
    """Hands out clients and closes them all at shutdown."""

    def __init__(
        self,
        *,
        concurrency: int = DEFAULT_LIMIT,
        transport: Callable[[], httpx.AsyncBaseTransport] | None = None,
    ) -> None:
        # A new transport per client (each has its own connection pool), e.g. one that counts calls.
        self._transport = transport
        self._clients: dict[tuple[str, str], PlatformClient] = {}
        self.concurrency = concurrency
        self.gates: dict[str, CallGate] = {}
        self.shared: dict[str, SharedReads] = {}
        self._closing: set[asyncio.Future[None]] = set()
        self.max_clients = 64

    def get(self, url: str, token: str | None) -> PlatformClient:
        """The client for ``url`` with ``token``; a rotated token gets a new client."""
        # The token is only a dictionary key here, hashed so it does not sit in the key as text.
        base = url.rstrip("/")
        key = (base, hashlib.sha256((token or "").encode()).hexdigest())
        client = self._clients.pop(key, None)
        if client is None:
            # The platform's capacity is one per URL, so is its gate; what a list returns depends on
            # the token, so lists are shared only among the users of one token.
            client = PlatformClient(
                url,
                token=token,
                transport=self._transport() if self._transport is not None else None,
                gate=self._gate(base),
                shared=self.shared.setdefault(f"{base.lower()}|{key[1]}", SharedReads()),
            )
        self._clients[key] = client  # most recently used last
        while len(self._clients) > self.max_clients:
            # Rotated tokens leave old clients behind; the least recently used one goes.
            oldest = self._clients.pop(next(iter(self._clients)))
            self._closing.add(asyncio.ensure_future(oldest.aclose()))
        return client

    def _gate(self, base: str) -> CallGate:
        gate = self.gates.get(base.lower())
        if gate is None:
            gate = CallGate(self.concurrency, health=lambda: self._healthy(base))
            self.gates[base.lower()] = gate
        return gate

    def gate_for(self, url: str) -> CallGate | None:
        """The call gate of the platform at ``url``, once a client for it exists."""
        return self.gates.get(url.rstrip("/").lower())

    async def _healthy(self, base: str) -> bool:
        """The half-open probe of a platform's circuit: its health route answers 200."""
        transport = self._transport() if self._transport is not None else None
        async with httpx.AsyncClient(transport=transport, timeout=PROBE_TIMEOUT) as http:
            response = await http.get(f"{base}/healthz")
        return response.status_code == 200

    def forget(self, owner: str) -> None:
        """Drop what the shared lists know about an installation that is gone."""
        for shared in self.shared.values():
            shared.forget(owner)

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        for gate in self.gates.values():
            await gate.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
