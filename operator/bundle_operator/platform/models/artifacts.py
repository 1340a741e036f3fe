"""Artifacts: archives a workspace stores by content, and the reference an MCP server spec makes to one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from bundle_operator.platform.models.base import ApiModel

Runtime = Literal["node", "python", "binary"]
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
ARTIFACT_MEDIA_TYPE = "application/zip"
# The largest archive the platform takes, as the .mcpb reader's own file limit.
ARTIFACT_MAX_BYTES = 128 * 1024 * 1024


class ArtifactRef(ApiModel):
    """The archive an MCP server spec runs from, and its entry point relative to the archive root."""

    digest: Annotated[str, Field(pattern=DIGEST_PATTERN)]
    entry: Annotated[str, Field(min_length=1, max_length=1000)]


class Artifact(ApiModel):
    """A stored archive: its digest and size, the digest of its extracted tree, who refers to it."""

    digest: str
    size: int
    media_type: str
    tree_digest: str
    referenced_by: list[str]
    created_at: datetime
