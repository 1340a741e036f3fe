"""Typed errors of the platform API, one class per way a caller must react.

``temporary`` tells the engine whether backing off and trying again can help (5xx, 429,
transport failures) or whether only a change of input will (404, 409, 422, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from bundle_operator.platform.models import FieldError


class PlatformError(Exception):
    """A call to the platform failed; ``code`` is the problem code, ``errors`` name fields."""

    temporary = False

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str = "platform_error",
        errors: Sequence[FieldError] = (),
        holders: Sequence[str] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.code = code
        self.errors = list(errors)
        self.holders = list(holders)
        self.retry_after = retry_after

    def __str__(self) -> str:
        prefix = f"{self.status} {self.code}" if self.status is not None else self.code
        fields = "; ".join(f"{e.field}: {e.message}" for e in self.errors)
        return f"{prefix}: {self.detail}" + (f" ({fields})" if fields else "")


class BadRequest(PlatformError):
    """The request itself was malformed (400, 428): a bug in the caller."""


class Unauthorized(PlatformError):
    """The token is missing, wrong or not allowed (401, 403)."""


class NotFound(PlatformError):
    """The entity or route does not exist (404)."""


class Conflict(PlatformError):
    """The request clashes with the platform's state (409): a name is held, an entity is in use."""


class PreconditionFailed(Conflict):
    """The entity changed since the revision given in If-Match (412)."""


class Refused(PlatformError):
    """The platform's rules refuse the request as given (422, or 413 for a body over a route's
    limit); ``errors`` name the fields."""


class Unavailable(PlatformError):
    """The platform could not answer now (5xx, timeouts, connection failures); try again later."""

    temporary = True


class RateLimited(Unavailable):
    """The platform asked the caller to slow down (429); ``retry_after`` says for how long."""


def error_for_status(status: int) -> type[PlatformError]:
    """The error class for an HTTP status the platform answered with."""
    if status in (401, 403):
        return Unauthorized
    if status == 404:
        return NotFound
    if status == 412:
        return PreconditionFailed
    if status == 409:
        return Conflict
    if status in (413, 422):
        return Refused
    if status == 429:
        return RateLimited
    if status >= 500:
        return Unavailable
    return BadRequest
