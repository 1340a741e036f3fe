"""Knowledge sets with their sources, and apps with their versions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)

# The knowledge source types and the name rules are defined once, in the document package, so
# analyze checks the same fields and patterns.
from bundle_operator.document.knowledge import (
    ALL_SOURCE_FIELDS,
    CREDENTIAL_NAME_PATTERN,
    MAX_APP_DOCUMENT,
    MAX_SOURCE_LIST,
    SOURCE_FIELDS,
    SourceType,
    app_document_size,
)
from bundle_operator.platform.models.base import ApiModel, Entity, EntityId, Name, Schedule, Text, Url

# --- Knowledge sets ---------------------------------------------------------------------------

# Empty text is refused only where the type requires the field (see ``_belongs_to_type``).
SourceText = Annotated[str, Field(max_length=2048)]
SourceEntry = Annotated[str, Field(min_length=1, max_length=2048)]
SourceList = Annotated[list[SourceEntry], Field(max_length=MAX_SOURCE_LIST)]
CredentialName = Annotated[str, Field(pattern=CREDENTIAL_NAME_PATTERN)]
CredentialValue = Annotated[SecretStr, Field(min_length=1, max_length=8192)]


class KnowledgeSetCreate(ApiModel):
    """A new knowledge set: a named collection of sources an agent can search."""

    name: Name
    description: Text = ""
    data_description: Text = ""


class KnowledgeSetUpdate(ApiModel):
    """Changes to a knowledge set's texts; its sources change through their own routes."""

    name: Name | None = None
    description: Text | None = None
    data_description: Text | None = None


class KnowledgeSourcePut(ApiModel):
    """A source as written: ``type`` decides which of the other fields it takes and needs.

    ``credentials`` are write-only values kept in the workspace's secret store; None on a PUT
    keeps the ones stored, a dict replaces them all.
    """

    type: SourceType
    # validate_default: a required field left out is named like one sent for the wrong type.
    laws: SourceList | None = Field(default=None, validate_default=True)
    urls: Annotated[list[Url], Field(max_length=MAX_SOURCE_LIST)] | None = Field(
        default=None, validate_default=True
    )
    bucket: SourceText | None = Field(default=None, validate_default=True)
    prefix: SourceText | None = Field(default=None, validate_default=True)
    region: SourceText | None = Field(default=None, validate_default=True)
    endpoint: SourceText | None = Field(default=None, validate_default=True)
    host: SourceText | None = Field(default=None, validate_default=True)
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(default=None, validate_default=True)
    dir: SourceText | None = Field(default=None, validate_default=True)
    user: SourceText | None = Field(default=None, validate_default=True)
    server: SourceText | None = Field(default=None, validate_default=True)
    share: SourceText | None = Field(default=None, validate_default=True)
    domain: SourceText | None = Field(default=None, validate_default=True)
    username: SourceText | None = Field(default=None, validate_default=True)
    base_url: Url | None = Field(default=None, validate_default=True)
    shared_links: SourceList | None = Field(default=None, validate_default=True)
    sync_schedule: Schedule | None = None
    credentials: Annotated[dict[CredentialName, CredentialValue], Field(max_length=50)] | None = None

    @field_validator(*ALL_SOURCE_FIELDS)
    @classmethod
    def _belongs_to_type(cls, value: Any, info: ValidationInfo) -> Any:
        source_type = info.data.get("type")
        if source_type is None or info.field_name is None:
            return value  # the type itself was refused and is named already
        fields = SOURCE_FIELDS[source_type]
        if value is None:
            if info.field_name in fields.required:
                raise ValueError(f"a source of type '{source_type}' needs it")
            return value
        if info.field_name not in fields.all:
            raise ValueError(f"a source of type '{source_type}' does not take it")
        if info.field_name in fields.required and not value:
            raise ValueError("must not be empty")
        return value


class KnowledgeSource(ApiModel):
    """A stored source of a knowledge set; ``key`` is None for a source a user added themselves.

    Fields the type does not take are null; ``credentials`` maps each credential's name to the
    id of the secret holding it, and the values never come back.
    """

    id: str
    key: str | None
    type: SourceType
    laws: list[str] | None = None
    urls: list[str] | None = None
    bucket: str | None = None
    prefix: str | None = None
    region: str | None = None
    endpoint: str | None = None
    host: str | None = None
    port: int | None = None
    dir: str | None = None
    user: str | None = None
    server: str | None = None
    share: str | None = None
    domain: str | None = None
    username: str | None = None
    base_url: str | None = None
    shared_links: list[str] | None = None
    sync_schedule: str | None = None
    credentials: dict[str, str] = Field(default_factory=dict)
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime


class KnowledgeSet(Entity):
    """A stored knowledge set with its sources in creation order (read-only here), so one list
    of the collection shows everything."""

    name: str
    description: str
    data_description: str
    sources: list[KnowledgeSource]


# --- Apps -------------------------------------------------------------------------------------


def _document_size(document: dict[str, Any]) -> dict[str, Any]:
    try:
        size = app_document_size(document)
    except (TypeError, ValueError):
        raise ValueError("is not a JSON object") from None
    if size > MAX_APP_DOCUMENT:
        raise ValueError(f"is larger than {MAX_APP_DOCUMENT} bytes as JSON")
    return document


# An app's definition: a JSON object the platform serves as the app's UI.
AppDocument = Annotated[dict[str, Any], AfterValidator(_document_size)]


class AppCreate(ApiModel):
    """A new app with its first version's document."""

    name: Name
    description: Text = ""
    mcp_instance_ids: Annotated[list[EntityId], Field(max_length=100)] = Field(default_factory=list)
    document: AppDocument


class AppUpdate(ApiModel):
    """Changes to an app; ``archived: true`` archives it (running instances keep working)."""

    name: Name | None = None
    description: Text | None = None
    mcp_instance_ids: Annotated[list[EntityId], Field(max_length=100)] | None = None
    archived: bool | None = None


class App(Entity):
    """A stored app; ``latest_version`` and ``document`` are those of its latest unarchived
    version, null when every version is archived."""

    name: str
    description: str
    mcp_instance_ids: list[str]
    archived: bool
    latest_version: int | None
    document: dict[str, Any] | None


class AppVersionCreate(ApiModel):
    """A new version of an app: the next number, with this document."""

    document: AppDocument


class AppVersionUpdate(ApiModel):
    """Archive or restore one version of an app."""

    archived: bool


class AppVersion(ApiModel):
    """One version of an app, numbered 1, 2, ... in the order they were added."""

    version: int = Field(ge=1)
    document: dict[str, Any]
    archived: bool
    created_at: datetime
