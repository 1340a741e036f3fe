"""Request and response plumbing shared by the reference platform's routes."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from bundle_operator.platform.reference.context import CONTEXT, Context
from bundle_operator.platform.reference.problems import ApiError, from_validation, refused

M = TypeVar("M", bound=BaseModel)

WORKSPACE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
_ETAG = re.compile(r'^(?:W/)?"?([0-9]{1,18})"?$')


def context(request: web.Request) -> Context:
    """The running platform's shared state."""
    return request.app[CONTEXT]


def workspace(request: web.Request) -> str:
    """The workspace in the path; any valid name exists (workspaces are implicit)."""
    name = request.match_info["workspace"]
    if not WORKSPACE_PATTERN.match(name):
        raise refused("workspace", "must be lowercase letters, digits and '-', at most 63 characters")
    return name


def _no_constants(name: str) -> Any:
    # NaN and Infinity are not JSON; accepting them would store values no client can read back.
    raise ValueError(name)


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 400 when it is not JSON (the body is never echoed)."""
    raw = await request.read()
    try:
        return json.loads(raw, parse_constant=_no_constants) if raw else None
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_json", "the request body is not valid JSON") from None


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
    found = _ETAG.match(value)
    if found is None:
        raise ApiError(400, "invalid_if_match", 'If-Match must be a revision such as "3"')
    return int(found.group(1))


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
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise refused("limit", f"must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


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


def page_in_order(request: web.Request, items: list[dict[str, Any]]) -> web.Response:
    """Page through items in the order given, with the position as the cursor."""
    after = decode_cursor(request)
    limit = limit_param(request)
    start = 0
    if after is not None:
        if not after.isdigit():
            raise refused("cursor", "is not a cursor from a previous page")
        start = int(after)
    chunk = items[start : start + limit]
    more = start + limit < len(items)
    return page(chunk, encode_cursor(str(start + limit)) if more else None)


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
