"""Fault injection for tests: fail or delay chosen calls. Exists only with --enable-fault-injection."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from bundle_operator.platform.models import FaultSpec
from bundle_operator.reference_platform.http import json_response, page, parse, read_json
from bundle_operator.reference_platform.problems import ApiError, problem_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ADMIN_PREFIX = "/_admin/"


@dataclass
class ArmedFault:
    """A fault and how many calls it matched and failed so far."""

    id: str
    spec: FaultSpec
    matched: int = 0
    injected: int = 0

    def matches(self, method: str, path: str) -> bool:
        """Whether a call is one this fault watches; ``*`` in the path stands for one segment."""
        if self.spec.method != "*" and self.spec.method.upper() != method.upper():
            return False
        want = self.spec.path.strip("/").split("/")
        got = path.strip("/").split("/")
        return len(want) == len(got) and all(w in ("*", g) for w, g in zip(want, got, strict=True))

    def view(self) -> dict[str, object]:
        """The fault as the admin API shows it."""
        return self.spec.model_dump(mode="json") | {
            "id": self.id,
            "matched": self.matched,
            "injected": self.injected,
        }


@dataclass
class FaultBook:
    """The armed faults of one server process (kept in memory, gone on restart)."""

    faults: list[ArmedFault] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def arm(self, spec: FaultSpec) -> ArmedFault:
        """Add a fault."""
        fault = ArmedFault(f"flt_{next(self._ids)}", spec)
        self.faults.append(fault)
        return fault

    def pick(self, method: str, path: str) -> ArmedFault | None:
        """Count the call against every matching fault; return the first whose turn it is."""
        chosen: ArmedFault | None = None
        for fault in self.faults:
            if not fault.matches(method, path):
                continue
            turn = fault.matched
            fault.matched += 1
            if chosen is None and fault.spec.after <= turn < fault.spec.after + fault.spec.times:
                fault.injected += 1
                chosen = fault
        return chosen


FAULTS: web.AppKey[FaultBook] = web.AppKey("platform_faults", FaultBook)


def _injected(fault: ArmedFault) -> web.Response:
    status = fault.spec.status
    assert status is not None
    headers = {"Retry-After": str(fault.spec.retry_after)} if fault.spec.retry_after is not None else None
    return problem_response(
        ApiError(status, "injected_fault", f"fault {fault.id} injected by the test harness", headers=headers)
    )


@web.middleware
async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Delay or fail the calls a fault picks; ``when: after`` fails them after the change is made."""
    if request.path.startswith(ADMIN_PREFIX) or request.path == "/healthz":
        return await handler(request)
    fault = request.app[FAULTS].pick(request.method, request.path)
    if fault is None:
        return await handler(request)
    if fault.spec.delay_ms:
        await asyncio.sleep(fault.spec.delay_ms / 1000)
    if fault.spec.status is None:
        return await handler(request)
    if fault.spec.when == "after":
        with contextlib.suppress(ApiError):  # the caller sees the injected status either way
            await handler(request)
    return _injected(fault)


async def add_fault(request: web.Request) -> web.Response:
    """POST /_admin/faults: arm a fault."""
    spec = parse(FaultSpec, await read_json(request))
    return json_response(request.app[FAULTS].arm(spec).view(), status=201)


async def list_faults(request: web.Request) -> web.Response:
    """GET /_admin/faults: the armed faults with their counters."""
    return page([fault.view() for fault in request.app[FAULTS].faults], None)


async def clear_faults(request: web.Request) -> web.Response:
    """DELETE /_admin/faults: disarm every fault."""
    request.app[FAULTS].faults.clear()
    return web.Response(status=204)


def register(app: web.Application) -> None:
    """Add the admin routes and the fault state (call only when fault injection is enabled)."""
    app[FAULTS] = FaultBook()
    app.router.add_post("/_admin/faults", add_fault)
    app.router.add_get("/_admin/faults", list_faults)
    app.router.add_delete("/_admin/faults", clear_faults)
