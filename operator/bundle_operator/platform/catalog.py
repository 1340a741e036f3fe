"""What the platform offers an agent, as the API describes it (kept apart from ``models`` only so
the two can change independently; the OpenAPI document takes its schemas from both)."""

from __future__ import annotations

from pydantic import Field

from bundle_operator.platform.models import ApiModel


class ModelInfo(ApiModel):
    """A model an agent may name in its ``model`` field."""

    id: str = Field(description="what an agent's model field names")
    description: str = ""
    default: bool = Field(default=False, description="the model an agent runs on when it names 'default'")
