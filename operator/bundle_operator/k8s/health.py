"""Liveness and readiness probes of the operator.

Liveness means the operator is still doing its work, not merely that the process is up: the
kopf wiring calls ``Liveness.touch()`` on every watch event, timer run and successful reconcile.
The drift timers run every few minutes, so a healthy operator touches well within ``stale_after``
even in a quiet cluster; one whose watch stream has silently stalled stops touching and is
restarted by the kubelet.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

DEFAULT_STALE_AFTER = 300.0


class Liveness:
    """When the operator last showed it was working; ``clock`` is monotonic seconds."""

    def __init__(
        self, stale_after: float = DEFAULT_STALE_AFTER, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if stale_after <= 0:
            raise ValueError("stale_after must be positive")
        self.stale_after = stale_after
        self._clock = clock
        self._started = clock()
        self._last_touch: float | None = None

    def touch(self) -> None:
        """Record a sign of work: a watch event, a timer run or a successful reconcile."""
        self._last_touch = self._clock()

    def problem(self, now: float | None = None) -> str | None:
        """Why the operator is not healthy, in one line; None when it is."""
        now = self._clock() if now is None else now
        if now - self._started < self.stale_after:
            return None
        if self._last_touch is None:
            return (
                f"no watch event, timer run or reconcile since the start {now - self._started:.0f}s ago "
                f"(limit {self.stale_after:.0f}s)"
            )
        idle = now - self._last_touch
        if idle < self.stale_after:
            return None
        return f"no watch event, timer run or reconcile for {idle:.0f}s (limit {self.stale_after:.0f}s)"

    def healthy(self, now: float | None = None) -> bool:
        """True after a touch within ``stale_after`` seconds, or while the operator is younger."""
        return self.problem(now) is None


async def serve_health(host: str, port: int, liveness: Liveness, ready: Callable[[], bool]) -> web.AppRunner:
    """Serve ``/healthz`` (liveness) and ``/readyz`` (``ready()``); call ``cleanup()`` to stop.

    With ``port=0`` the system picks a free port: read it from ``runner.addresses``.
    """

    async def healthz(request: web.Request) -> web.Response:
        problem = liveness.problem()
        if problem is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=problem)

    async def readyz(request: web.Request) -> web.Response:
        try:
            is_ready = ready()
        except Exception as exc:  # a broken check must answer, not crash the probe server
            return web.Response(status=503, text=f"readiness check failed ({type(exc).__name__})")
        if is_ready:
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    # No access log: the kubelet probes every few seconds.
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
