"""The platform's own processes: one per command instance with an artifact, while it is used.

A process starts on first use (its tree checked first, stdio_launch.py) and is held as one MCP
client session over the SDK's stdio client. It stops after ``idle_seconds`` without use, when its
instance, server spec or secrets change, and at shutdown. One that exits on its own is ``crashed``
and started again on the next use, no sooner than a backoff that doubles from ``first_backoff`` to
``max_backoff``; meanwhile a use fails at once with the reason. Each instance's health is kept
here, in memory, for the API to show.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from bundle_operator.platform import kinds
from bundle_operator.reference_platform.member_probe import error_text
from bundle_operator.reference_platform.stdio_launch import (
    FindArtifact,
    Launch,
    LaunchRefused,
    LaunchSpec,
    check_unchanged,
    launch_spec,
    resolve,
)
from bundle_operator.reference_platform.storage import Store, Tx

log = logging.getLogger("bundle_operator.platform.stdio")

DEFAULT_IDLE_SECONDS = 300.0
DEFAULT_TREE_CHECK_SECONDS = 60.0
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 60.0
# How long a request to the process may take before the call fails (as for a url member).
REQUEST_TIMEOUT = 30.0
# A process that ran this long before it exited is a fresh crash, not one more in a series.
STABLE_SECONDS = MAX_BACKOFF
# How much of the end of a process's stderr a crash message may quote.
_STDERR_TAIL = 400

# A server's notification (list changes, log messages), told with the instance it came from.
Notify = Callable[[str, Any], Awaitable[None]]
# Told when an instance cannot serve: its id and the reason (for a gateway member's health).
Unhealthy = Callable[[str, str], None]


class InstanceUnavailable(Exception):
    """The instance's process is not there to serve; the message says why (no secret in it)."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass(eq=False)
class _Held:
    """One running process and the client session to it, held open by a task of its own."""

    client: Client
    task: asyncio.Task[None]
    started: float
    stop: asyncio.Event
    ended: asyncio.Event  # the process's stdout closed: it exited

    @property
    def alive(self) -> bool:
        return not self.ended.is_set() and not self.task.done()

    async def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            # The SDK's shutdown waits 2 s for an exit, then 2 s more after SIGTERM before SIGKILL.
            await asyncio.wait_for(asyncio.shield(self.task), timeout=10)


@dataclass(eq=False)
class _Slot:
    """What the runner knows of one instance."""

    workspace: str
    instance_id: str
    state: str = "idle"
    message: str = "not started yet"
    checked_at: str = field(default_factory=_now)
    held: _Held | None = None
    fingerprint: str | None = None
    failures: int = 0
    retry_at: float = 0.0
    last_used: float = 0.0
    busy: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    listings: dict[str, Any] = field(default_factory=dict)
    spec: LaunchSpec | None = None

    def record(self, state: str, message: str) -> None:
        self.state, self.message, self.checked_at = state, message, _now()

    def health(self) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "checked_at": self.checked_at}


@contextlib.asynccontextmanager
async def _watched(params: StdioServerParameters, errlog: TextIO, ended: asyncio.Event) -> AsyncIterator[Any]:
    """The SDK's stdio transport, with ``ended`` set once the process's stdout closes."""
    async with stdio_client(params, errlog=errlog) as (read, write):
        relay_send, relay_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            try:
                async with relay_send:
                    async for message in read:
                        await relay_send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield relay_receive, write
            finally:
                group.cancel_scope.cancel()


class StdioRunner:
    """Every instance process of the platform, their health, and what their servers list."""

    def __init__(
        self,
        store: Store,
        find: FindArtifact,
        *,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        first_backoff: float = FIRST_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        tree_check_seconds: float = DEFAULT_TREE_CHECK_SECONDS,
    ) -> None:
        self.store = store
        self.homes = Path()
        self.find = find
        self.idle_seconds = idle_seconds
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.tree_check_seconds = tree_check_seconds
        self.notify: Notify | None = None
        self.unhealthy: Unhealthy = lambda _instance, _reason: None
        self.gone: Callable[[str], Awaitable[None]] | None = None
        self._closed = False
        self._slots: dict[str, _Slot] = {}
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, homes: Path) -> None:
        """Follow the store (changed or deleted instances stop) and stop idle processes.

        ``homes`` holds each instance's private folder (``${HOME}``) and its server's stderr; it is
        made on the first launch.
        """
        self.homes = homes
        self.store.listen(lambda _generation: self._changed.set())
        self._tasks = [
            asyncio.create_task(self._follow(), name="stdio-follow"),
            asyncio.create_task(self._reap(), name="stdio-reap"),
            asyncio.create_task(self._guard(), name="stdio-guard"),
        ]

    async def close(self) -> None:
        """Stop every process and wait for each to exit (no process outlives the platform)."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await asyncio.gather(*(self._close_slot(slot) for slot in list(self._slots.values())))

    async def _close_slot(self, slot: _Slot) -> None:
        # Under the slot's lock: a start under way finishes first, and its process is stopped too.
        async with slot.lock:
            held, slot.held = slot.held, None
            if held is not None:
                await held.close()

    def health(self, instance_id: str) -> dict[str, Any] | None:
        """The instance's health as last seen, or None before the runner ever looked at it."""
        slot = self._slots.get(instance_id)
        return slot.health() if slot is not None else None

    # --- use ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def using(self, workspace: str, instance_id: str) -> AsyncIterator[Client]:
        """The instance's client session, its process started first if need be; it counts as use."""
        slot = self._slot(workspace, instance_id)
        slot.busy += 1
        try:
            yield await self._ensure(slot)
        finally:
            slot.busy -= 1
            slot.last_used = asyncio.get_running_loop().time()

    async def listing(
        self, workspace: str, instance_id: str, what: str, fetch: Callable[[Client], Awaitable[Any]]
    ) -> Any:
        """What the server lists under ``what``, from the last listing while the instance is healthy.

        Periodic discovery must not keep an idle process alive, nor start one for nothing; a
        listing is fetched again after the server says the list changed or the spec changed. An
        instance that could not run is tried again instead, so its health is told truly.
        """
        slot = self._slot(workspace, instance_id)
        if what in slot.listings and slot.state in ("idle", "running", "crashed"):
            return slot.listings[what]
        async with self.using(workspace, instance_id) as client:
            listed = await fetch(client)
        slot.listings[what] = listed
        return listed

    def scrub(self, instance_id: str, text: str) -> str:
        """``text`` with the instance's secret values blanked out."""
        slot = self._slots.get(instance_id)
        return slot.spec.scrub(text) if slot is not None and slot.spec is not None else text

    def _slot(self, workspace: str, instance_id: str) -> _Slot:
        slot = self._slots.get(instance_id)
        if slot is None or slot.workspace != workspace:
            slot = _Slot(workspace, instance_id)
            self._slots[instance_id] = slot
        return slot

    async def _ensure(self, slot: _Slot) -> Client:
        held = slot.held
        if held is not None and held.alive:
            return held.client
        async with slot.lock:
            held = slot.held
            if held is not None and held.alive:
                return held.client
            if held is not None:
                await self._crashed(slot, held)
            if self._closed:
                raise InstanceUnavailable("failed", "failed: the platform is shutting down")
            loop = asyncio.get_running_loop()
            wait = slot.retry_at - loop.time()
            if wait > 0:
                raise InstanceUnavailable(slot.state, f"{slot.message}; it is started again in {wait:.0f} s")
            spec = await self.store.transact(lambda tx: _spec(tx, slot, self.find))
            if spec is None:
                raise InstanceUnavailable("failed", "failed: the platform does not run this instance")
            if isinstance(spec, LaunchRefused):
                self._refused(slot, spec)
            slot.spec = spec
            slot.fingerprint = spec.fingerprint
            try:
                # The health keeps its last state while the tree is checked: a refused tree
                # checked again by discovery is not shown as starting meanwhile.
                launch = await asyncio.to_thread(resolve, spec, self.homes)
            except LaunchRefused as refused:
                self._refused(slot, refused)
            slot.record("starting", "starting its server")
            try:
                slot.held = await self._open(slot, spec, launch)
            except Exception as exc:
                reason = spec.scrub(error_text(exc))
                self._backoff(
                    slot, "failed", f"failed: the server did not start: {reason}{self._stderr(slot)}"
                )
                raise InstanceUnavailable("failed", slot.message) from None
            slot.last_used = loop.time()
            slot.record("running", f"process running ({spec.runtime})")
            log.info("started the server of the MCP instance %s", slot.instance_id)
            return slot.held.client

    def _refused(self, slot: _Slot, refused: LaunchRefused) -> NoReturn:
        """Record a launch that was refused (nothing ran) and raise it as unavailable."""
        state = "tree_changed" if refused.code == "tree_changed" else "failed"
        slot.record(state, f"{refused.code}: {refused.reason}")
        slot.listings.clear()
        log.warning("the MCP instance %s was not started: %s", slot.instance_id, slot.message)
        self.unhealthy(slot.instance_id, slot.message)
        raise InstanceUnavailable(state, slot.message)

    def _backoff(self, slot: _Slot, state: str, message: str) -> None:
        loop = asyncio.get_running_loop()
        delay = min(self.max_backoff, self.first_backoff * 2**slot.failures)
        slot.failures += 1
        slot.retry_at = loop.time() + delay
        slot.record(state, message)
        log.warning("the MCP instance %s: %s", slot.instance_id, message)
        if state == "failed":
            # A crash is not: the next use starts the server again (discovery keeps its listing).
            self.unhealthy(slot.instance_id, message)

    async def _crashed(self, slot: _Slot, held: _Held) -> None:
        """The process exited on its own: record it once, with backoff before the next start."""
        if slot.held is not held:
            return
        slot.held = None
        await held.close()
        if asyncio.get_running_loop().time() - held.started > STABLE_SECONDS:
            slot.failures = 0
        self._backoff(slot, "crashed", f"crashed: the server's process exited{self._stderr(slot)}")

    def _forget_files(self, slot: _Slot) -> None:
        """Remove the private folder and stderr of an instance that is gone (nothing else reads them)."""
        shutil.rmtree(self.homes / slot.instance_id, ignore_errors=True)
        self._stderr_path(slot).unlink(missing_ok=True)

    def _stderr_path(self, slot: _Slot) -> Path:
        return self.homes / f"{slot.instance_id}.stderr"

    def _stderr(self, slot: _Slot) -> str:
        """The last line the process wrote to stderr, secrets blanked, as a message's tail."""
        try:
            with self._stderr_path(slot).open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - _STDERR_TAIL))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        if not lines:
            return ""
        last = slot.spec.scrub(lines[-1]) if slot.spec is not None else lines[-1]
        return f" (its last words: {last[:200]})"

    async def _open(self, slot: _Slot, spec: LaunchSpec, launch: Launch) -> _Held:
        params = StdioServerParameters(
            command=launch.command, args=launch.args, env=launch.env, cwd=launch.cwd
        )
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        stop, ended = asyncio.Event(), asyncio.Event()
        instance_id = slot.instance_id

        async def on_message(message: Any) -> None:
            method = getattr(message, "method", None) or getattr(
                getattr(message, "root", None), "method", None
            )
            if isinstance(method, str) and method.endswith("/list_changed"):
                slot.listings.pop(method.split("/")[1], None)
            if self.notify is not None:
                await self.notify(instance_id, message)

        async def on_log(params: Any) -> None:
            if self.notify is not None:
                await self.notify(instance_id, params)

        async def hold() -> None:
            fd = os.open(self._stderr_path(slot), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as errlog:
                try:
                    transport = _watched(params, errlog, ended)
                    async with Client(
                        transport,
                        cache=None,
                        read_timeout_seconds=REQUEST_TIMEOUT,
                        message_handler=on_message,
                        logging_callback=on_log,
                        log_level="debug",
                    ) as client:
                        ready.set_result(client)
                        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(ended.wait())]
                        try:
                            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            for one in waits:
                                one.cancel()
                except BaseException as exc:
                    if not ready.done():
                        ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
                    if isinstance(exc, asyncio.CancelledError):
                        raise
            if ended.is_set() and not stop.is_set():
                # Seen at once, not on the next use: the health tells it meanwhile.
                asyncio.get_running_loop().call_soon(self._schedule_crash, slot)

        task = asyncio.create_task(hold(), name=f"stdio-{instance_id}")
        client = await ready
        return _Held(client, task, asyncio.get_running_loop().time(), stop, ended)

    def _schedule_crash(self, slot: _Slot) -> None:
        held = slot.held
        if held is not None and not held.alive:
            task = asyncio.create_task(self._crash_now(slot, held))
            self._tasks.append(task)
            task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _crash_now(self, slot: _Slot, held: _Held) -> None:
        async with slot.lock:
            await self._crashed(slot, held)

    # --- stopping ----------------------------------------------------------------------------

    async def _stop(self, slot: _Slot, message: str) -> None:
        held, slot.held = slot.held, None
        if held is not None:
            await held.close()
            log.info("stopped the server of the MCP instance %s", slot.instance_id)
        slot.failures = 0  # it served until stopped: a later crash starts a new series
        slot.record("idle", message)

    async def _reap(self) -> None:
        """Stop each process that went ``idle_seconds`` without use."""
        tick = max(0.05, min(1.0, self.idle_seconds / 4))
        while True:
            await asyncio.sleep(tick)
            now = asyncio.get_running_loop().time()
            for slot in list(self._slots.values()):
                held = slot.held
                if held is None or not held.alive or slot.busy or now - slot.last_used < self.idle_seconds:
                    continue
                async with slot.lock:
                    if slot.held is held and not slot.busy:
                        await self._stop(slot, f"stopped after {self.idle_seconds:g} s without use")

    async def _guard(self) -> None:
        """Check the tree of each running process again every ``tree_check_seconds``: a file changed
        under a running server stops it at once, instead of at its next launch."""
        while True:
            await asyncio.sleep(self.tree_check_seconds)
            for slot in list(self._slots.values()):
                held, spec = slot.held, slot.spec
                if held is None or not held.alive or spec is None:
                    continue
                try:
                    await asyncio.to_thread(check_unchanged, spec)
                except LaunchRefused as refused:
                    async with slot.lock:
                        if slot.held is held:
                            await self._stop(slot, "stopped: its tree changed")
                            with contextlib.suppress(InstanceUnavailable):
                                self._refused(slot, refused)
                except Exception:
                    log.exception("cannot check the tree of the MCP instance %s", slot.instance_id)

    async def _follow(self) -> None:
        """Stop what a write made stale: a deleted instance, a changed spec, env or secret."""
        while True:
            await self._changed.wait()
            await asyncio.sleep(0.05)  # writes come in bursts
            self._changed.clear()
            slots = list(self._slots.values())
            try:
                now = await self.store.transact(functools.partial(_fingerprints, slots, self.find))
            except Exception:
                log.exception("cannot read the MCP instances the platform runs")
                continue
            for slot in slots:
                current = now.get(slot.instance_id)
                if current is not None and current == slot.fingerprint:
                    continue
                async with slot.lock:
                    if current is None:
                        await self._stop(
                            slot, "stopped: the instance is gone or no longer run by the platform"
                        )
                        self._slots.pop(slot.instance_id, None)
                        await asyncio.to_thread(self._forget_files, slot)
                        if self.gone is not None:
                            await self.gone(slot.instance_id)
                    elif slot.fingerprint is not None:
                        await self._stop(slot, "stopped: its instance, server spec or secrets changed")
                        slot.fingerprint, slot.failures, slot.retry_at = None, 0, 0.0
                        slot.listings.clear()


def _spec(tx: Tx, slot: _Slot, find: FindArtifact) -> LaunchSpec | LaunchRefused | None:
    instance = tx.get(slot.workspace, kinds.MCP_INSTANCES.path, slot.instance_id)
    return launch_spec(tx, instance, find) if instance is not None else None


def _fingerprints(slots: list[_Slot], find: FindArtifact, tx: Tx) -> dict[str, str | None]:
    return {slot.instance_id: _fingerprint(tx, slot, find) for slot in slots}


def _fingerprint(tx: Tx, slot: _Slot, find: FindArtifact) -> str | None:
    """The launch's fingerprint now; a refusal's own text stands for it, None when not run at all."""
    spec = _spec(tx, slot, find)
    if spec is None:
        return None
    return spec.fingerprint if isinstance(spec, LaunchSpec) else f"refused:{spec}"
