"""Counts of the API calls the platform answers, for benchmarks. Exists only with --count-calls.

Each call is counted by method, kind (the collection its path names: ``agents``,
``mcp-servers``, ``idempotency-keys``, ...), operation (``list``, ``get``, ``create``, ``update``,
``delete``, or the method and sub-path for nested routes), workspace and status, so a benchmark
can tell the lists a client makes from its gets and writes, per workspace, measured at the peer.
``GET /_admin/calls`` shows the counters; ``DELETE /_admin/calls`` shows them and starts afresh.
"""

from __future__ import annotations

from collections import Counter

from aiohttp import web

from bundle_operator.reference_platform.entity_routes import BASE
from bundle_operator.reference_platform.http import Handler, answered, json_response

ADMIN_PREFIX = "/_admin/"
# method, kind, operation, workspace, status
Key = tuple[str, str, str, str, int]

CALLS: web.AppKey[Counter[Key]] = web.AppKey("platform_call_counts", Counter)

_WORKSPACE_ROUTE = BASE + "/"
_ITEM_OPS = {"GET": "get", "PATCH": "update", "PUT": "replace", "DELETE": "delete"}
_COLLECTION_OPS = {"GET": "list", "POST": "create"}


def classify(method: str, route: str) -> tuple[str, str]:
    """The kind and operation of a call on ``route`` (its canonical path, with ``{placeholders}``)."""
    if not route.startswith(_WORKSPACE_ROUTE):
        return route, method.lower()
    kind, *rest = route[len(_WORKSPACE_ROUTE) :].split("/")
    if not rest:
        return kind, _COLLECTION_OPS.get(method, method.lower())
    if len(rest) == 1 and rest[0].startswith("{"):
        return kind, _ITEM_OPS.get(method, method.lower())
    # Nested routes (a gateway bundle's members, tools, ...): the method and the sub-path.
    return kind, f"{method.lower()} {'/'.join(part for part in rest[1:] if not part.startswith('{'))}"


@web.middleware
async def count_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count every call but the admin routes and /healthz by what it asked for and how it ended."""
    if request.path.startswith(ADMIN_PREFIX) or request.path == "/healthz":
        return await handler(request)
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "(no route)"
    kind, op = classify(request.method, route)
    ws = request.match_info.get("workspace", "")

    def count(status: int) -> None:
        request.app[CALLS][(request.method, kind, op, ws, status)] += 1

    return await answered(request, handler, count)


def _view(counts: Counter[Key]) -> dict[str, object]:
    rows = [
        {"method": m, "kind": k, "op": o, "workspace": w, "status": s, "count": n}
        for (m, k, o, w, s), n in sorted(counts.items())
    ]
    return {"total": sum(counts.values()), "calls": rows}


async def show_calls(request: web.Request) -> web.Response:
    """GET /_admin/calls: the counters since start or the last reset."""
    return json_response(_view(request.app[CALLS]))


async def reset_calls(request: web.Request) -> web.Response:
    """DELETE /_admin/calls: the counters, which then start again from zero (nothing is lost between)."""
    counts = request.app[CALLS]
    view = _view(counts)
    counts.clear()
    return json_response(view)


def register(app: web.Application) -> None:
    """Add the counters and their admin routes (call only when counting is enabled)."""
    app[CALLS] = Counter()
    app.router.add_get("/_admin/calls", show_calls)
    app.router.add_delete("/_admin/calls", reset_calls)
