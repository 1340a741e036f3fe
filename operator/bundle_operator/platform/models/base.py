"""The shared pieces of every API body: field types, the base model, Entity."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    WithJsonSchema,
)

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.document.names import (
    DISPLAY_NAME_MAX,
    MEMBER_ENTRY_NAME_MAX,
    SLUG_MAX,
    SLUG_PATTERN,
    URL_NAME_PATTERN,
)

ID_PATTERN = r"^[a-z]{3}_[0-9a-z]{1,40}$"

Name = Annotated[str, Field(min_length=1, max_length=DISPLAY_NAME_MAX)]
Text = Annotated[str, Field(max_length=20_000)]
EntityId = Annotated[str, Field(pattern=ID_PATTERN)]
Slug = Annotated[str, Field(min_length=1, max_length=SLUG_MAX, pattern=SLUG_PATTERN)]
# A name a gateway member gives its tool, prompt or prompt argument: the member's own, kept as it is.
MemberEntryName = Annotated[str, Field(min_length=1, max_length=MEMBER_ENTRY_NAME_MAX)]
UrlName = Annotated[str, Field(pattern=URL_NAME_PATTERN)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
Schedule = Annotated[str, Field(min_length=1, max_length=200)]
# A value the platform issues and shows once; SecretStr keeps it out of reprs and logs.
IssuedSecret = Annotated[SecretStr, WithJsonSchema({"type": "string", "readOnly": True})]


class ApiModel(BaseModel):
    """Base of every API body: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class SecretRef(ApiModel):
    """A value held in the workspace's secret store, referred to by the secret's id."""

    secret_id: EntityId


# A configuration value: written as plain text, or a reference to a stored secret.
Value = Annotated[str, Field(max_length=8192)] | SecretRef


class Entity(ApiModel):
    """Fields every stored entity carries; ``revision`` is also sent as the ETag."""

    id: EntityId
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime
