"""Tool scopes step up (DESIGN.md §9.6): calling a tool the token's scopes do not cover is a scope challenge.

The door answers it with HTTP 403 ``insufficient_scope`` naming the scopes to ask for, before the
request reaches either wire's handler, so every wire says the same and the member is never called.
"""

from __future__ import annotations

from typing import Any

from bundle_operator.reference_platform.gateway_limits import tool_calls
from bundle_operator.reference_platform.gateway_oauth import OAuthSettings, Principal, tool_allowed
from bundle_operator.reference_platform.gateway_view import EndpointView
from bundle_operator.reference_platform.problems import ApiError


def needs_scopes(view: EndpointView) -> bool:
    """Whether some tool of the endpoint needs scopes of its own (only then is a body read for them)."""
    return view.oauth is not None and bool(view.oauth.get("tool_scopes"))


def refused_tool(view: EndpointView, principal: Principal, message: Any) -> str | None:
    """The first tool ``message`` calls that the endpoint serves and the principal may not call."""
    for name in tool_calls(message):
        # Unknown and withheld names get the error the handler gives them, not a challenge.
        if name in view.tools and not tool_allowed(view.oauth, principal, name):
            return name
    return None


def challenge_scope(view: EndpointView, tool: str) -> str:
    """The scopes to ask for: the endpoint's required scopes, then the tool's own."""
    settings = OAuthSettings.of(view.oauth or {"issuer": ""}, "")
    scopes = list(settings.required_scopes)
    scopes += sorted(settings.needed_for(tool) - set(scopes))
    return " ".join(scopes)


def step_up(view: EndpointView, tool: str, metadata_url: str) -> ApiError:
    """The 403 scope challenge (RFC 6750 §3.1, MCP authorization) for a call of ``tool``."""
    scope = challenge_scope(view, tool)
    return ApiError(
        403,
        "insufficient_scope",
        f"the token's scopes do not allow the tool '{tool}'; authorize again with the scopes: {scope}",
        headers={
            "WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}", '
            f'resource_metadata="{metadata_url}"'
        },
    )
