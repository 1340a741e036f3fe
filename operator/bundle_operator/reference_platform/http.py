"""Request and response plumbing shared by the reference platform's routes."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from bundle_operator.platform.conventions import DEFAULT_LIMIT, MAX_LIMIT, WORKSPACE_PATTERN
from bundle_operator.reference_platform.context import CONTEXT, Context
from bundle_operator.reference_platform.problems import ApiError, from_validation, not_found, refused
from bundle_operator.reference_platform.storage import Row, Tx

M = TypeVar("M", bound=BaseModel)

# Request bodies nest at most this deep: deeper JSON only serves to exhaust the stack.
MAX_DEPTH = 64
_ETAG = re.compile(r'^(?:W/)?"?([0-9]{1,18})"?$')
# ASCII digits only, and few enough to fit SQLite's 64-bit integers: str.isdigit() also accepts
# '²' and other digits int() refuses.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def whole_number(text: str) -> int | None:
    """``text`` as a non-negative int when it is 1 to 18 ASCII digits, else None."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else None


def context(request: web.Request) -> Context:
    """The running platform's shared state."""
    return request.app[CONTEXT]


def workspace(request: web.Request) -> str:
    """The workspace in the path; any valid name exists (workspaces are implicit)."""
    name = request.match_info["workspace"]
    if not WORKSPACE_PATTERN.fullmatch(name):
        raise refused("workspace", "must be lowercase letters, digits and '-', at most 63 characters")
    return name


