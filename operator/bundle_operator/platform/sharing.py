"""List results shared by every installation of one workspace.

A hundred installations in one workspace that check drift each list the same collections. Here
those lists are made once and shared: a caller gets a list (finished or still in flight) that
started no earlier than its ``ReadPolicy`` allows, and otherwise starts one that later callers
may join. A caller never gets a list that started before its own last write to the workspace
finished, so it always sees what it wrote; a failed write (a 412 after someone's edit, say)
counts too, so the next plan reads the platform again.

Entities are shared read-only: callers project them into new dicts and never change them.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from bundle_operator.platform.gate import CALLER


@dataclass(frozen=True)
class ReadPolicy:
    """Which shared lists a reconcile may use: those that started at ``not_before`` or later."""

    not_before: float


# Set by a reconcile for the calls it makes; without one every list goes to the platform.
READ_POLICY: ContextVar[ReadPolicy | None] = ContextVar("bundle_operator_read_policy", default=None)

# How long a finished list stays shared (real seconds, not the policy clock); a failed one goes at
# once. (Writes are kept until their owner is forgotten: a long drift interval still needs them.)
KEEP_FINISHED_SECONDS = 30.0


@dataclass
class _Entry:
    started: float
    task: asyncio.Task[Any]


class SharedReads:
    """Shared list results of one platform, per workspace and collection (and filters)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._writes: dict[tuple[str, str], float] = {}
        self.hits = 0
        self.misses = 0

    def now(self) -> float:
        """The clock the policies are on."""
        return self._clock()

    def wrote(self, workspace: str, owner: str | None = None) -> None:
        """Note that ``owner`` (the running caller by default) finished a write to ``workspace``."""
        owner = CALLER.get() if owner is None else owner
        if owner:
            self._writes[(owner, workspace)] = self._clock()

    def forget(self, owner: str) -> None:
        """Drop what is known about an owner that is gone."""
        for key in [k for k in self._writes if k[0] == owner]:
            del self._writes[key]

    async def read(
        self,
        workspace: str,
        what: str,
        filters: Mapping[str, str | bool] | None,
        fetch: Callable[[], Awaitable[Any]],
    ) -> Any:
        """``fetch()``'s result, shared when the running caller's policy allows."""
        policy = READ_POLICY.get()
        owner = CALLER.get()
        if policy is None or not owner:
            return await fetch()
        key = (workspace, what, _filters_key(filters))
        not_before = max(policy.not_before, self._writes.get((owner, workspace), float("-inf")))
        entry = self._entries.get(key)
        if entry is not None and entry.started >= not_before:
            self.hits += 1
        else:
            self.misses += 1
            entry = _Entry(self._clock(), asyncio.ensure_future(fetch()))
            self._entries[key] = entry
            entry.task.add_done_callback(functools.partial(self._done, key, entry))
        # One caller giving up must not cancel the list for the others that joined it.
        return await asyncio.shield(entry.task)

    def _done(self, key: tuple[str, str, str], entry: _Entry, _: object = None) -> None:
        failed = entry.task.cancelled() or entry.task.exception() is not None
        # A failure is never shared beyond those already waiting: the next caller tries again.
        if failed:
            self._drop(key, entry)
            return
        # A finished list serves the checks of its drift interval, which start together: kept for
        # ever it would hold every entity of the workspace between two intervals, the largest share
        # of a fleet's memory. A late check lists again.
        asyncio.get_running_loop().call_later(KEEP_FINISHED_SECONDS, self._drop, key, entry)

    def _drop(self, key: tuple[str, str, str], entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]


def _filters_key(filters: Mapping[str, str | bool] | None) -> str:
    return "&".join(f"{k}={v}" for k, v in sorted((filters or {}).items()))
