"""Secrets, pages, problems, faults and health: the API's own bodies."""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
)

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.platform.models.base import (
    ApiModel,
    Entity,
    Name,
)

# --- Secrets ----------------------------------------------------------------------------------


class SecretCreate(ApiModel):
    """A value for the secret store; the value is write-only."""

    name: Name
    value: SecretStr = Field(min_length=1, max_length=65_536)


class SecretUpdate(ApiModel):
    """A new name or value for a stored secret."""

    name: Name | None = None
    value: SecretStr | None = Field(default=None, min_length=1, max_length=65_536)


class Secret(Entity):
    """A stored secret: its value is never returned."""

    name: str


# --- Lists, errors, faults --------------------------------------------------------------------

T = TypeVar("T")


class Page(ApiModel, Generic[T]):
    """One page of a list; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None


class FieldError(BaseModel):
    """One field of a request that was refused, named by its dotted path."""

    model_config = ConfigDict(extra="ignore")

    field: str
    message: str
    line: int | None = None


class Problem(BaseModel):
    """An RFC 9457 problem document with a machine-readable ``code``."""

    model_config = ConfigDict(extra="ignore")

    type: str = "about:blank"
    title: str
    status: int
    code: str
    detail: str
    errors: list[FieldError] = Field(default_factory=list)
    holders: list[str] = Field(default_factory=list)


class FaultSpec(ApiModel):
    """Fail or delay matching calls: the ones after the first ``after``, ``times`` times.

    ``when: after`` runs the handler first and then answers ``status``: the change is made but
    the caller sees a failure, as when a response is lost on the way back.
    """

    method: Annotated[str, Field(pattern=r"^(\*|[A-Za-z]+)$")] = "*"
    path: Annotated[str, Field(min_length=1, max_length=1000, pattern=r"^/")]
    after: int = Field(default=0, ge=0, le=1_000_000)
    times: int = Field(default=1, ge=1, le=1_000_000)
    status: int | None = Field(default=None, ge=400, le=599)
    delay_ms: int = Field(default=0, ge=0, le=60_000)
    retry_after: int | None = Field(default=None, ge=0, le=3600)
    when: Literal["before", "after"] = "before"


class Fault(FaultSpec):
    """An armed fault with its counters."""

    id: str
    matched: int
    injected: int


class Health(ApiModel):
    """The server is up."""

    status: Literal["ok"]