def _no_constants(name: str) -> Any:
    # NaN and Infinity are not JSON; accepting them would store values no client can read back.
    raise ValueError(name)


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 400 when it is not JSON (the body is never echoed)."""
    raw = await request.read()
    try:
        data = json.loads(raw, parse_constant=_no_constants) if raw else None
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_json", "the request body is not valid JSON") from None
    except RecursionError:
        raise ApiError(
            400, "invalid_json", f"the request body nests deeper than {MAX_DEPTH} levels"
        ) from None
    check_plain(data)
    return data


def check_plain(data: Any) -> None:
    """Refuse JSON nested too deep or holding lone surrogates (text no store can encode)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ApiError(400, "invalid_json", f"the request body nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise refused(path or "body", "is not valid Unicode text (it holds a lone surrogate)")
        elif isinstance(value, dict):
            for key, item in value.items():
                where = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    raise refused(path or "body", "has a key that is not valid Unicode text")
                stack.append((item, where, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(value))


def parse(model: type[M], data: Any) -> M:
    """Validate a request body; 422 listing the invalid fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


def fingerprint(data: Any) -> str:
    """A stable digest of a request body, to tell a replay from a different request."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def if_match(request: web.Request, *, required: bool) -> int | None:
    """The revision in If-Match (None for '*' or absent); 428 when required and missing."""
    value = request.headers.get("If-Match")
    if value is None:
        if required:
            raise ApiError(
                428, "precondition_required", "send If-Match with the revision the change is based on"
            )
        return None
    value = value.strip()
    if value == "*":
        return None
    found = _ETAG.fullmatch(value)
    if found is None:
        raise ApiError(400, "invalid_if_match", 'If-Match must be a revision such as "3"')
    return int(found.group(1))


def existing(tx: Tx, workspace: str, path: str, entity_id: str) -> Row:
    """The stored entity of a collection; 404 naming it when there is none."""
    row = tx.get(workspace, path, entity_id)
    if row is None:
        raise not_found(entity_id)
    return row


def check_revision(entity_id: str, current: int, expected: int | None) -> None:
    """412 when the entity moved past the revision the caller based its change on."""
    if expected is not None and expected != current:
        raise ApiError(
            412,
            "revision_mismatch",
            f"{entity_id} is at revision {current}, not {expected}; read it again and reapply the change",
        )


def limit_param(request: web.Request) -> int:
    """The page size asked for."""
    text = request.query.get("limit")
    if text is None:
        return DEFAULT_LIMIT
    limit = whole_number(text)
    if limit is None or not 1 <= limit <= MAX_LIMIT:
        raise refused("limit", f"must be a whole number from 1 to {MAX_LIMIT}")
    return limit


def encode_cursor(value: str) -> str:
    """An opaque cursor for the position after ``value``."""
    return base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")


def decode_cursor(request: web.Request) -> str | None:
    """The position a cursor names; 422 when it is not one this server issued."""
    text = request.query.get("cursor")
    if text is None or text == "":
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise refused("cursor", "is not a cursor from a previous page") from None


def seq_page(request: web.Request) -> tuple[int, int]:
    """The page size and the creation sequence number a page in creation order starts after."""
    limit = limit_param(request)
    after = decode_cursor(request)
    after_seq = 0 if after is None else whole_number(after)
    if after_seq is None:
        raise refused("cursor", "is not a cursor from a previous page")
    return limit, after_seq


def page(items: list[Any], next_cursor: str | None) -> web.Response:
    """A list page."""
    return json_response({"items": items, "next_cursor": next_cursor})


def page_by_name(request: web.Request, items: list[dict[str, Any]], key: str) -> web.Response:
    """Page through items sorted by ``key`` (names), with the last name as the cursor."""
    after = decode_cursor(request)
    limit = limit_param(request)
    ordered = sorted(items, key=lambda item: item[key])
    if after is not None:
        ordered = [item for item in ordered if item[key] > after]
    chunk = ordered[:limit]
    more = len(ordered) > limit
    return page(chunk, encode_cursor(chunk[-1][key]) if more and chunk else None)


def page_by_number(
    request: web.Request, items: list[dict[str, Any]], number: Callable[[dict[str, Any]], int]
) -> web.Response:
    """Page through items in ascending ``number`` (a version, a creation sequence), with the last
    number as the cursor: items deleted between pages make the next page skip none."""
    text = decode_cursor(request)
    after = None if text is None else whole_number(text)
    if text is not None and after is None:
        raise refused("cursor", "is not a cursor from a previous page")
    limit = limit_param(request)
    ordered = sorted(items, key=number)
    if after is not None:
        ordered = [item for item in ordered if number(item) > after]
    chunk = ordered[:limit]
    more = len(ordered) > limit
    return page(chunk, encode_cursor(str(number(chunk[-1]))) if more else None)


def _ordered_cursor(request: web.Request) -> tuple[int, int, str] | None:
    after = decode_cursor(request)
    if after is None:
        return None
    try:
        group, index, ident = json.loads(after)
    except (ValueError, TypeError, RecursionError):
        raise refused("cursor", "is not a cursor from a previous page") from None
    if not (isinstance(group, int) and isinstance(index, int) and isinstance(ident, str)) or not (
        0 <= group < 2**53 and 0 <= index < 2**53
    ):
        raise refused("cursor", "is not a cursor from a previous page")
    return group, index, ident


def page_in_order(
    request: web.Request, items: list[dict[str, Any]], ident: str, group: Callable[[dict[str, Any]], int]
) -> web.Response:
    """Page through items in the order given, grouped by ``group`` (a member's position).

    The cursor is the last item seen, not an offset, so entries deleted between pages do not make
    the next page skip any: the next page starts after that item, or, when it is gone too, after
    its place in the order.
    """
    after = _ordered_cursor(request)
    limit = limit_param(request)
    ranks: list[tuple[int, int]] = []
    seen: dict[int, int] = {}
    for item in items:
        g = group(item)
        ranks.append((g, seen.get(g, 0)))
        seen[g] = seen.get(g, 0) + 1
    start = 0
    if after is not None:
        g, index, name = after
        found = next((i for i, item in enumerate(items) if item[ident] == name and ranks[i][0] == g), None)
        if found is not None:
            start = found + 1
        else:
            start = next((i for i, rank in enumerate(ranks) if rank > (g, index)), len(items))
    chunk = items[start : start + limit]
    end = start + len(chunk)
    if end >= len(items) or not chunk:
        return page(chunk, None)
    last = end - 1
    cursor = json.dumps([ranks[last][0], ranks[last][1], items[last][ident]])
    return page(chunk, encode_cursor(cursor))


def json_response(
    body: Any, *, status: int = 200, revision: int | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer; ``revision`` becomes the ETag."""
    all_headers = dict(headers or {})
    if revision is not None:
        all_headers["ETag"] = f'"{revision}"'
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type="application/json", headers=all_headers
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def answered(request: web.Request, handler: Handler, told: Callable[[int], None]) -> web.StreamResponse:
    """``handler``'s answer to ``request``; ``told`` gets its status whichever way it ends (an
    ``HTTPException``'s status, 500 for any other exception), as middlewares that count or trace need."""
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        told(status)
