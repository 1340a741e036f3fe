"""The gateway's audit of tool calls, kept in the platform's database (DESIGN.md §9.4).

Each call (who, endpoint, presented tool, outcome, duration, time; never an argument) is queued in
memory and written in batches by one task, so a tool call never waits for the database; the queue is
written before the audit is read and when the platform stops. Retention is bounded by count and by
age, and every text a row holds by length, so no request makes a row larger than a few KiB. The
audit route pages newest first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiohttp import web

from bundle_operator.document.issues import cut_short
from bundle_operator.platform.conventions import MAX_LIMIT
from bundle_operator.reference_platform.gateway_metrics import UNKNOWN_TOOL, GatewayMetrics
from bundle_operator.reference_platform.gateway_oauth import MAX_SUBJECT, Principal
from bundle_operator.reference_platform.gateway_rules import MAX_PRESENTED_NAME
from bundle_operator.reference_platform.gateway_view import EndpointView
from bundle_operator.reference_platform.http import json_response, workspace
from bundle_operator.reference_platform.problems import refused
from bundle_operator.reference_platform.storage import Store, Tx, now_iso

audit_log = logging.getLogger("bundle_operator.platform.audit")

DEFAULT_MAX_ENTRIES = 100_000
DEFAULT_MAX_AGE = timedelta(days=30)
FLUSH_SECONDS = 0.25
PAGE_DEFAULT = 100
# The longest text a row stores per field; longer text keeps this prefix and an ellipsis.
MAX_NAME = MAX_PRESENTED_NAME
MAX_WHO = len("client:") + MAX_SUBJECT
MAX_ERROR = 1024


@dataclass(frozen=True)
class AuditCall:
    """One tool call being audited: where it came in, what it named, who sent it, when it began."""

    view: EndpointView
    presented: str
    tool: Any = None  # the served tool (its member and name at the member), when there is one
    started: float = 0.0  # time.perf_counter() when the call came in
    principal: Principal | None = None


@dataclass(frozen=True)
class Retention:
    """How much audit the platform keeps."""

    max_entries: int = DEFAULT_MAX_ENTRIES
    max_age: timedelta = DEFAULT_MAX_AGE


class AuditLog:
    """Tool calls through the gateway, written to the database in batches."""

    def __init__(
        self, store: Store, retention: Retention = Retention(), metrics: GatewayMetrics | None = None
    ) -> None:
        self.store = store
        self.retention = retention
        self.metrics = metrics or GatewayMetrics()
        self._pending: list[tuple[str, str, str, str]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Write queued entries as they come."""
        self._task = asyncio.create_task(self._writer(), name="gateway-audit-writer")

    async def stop(self) -> None:
        """Write what is queued and stop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self.flush()

    def record(self, call: AuditCall, outcome: str, error: str | None) -> None:
        """Queue one tool call (never its arguments) and log it."""
        view, presented, tool, principal = call.view, call.presented, call.tool, call.principal
        started = call.started
        at = time.time()
        seconds = time.perf_counter() - started
        known = tool is not None or (outcome == "rate_limited" and presented in view.tools)
        self.metrics.tool_call(view.name, presented if known else UNKNOWN_TOOL, outcome, seconds)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"
        # The wire form of GatewayAuditEntry, built by hand: this runs on every tool call.
        public = {
            "at": stamp,
            "bundle": view.bundle_name,
            "endpoint": view.name,
            "who": bounded(principal.who, MAX_WHO) if principal is not None else None,
            "presented_name": bounded(presented, MAX_NAME),
            "member": bounded(getattr(tool, "member", None), MAX_NAME),
            "tool": bounded(getattr(tool, "tool", None), MAX_NAME),
            "duration_ms": round(seconds * 1000, 3),
            "outcome": outcome,
            "error": bounded(error, MAX_ERROR),
        }
        self._pending.append((view.workspace, view.bundle_id, stamp, json.dumps(public)))
        self._wake.set()
        if audit_log.isEnabledFor(logging.DEBUG):
            # The database holds the audit; the log repeats it only at DEBUG level.
            audit_log.debug(
                "gateway.tool_call %s %s -> %s",
                view.bundle_name,
                public["presented_name"],
                outcome,
                extra={"audit": public},
            )

    async def flush(self) -> None:
        """Write every queued entry now, and apply the retention."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        keep, since = self.retention.max_entries, now_iso(self.retention.max_age)
        await self.store.transact(lambda tx: tx.append_audit(batch, keep, since))

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(FLUSH_SECONDS)  # a burst of calls becomes one transaction
            try:
                await self.flush()
            except Exception:
                audit_log.exception("could not write the gateway audit")

    async def route(self, request: web.Request) -> web.Response:
        """GET .../gateway-bundles/{id}/audit: its tool calls, newest first (``limit``, ``cursor``)."""
        ws = workspace(request)
        bundle_id = request.match_info["bundle_id"]
        limit = _number(request.query.get("limit"), "limit", PAGE_DEFAULT, 1, MAX_LIMIT)
        cursor = request.query.get("cursor")
        before = _number(cursor, "cursor", 0, 1, 2**62) if cursor else None
        await self.flush()

        def read(tx: Tx) -> list[tuple[int, str]]:
            return tx.audit_page(ws, bundle_id, before, limit + 1)

        rows = await self.store.transact(read)
        items = [json.loads(entry) for _, entry in rows[:limit]]
        following = str(rows[limit - 1][0]) if len(rows) > limit else None
        return json_response({"items": items, "next_cursor": following})


def bounded(text: str | None, limit: int) -> str | None:
    """``text`` when it has at most ``limit`` characters, else its first ``limit`` and an ellipsis."""
    return None if text is None else cut_short(text, limit)


def _number(text: str | None, name: str, default: int, low: int, high: int) -> int:
    if text is None:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        raise refused(name, f"must be a whole number from {low} to {high}")
    return int(text)
