"""How many calls go to one platform at once, who goes next, and when nobody goes at all.

One gate per platform URL, shared by every installation that talks to it. Calls in flight are
capped; when the cap is reached, waiting callers are served round-robin by owner (an
installation), so a 500-entity bundle queues behind itself, not in front of everyone else.

The gate is also a circuit breaker for the whole platform: a 429 or 503 with Retry-After, or a
platform that cannot be reached, closes it for everybody. While it is open no call is sent; a
caller is told at once (``CircuitOpen``) how long to wait, so reconciles report the outage and
back off instead of hammering a platform that is down. When the wait is over one call probes;
the rest wait for its outcome. Given a ``health`` check, the gate also probes on its own while it
is open (every ``probe_every`` seconds, outside the gate: one cheap call, whatever the pause): its
first success closes the circuit for everybody at once and wakes whoever waits for the platform
(``recovered``), so a fleet does not come back one backoff at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from bundle_operator.platform.errors import Unavailable

# Who the calls of the running task are made for (an installation's uid); set by reconcilers.
CALLER: ContextVar[str] = ContextVar("bundle_operator_platform_caller", default="")

DEFAULT_LIMIT = 16


class CircuitOpen(Unavailable):
    """The gate is closed for the whole platform: nothing was sent."""


@dataclass(frozen=True)
class Outcome:
    """What one call told the gate about the platform."""

    # The platform could not be reached, or answered 429/503: it needs a rest.
    overloaded: bool = False
    retry_after: float | None = None


OK = Outcome()


class CallGate:
    """A fair cap on calls in flight to one platform, with a platform-wide pause."""

    def __init__(
        self,
        limit: int = DEFAULT_LIMIT,
        *,
        first_pause: float = 1.0,
        max_pause: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        health: Callable[[], Awaitable[bool]] | None = None,
        probe_every: float = 2.0,
    ) -> None:
        if limit < 1:
            raise ValueError("the platform call limit must be at least 1")
        self.limit = limit
        self.in_flight = 0
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._first_pause = first_pause
        self._max_pause = max_pause
        self._clock = clock
        self._open_until = 0.0
        self._pause = 0.0  # the length of the last pause; doubles while probes keep failing
        self._probing = False
        self.opened = 0  # how many times the circuit opened, for tests and logs
        self._health = health
        self._probe_every = probe_every
        self._prober: asyncio.Task[None] | None = None
        self._recovered: asyncio.Event | None = None
        self.recovered_at = 0.0  # when the circuit last closed after a pause (clock seconds)

    def recovered(self) -> asyncio.Event:
        """Set when the circuit closes after a pause; a new event is handed out after that."""
        if self._recovered is None:
            self._recovered = asyncio.Event()
        return self._recovered

    def recover(self) -> None:
        """The platform answers again: close the circuit now and wake whoever waits for it."""
        self._open_until = 0.0
        self._pause = 0.0
        self.recovered_at = self._clock()
        if self._recovered is not None:
            self._recovered.set()
            self._recovered = None

    async def aclose(self) -> None:
        """Stop probing."""
        if self._prober is not None:
            self._prober.cancel()
            await asyncio.gather(self._prober, return_exceptions=True)
            self._prober = None

    def _start_probing(self) -> None:
        if self._health is None or (self._prober is not None and not self._prober.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous test): calls probe as before
        self._prober = loop.create_task(self._probe(), name="platform-probe")

    async def _probe(self) -> None:
        assert self._health is not None
        while self._paused():
            await asyncio.sleep(self._probe_every)
            try:
                up = await self._health()
            except Exception:
                up = False
            if up and self._paused():  # a call's own probe may have closed it meanwhile
                self.recover()
                return

    def _paused(self) -> bool:
        """Whether the circuit is open, or waits for the probe that follows a pause."""
        return self._pause > 0.0 or self.open_for() > 0.0

    @property
    def waiting(self) -> int:
        """Callers queued for a slot."""
        return sum(len(q) for q in self._waiting.values())

    def open_for(self) -> float:
        """Seconds until calls may go again (0 when they may)."""
        return max(0.0, self._open_until - self._clock())

    @asynccontextmanager
    async def slot(self, owner: str | None = None) -> AsyncIterator[Callable[[Outcome], None]]:
        """Hold one of the ``limit`` slots for one call; the yielded function reports its outcome."""
        self._refuse_while_open()  # before queueing: a caller learns of a pause at once
        await self._acquire(CALLER.get() if owner is None else owner)
        try:
            # Again: the circuit may have opened while this caller waited for its turn.
            probe = self._admit()
        except CircuitOpen:
            self._release()
            raise
        reported = False

        def report(outcome: Outcome) -> None:
            nonlocal reported
            reported = True
            self._observe(outcome, probe)

        try:
            yield report
        finally:
            if probe and not reported:
                self._probing = False  # cancelled mid-probe: the next caller probes
            self._release()

    # --- circuit ---------------------------------------------------------------------------------

    def _refuse_while_open(self) -> None:
        wait = self.open_for()
        if wait > 0:
            raise CircuitOpen(
                f"the platform asked for a pause or could not be reached; no call is sent for "
                f"{wait:.0f} s more",
                code="circuit_open",
                retry_after=wait,
            )

    def _admit(self) -> bool:
        """Whether the caller may send at all; True when it is the probe after a pause."""
        self._refuse_while_open()
        if self._pause == 0.0:
            return False
        if self._probing:
            raise CircuitOpen(
                "the platform is being probed after an outage; no other call is sent until it answers",
                code="circuit_open",
                retry_after=self._first_pause,
            )
        self._probing = True
        return True

    def _observe(self, outcome: Outcome, probe: bool) -> None:
        if outcome.overloaded:
            if outcome.retry_after is not None:
                pause = min(max(outcome.retry_after, 0.0), self._max_pause)
            else:
                pause = min(self._max_pause, max(self._first_pause, self._pause * 2))
            self._pause = max(pause, self._first_pause)
            until = self._clock() + pause
            if until > self._open_until:
                self._open_until = until
                self.opened += 1
            self._start_probing()
        elif self._pause and self.open_for() == 0.0:
            self.recover()  # the probe after the pause went through
        if probe:
            self._probing = False

    # --- fair limit ------------------------------------------------------------------------------

    async def _acquire(self, owner: str) -> None:
        if self.in_flight < self.limit and not self._waiting:
            self.in_flight += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(owner, deque()).append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # granted just as the caller gave up: pass the slot on
            else:
                self._forget(owner, future)
            raise

    def _forget(self, owner: str, future: asyncio.Future[None]) -> None:
        queue = self._waiting.get(owner)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self._waiting[owner]

    def _release(self) -> None:
        while self._waiting:
            # The owner that waited longest since its last turn goes; it rejoins the back of the line.
            owner, queue = next(iter(self._waiting.items()))
            future = queue.popleft()
            if queue:
                self._waiting.move_to_end(owner)
            else:
                del self._waiting[owner]
            if not future.done():
                future.set_result(None)  # the slot passes on; in_flight stays the same
                return
        self.in_flight -= 1
