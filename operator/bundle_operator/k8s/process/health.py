"""Liveness and readiness probes of the operator.

Liveness means the operator is still doing its work, not merely that the process is up. It fails
on any of three wedges, each named in the probe's answer:

- the event loop has not run for ``loop_stall_after`` seconds (a handler blocks it): the probes
  are served from a thread of their own, so they still answer, and say so;
- a watch stream has left changes undelivered past its timeout (watch_lag.py);
- no watch event, timer run, reconcile or API server answer for ``stale_after`` seconds.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_STALE_AFTER = 300.0
DEFAULT_LOOP_STALL_AFTER = 30.0
TICK_SECONDS = 1.0


class Liveness:
    """When the operator last showed it was working; ``clock`` is monotonic seconds."""

    def __init__(
        self,
        stale_after: float = DEFAULT_STALE_AFTER,
        clock: Callable[[], float] = time.monotonic,
        loop_stall_after: float = DEFAULT_LOOP_STALL_AFTER,
    ) -> None:
        if stale_after <= 0 or loop_stall_after <= 0:
            raise ValueError("stale_after and loop_stall_after must be positive")
        self.stale_after = stale_after
        self.loop_stall_after = loop_stall_after
        self._clock = clock
        self._started = clock()
        self._last_touch: float | None = None
        self._last_tick: float | None = None
        self._watch_problem: str | None = None

    def touch(self) -> None:
        """Record a sign of work: a watch event, a timer run or a successful reconcile."""
        self._last_touch = self._clock()

    def tick(self) -> None:
        """The event loop ran (``ticking`` calls this every second)."""
        self._last_tick = self._clock()

    def watch_lag(self, problem: str | None) -> None:
        """What the last watch check found: a wedged stream, or None."""
        self._watch_problem = problem

    def problem(self, now: float | None = None) -> str | None:
        """Why the operator is not healthy, in one line; None when it is."""
        now = self._clock() if now is None else now
        if self._last_tick is not None and now - self._last_tick > self.loop_stall_after:
            return (
                f"the event loop has not run for {now - self._last_tick:.0f}s "
                f"(limit {self.loop_stall_after:.0f}s): something blocks it"
            )
        if self._watch_problem is not None:
            return self._watch_problem
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
        """True when ``problem`` finds nothing."""
        return self.problem(now) is None


async def ticking(liveness: Liveness, every: float = TICK_SECONDS) -> None:
    """Tick ``liveness`` from the event loop for as long as the loop runs."""
    while True:
        liveness.tick()
        await asyncio.sleep(every)


class HealthServer:
    """``/healthz`` and ``/readyz`` on a thread of their own: they answer while the loop is blocked."""

    def __init__(self, host: str, port: int, liveness: Liveness, ready: Callable[[], bool]) -> None:
        class Probes(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    problem = liveness.problem()
                    self._answer(200 if problem is None else 503, problem or "ok")
                elif self.path == "/readyz":
                    try:
                        is_ready = ready()
                    except Exception as exc:  # a broken check must answer, not crash the server
                        self._answer(503, f"readiness check failed ({type(exc).__name__})")
                        return
                    self._answer(200 if is_ready else 503, "ok" if is_ready else "not ready")
                else:
                    self._answer(404, "not found")

            def _answer(self, status: int, text: str) -> None:
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # no access log: the kubelet probes every few seconds

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET  # --probe-host ::
            daemon_threads = True

        self._server = Server((host, port), Probes)
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-probes", daemon=True)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Where the probes listen (the port the system picked for port 0)."""
        host, port = self._server.server_address[:2]
        return [(str(host), int(port))]

    def start(self) -> None:
        """Serve in the background."""
        self._thread.start()

    async def cleanup(self) -> None:
        """Stop serving."""
        await asyncio.to_thread(self._server.shutdown)
        self._server.server_close()


async def serve_health(host: str, port: int, liveness: Liveness, ready: Callable[[], bool]) -> HealthServer:
    """Serve ``/healthz`` (liveness) and ``/readyz`` (``ready()``); call ``cleanup()`` to stop.

    With ``port=0`` the system picks a free port: read it from ``addresses``.
    """
    server = HealthServer(host, port, liveness, ready)
    server.start()
    return server
