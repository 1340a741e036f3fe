"""The platform API route a request path belongs to, ids and the workspace templated out.

Metrics label platform calls with it and traces name client spans with it: ids would make one
series (or span name) per entity, and workspace names are user data.
"""

from __future__ import annotations

from typing import Final

from bundle_operator.platform.kinds import ALL_KINDS

OTHER_ROUTE: Final = "other"

# Artifacts are no entity kind (they are addressed by digest) but have the same two routes.
_COLLECTIONS: Final = frozenset(kind.path for kind in ALL_KINDS) | {"artifacts"}
# Sub-collections of a gateway bundle; each has a /{id} item route (the actions and the audit
# log below have none). Resource names keep their
# '/' in the path, so a resource item may span several segments.
_GATEWAY_COLLECTIONS: Final = frozenset(
    {"members", "tools", "member-prompts", "member-resources", "prompts", "resources"}
)
_GATEWAY_ACTIONS: Final = frozenset({"rename", "members:order", "audit"})


# The one sub-collection of a knowledge set and of an app, each with a /{id} item route.
_SUB_COLLECTIONS: Final = {"knowledge-sets": "sources", "apps": "versions"}


# Read-only catalogs of what the workspace offers (no ids below them).
_CATALOGS = frozenset({"models"})


def route_template(path: str) -> str:
    """The platform API route a request path belongs to, with ids as ``{id}`` and the workspace
    as ``{ws}``; ``other`` for a path the API does not have.

    ``path`` is the path as sent (percent-encoded; a query string is ignored). A base-URL prefix
    before ``/v1/`` is dropped.
    """
    path = path.split("?", 1)[0]
    segments = path.split("/")
    for index in range(len(segments) - 1):
        if segments[index] == "v1" and segments[index + 1] == "workspaces":
            return _workspace_route(segments[index + 2 :])
    if segments[-1] == "healthz":
        return "/healthz"
    return OTHER_ROUTE


def _workspace_route(rest: list[str]) -> str:
    # rest: the segments after /v1/workspaces; empty segments (//, a trailing /) are no route.
    if len(rest) < 2 or not all(rest):
        return OTHER_ROUTE
    base = "/v1/workspaces/{ws}"
    collection, tail = rest[1], rest[2:]
    if collection == "idempotency-keys":
        return f"{base}/idempotency-keys/{{id}}" if len(tail) == 1 else OTHER_ROUTE
    if collection in _CATALOGS:
        return f"{base}/{collection}" if not tail else OTHER_ROUTE
    if collection not in _COLLECTIONS:
        return OTHER_ROUTE
    if not tail:
        return f"{base}/{collection}"
    if len(tail) == 1:
        return f"{base}/{collection}/{{id}}"
    if collection == "endpoints" and tail[1:] == ["api-key"]:
        return f"{base}/endpoints/{{id}}/api-key"
    sub_collection = _SUB_COLLECTIONS.get(collection)
    if sub_collection is not None and tail[1] == sub_collection and len(tail) <= 3:
        return f"{base}/{collection}/{{id}}/{sub_collection}" + ("/{id}" if len(tail) == 3 else "")
    if collection != "gateway-bundles":
        return OTHER_ROUTE
    gateway = f"{base}/gateway-bundles/{{id}}"
    sub, items = tail[1], tail[2:]
    if sub in _GATEWAY_ACTIONS and not items:
        return f"{gateway}/{sub}"
    if sub not in _GATEWAY_COLLECTIONS:
        return OTHER_ROUTE
    if not items:
        return f"{gateway}/{sub}"
    if len(items) == 1 or sub == "resources":
        return f"{gateway}/{sub}/{{id}}"
    return OTHER_ROUTE
