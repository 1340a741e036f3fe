"""What an Endpoint's status says: its URL, the tools it serves, its members' health, and a
Ready condition a person can act on. Written only when something changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.reconcile import ANNOTATION_PAUSED, StatusDraft
from bundle_operator.k8s.resources import ENDPOINT_PLURAL, EndpointSpec
from bundle_operator.platform.models import Endpoint, GatewayMember, GatewayTool


def served_view(
    endpoint: Endpoint | None, tools: list[GatewayTool], members: list[GatewayMember]
) -> dict[str, Any]:
    """status.url, presentedTools (served ones, in the platform's order), withheldTools and members.

    withheldTools are the tools the bundle means to serve that the gateway does not: an override
    holds their name, or their name is not one MCP allows. Disabled and stale ones are left out.
    """
    return {
        "url": endpoint.url if endpoint is not None else None,
        "presentedTools": [t.presented_name for t in tools if t.served],
        "withheldTools": [
            {"name": t.id, "reason": f"the tool '{t.presented_name}' {t.withheld_reason}"}
            for t in tools
            if not t.served and t.enabled and t.member_enabled and not t.stale and t.withheld_reason
        ],
        "members": [{"name": m.name, "healthy": m.healthy, "message": m.message or ""} for m in members],
    }


def ready_conditions(spec: EndpointSpec, view: dict[str, Any], *, paused: bool = False) -> list[cond.Cond]:
    """Ready with a message a person can act on: what is served, and which members are unhealthy."""
    members: list[dict[str, Any]] = view["members"]
    tools = len(view["presentedTools"])
    unhealthy = [m["name"] for m in members if not m["healthy"]]
    if not spec.enabled:
        reason = "Disabled"
        message = (
            f"the endpoint at {view['url']} is disabled (spec.enabled is false); set it to true to serve"
        )
    else:
        reason = "Serving"
        message = f"serving {tools} tools from {len(members)} members at {view['url']}"
        withheld = view.get("withheldTools") or []
        if withheld:
            message += f"; {len(withheld)} tools are not served (see status.withheldTools)"
    if unhealthy:
        shown = ", ".join(unhealthy[:5]) + (f" and {len(unhealthy) - 5} more" if len(unhealthy) > 5 else "")
        message += f"; unhealthy members: {shown} (see status.members)"
    if paused:
        reason = "Paused"
        message = (
            f"up to date; the {ANNOTATION_PAUSED} annotation is set, so nothing would be written: {message}"
        )
    return [*cond.ready(reason, message), degraded(members, enabled=spec.enabled)]


def degraded(members: list[dict[str, Any]], *, enabled: bool = True) -> cond.Cond:
    """Degraded=True while a member of a served endpoint is down; it clears when the member is back."""
    down = [m for m in members if not m["healthy"]]
    if not enabled or not down:
        return cond.false("Degraded", "MembersAvailable", "")
    named = "; ".join(f"{m['name']}: {m.get('message') or 'not reachable'}" for m in down[:5])
    more = f" and {len(down) - 5} more" if len(down) > 5 else ""
    return cond.true(
        "Degraded",
        "MemberUnavailable",
        f"the endpoint serves without {len(down)} member(s): {named}{more}; their tools fail until they "
        "are back",
    )


# (namespace, name, status.members as written): the metrics' member gauges.
MembersCallback = Callable[[str, str, Sequence[dict[str, Any]]], None]


@dataclass
class EndpointStatus(StatusDraft):
    """The Endpoint's status; written only when something changed, told to the metrics after."""

    on_members: MembersCallback | None = None

    def served(self, view: dict[str, Any]) -> None:
        self.patch.update(view)

    def changed(self) -> bool:
        previous = self.previous()
        for key, value in self.patch.items():
            if key == "conditions":
                if _comparable(value) != _comparable(previous.get(key) or []):
                    return True
            elif (previous.get(key) if key in previous else _EMPTY.get(key)) != value:
                return True
        return False

    async def write(self, *, observed: bool = True) -> None:
        if observed:
            self.patch["observedGeneration"] = self.generation
        if self.changed():
            if not await self.send(ENDPOINT_PLURAL, observed=observed):
                return  # deleted meanwhile
            # A later write in the same run compares with what is there now.
            self.body = {**self.body, "status": {**self.previous(), **self.patch}}
        if self.on_members is not None:
            # Also when nothing changed: after a restart the first run finds the status as it was.
            meta = self.body["metadata"]
            members = {**self.previous(), **self.patch}.get("members") or []
            self.on_members(meta["namespace"], meta["name"], members)


_EMPTY: dict[str, Any] = {
    "url": None,
    "presentedTools": [],
    "withheldTools": [],
    "members": [],
    "observedGeneration": None,
}


def _comparable(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((dict(c) for c in conditions if isinstance(c, dict)), key=lambda c: str(c.get("type")))


def cleared() -> dict[str, Any]:
    """The served view of an Endpoint that serves nothing (yet)."""
    return {"url": None, "presentedTools": [], "withheldTools": [], "members": []}
