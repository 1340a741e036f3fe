"""problem+json answers of the reference platform.

Handlers raise ``ApiError``; the error middleware turns it into an RFC 9457 document. Messages
name fields and never carry the values sent: a value may be a secret.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from aiohttp import web
from pydantic import ValidationError

PROBLEM_JSON = "application/problem+json"


class ApiError(Exception):
    """A refusal with its HTTP status, a ``code`` and the fields it concerns."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: Sequence[dict[str, Any]] = (),
        holders: Sequence[str] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = list(errors)
        self.holders = list(holders)
        self.headers = headers or {}


def field_error(field: str, message: str, *, line: int | None = None) -> dict[str, Any]:
    """One entry of a problem's ``errors`` list."""
    entry: dict[str, Any] = {"field": field, "message": message}
    if line is not None:
        entry["line"] = line
    return entry


def refused(field: str, message: str, *, code: str = "invalid_request", line: int | None = None) -> ApiError:
    """A 422 naming one field."""
    return ApiError(422, code, f"{field}: {message}", errors=[field_error(field, message, line=line)])


def not_found(what: str) -> ApiError:
    """A 404 for a missing entity or sub-entry."""
    return ApiError(404, "not_found", f"{what} does not exist")


def conflict(code: str, detail: str, *, holders: Sequence[str] = (), field: str | None = None) -> ApiError:
    """A 409, naming who holds what the request wanted."""
    errors = [field_error(field, detail)] if field else []
    return ApiError(409, code, detail, errors=errors, holders=holders)


def from_validation(exc: ValidationError, prefix: str = "") -> ApiError:
    """A 422 listing every invalid field; pydantic's input values are left out on purpose."""
    errors = []
    for err in exc.errors(include_input=False, include_url=False):
        path = ".".join(str(part) for part in err["loc"])
        field = f"{prefix}.{path}" if prefix and path else (prefix or path or "body")
        errors.append(field_error(field, err["msg"]))
    fields = ", ".join(sorted({e["field"] for e in errors}))
    return ApiError(422, "invalid_request", f"the request has invalid fields: {fields}", errors=errors)


def problem_response(error: ApiError) -> web.Response:
    """The HTTP response for an ApiError."""
    try:
        title = HTTPStatus(error.status).phrase
    except ValueError:
        title = "Error"
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": error.status,
        "code": error.code,
        "detail": error.detail,
        "errors": error.errors,
    }
    if error.holders:
        body["holders"] = error.holders
    return web.Response(
        status=error.status,
        body=json.dumps(body).encode(),
        content_type=PROBLEM_JSON,
        headers=error.headers,
    )
