"""Whether the operator's watch streams still deliver: what the API server holds against what came.

A watch stream can go silent without closing (a half-open connection, a proxy that stopped
forwarding): kopf then waits for events that never come, and the operator looks idle while
objects change under it. The operator notes the resourceVersion of every object a watch delivers;
every ``every`` seconds it lists the same kinds (metadata only) and compares. A kind is wedged
when objects of it have changed on the API server (work is pending) and its watch has delivered
nothing at all since the first check that saw them, for longer than ``limit``: a live stream
delivers a change within moments, and even a quiet one is closed and opened again by the API
server every watch timeout. Per kind, not per object, so one object busy in a long reconcile
never counts as a dead stream.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

Key = tuple[str, str]  # namespace, name
Lister = Callable[[str], Awaitable[list[tuple[str, str, str]]]]  # plural -> (namespace, name, rv)


@dataclass
class Deliveries:
    """What the watches delivered: each object's last resourceVersion, and when each kind last spoke."""

    clock: Callable[[], float] = time.monotonic
    versions: dict[str, dict[Key, str]] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)

    def note(self, plural: str, namespace: str, name: str, resource_version: str, deleted: bool) -> None:
        """One watch event of ``plural`` (the initial listing's included)."""
        self.last[plural] = self.clock()
        seen = self.versions.setdefault(plural, {})
        if deleted:
            seen.pop((namespace, name), None)
        else:
            seen[(namespace, name)] = resource_version


@dataclass
class WatchLag:
    """Finds a kind whose watch has left changes undelivered for longer than ``limit`` seconds."""

    deliveries: Deliveries
    plurals: tuple[str, ...]
    limit: float
    # When the current stretch of undelivered changes was first seen, per kind.
    _pending_since: dict[str, float] = field(default_factory=dict)

    async def check(self, lister: Lister) -> str | None:
        """List each kind and compare; the problem in one line, or None while the watches keep up."""
        clock = self.deliveries.clock
        problems = []
        for plural in self.plurals:
            listed = await lister(plural)
            now = clock()
            behind = self._behind(plural, listed)
            if not behind:
                self._pending_since.pop(plural, None)
                continue
            since = self._pending_since.get(plural)
            if since is None or self.deliveries.last.get(plural, float("-inf")) > since:
                # First seen now, or the stream spoke since: it is alive, start the clock again.
                self._pending_since[plural] = now
                continue
            if now - since > self.limit:
                namespace, name = sorted(behind)[0]
                problems.append(
                    f"the watch of {plural} has delivered nothing for {now - since:.0f}s while "
                    f"{len(behind)} changed on the API server (first {namespace}/{name}; "
                    f"limit {self.limit:.0f}s)"
                )
        return "; ".join(problems) or None

    def _behind(self, plural: str, listed: Iterable[tuple[str, str, str]]) -> list[Key]:
        seen = self.deliveries.versions.get(plural, {})
        return [(ns, name) for ns, name, rv in listed if seen.get((ns, name)) != rv]
