"""The gateway's audit of tool calls: kept in memory per platform and written to the audit log."""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bundle_operator.platform.models import GatewayAuditEntry
from bundle_operator.reference_platform.gateway_view import EndpointView
from bundle_operator.reference_platform.http import json_response, workspace

audit_log = logging.getLogger("bundle_operator.platform.audit")

AUDIT_KEPT = 2000


@dataclass(frozen=True)
class AuditEntry:
    """One tool call through the gateway, with where it belongs; never its arguments."""

    workspace: str
    gateway_bundle_id: str
    shown: GatewayAuditEntry

    def public(self) -> dict[str, Any]:
        """The entry as the audit route shows it."""
        return self.shown.model_dump(mode="json")


class AuditLog:
    """The latest tool calls, newest last, at most ``AUDIT_KEPT`` of them."""

    def __init__(self, kept: int = AUDIT_KEPT) -> None:
        self.entries: deque[AuditEntry] = deque(maxlen=kept)

    def record(
        self,
        view: EndpointView,
        presented: str,
        tool: Any,
        started: float,
        outcome: str,
        error: str | None,
    ) -> None:
        """Record one tool call (never its arguments) in memory and in the audit log."""
        at = time.time()
        shown = GatewayAuditEntry(
            at=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z",
            bundle=view.bundle_name,
            endpoint=view.name,
            presented_name=presented,
            member=getattr(tool, "member", None),
            tool=getattr(tool, "tool", None),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            outcome=outcome,
            error=error,
        )
        entry = AuditEntry(view.workspace, view.bundle_id, shown)
        self.entries.append(entry)
        audit_log.info(
            "gateway.tool_call %s %s -> %s",
            view.bundle_name,
            presented,
            outcome,
            extra={"audit": entry.public()},
        )

    async def route(self, request: web.Request) -> web.Response:
        """GET .../gateway-bundles/{id}/audit: the latest tool calls through its endpoints."""
        ws = workspace(request)
        bundle_id = request.match_info["bundle_id"]
        mine = [e for e in reversed(self.entries) if e.workspace == ws and e.gateway_bundle_id == bundle_id]
        entries = [e.public() for e in mine]
        return json_response({"items": entries, "next_cursor": None})
