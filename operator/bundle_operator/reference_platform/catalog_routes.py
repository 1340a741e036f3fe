"""What the platform offers an agent: the models it may name.

The reference platform serves a fixed list of models; it does not refuse an agent naming
another one (tests and demos use made-up names), but a client that asks what exists gets this
list, and ``default`` (the model an agent runs on without one of its own) is always in it. The
tools an agent can use are the workspace's MCP instances (``GET .../mcp-instances``, filtered by
``name``), each serving what its server spec's catalog declares.
"""

from __future__ import annotations

from aiohttp import web

from bundle_operator.platform.catalog import ModelInfo
from bundle_operator.reference_platform.entity_routes import BASE
from bundle_operator.reference_platform.http import page_by_name, workspace

MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(id="default", description="the platform's default model", default=True),
    ModelInfo(id="gpt-4.1", description="OpenAI GPT-4.1"),
    ModelInfo(id="gpt-4.1-mini", description="OpenAI GPT-4.1 mini"),
    ModelInfo(id="gpt-5", description="OpenAI GPT-5"),
    ModelInfo(id="gpt-5-mini", description="OpenAI GPT-5 mini"),
    ModelInfo(id="claude-sonnet-4", description="Anthropic Claude Sonnet 4"),
    ModelInfo(id="claude-opus-4", description="Anthropic Claude Opus 4"),
)


async def list_models(request: web.Request) -> web.Response:
    """GET .../models: the models an agent may name, in id order, paged."""
    workspace(request)  # checks the name; every workspace sees the same models
    return page_by_name(request, [m.model_dump(mode="json") for m in MODELS], "id")


def register(app: web.Application) -> None:
    """Add the catalog routes."""
    app.router.add_get(f"{BASE}/models", list_models)
