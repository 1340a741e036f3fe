"""Writing a gateway bundle's contents: members and their order, tool curation, members' prompts
and resources, and the bundle's own prompts and resources, each written only where it differs.
"""

from __future__ import annotations

from typing import Any

from bundle_operator.platform.models import (
    GatewayEntryCuration,
    GatewayMemberPut,
    GatewayPromptPut,
    GatewayResourcePut,
    GatewayToolCuration,
    parse_member_resource_id,
)
from bundle_operator.platform.protocol import PlatformAPI


async def write_gateway_contents(
    p: PlatformAPI, ws: str, bundle_id: str, spec: dict[str, Any], live: dict[str, Any] | None
) -> int:
    """Bring a gateway bundle's members, curation, resources and prompts to ``spec``.

    Only what differs from ``live`` is written; resources go before the prompts that embed them
    and are deleted after the prompts that embedded them. Returns how many calls it made.
    """
    calls = 0
    old: dict[str, Any] = live or {
        "members": [],
        "tools": {},
        "member_prompts": {},
        "member_resources": {},
        "prompts": {},
        "resources": {},
    }
    old_members = {m["name"]: m for m in old["members"]}
    for member in spec["members"]:
        if old_members.get(member["name"]) != member:
            calls += 1
            await p.put_member(
                ws,
                bundle_id,
                member["name"],
                GatewayMemberPut(mcp_instance_id=member["mcp_instance_id"], enabled=member["enabled"]),
            )
    wanted = [m["name"] for m in spec["members"]]
    for name in old_members:
        if name not in wanted:
            calls += 1
            await p.delete_member(ws, bundle_id, name)
    current_order = [m["name"] for m in old["members"] if m["name"] in wanted]
    current_order += [n for n in wanted if n not in current_order]
    if wanted and current_order != wanted:
        calls += 1
        await p.order_members(ws, bundle_id, wanted)
    for tool_id, curation in spec["tools"].items():
        if old["tools"].get(tool_id) != curation:
            calls += 1
            await p.put_tool(ws, bundle_id, tool_id, GatewayToolCuration(**curation))
    for entry_id, curation in spec["member_prompts"].items():
        if old["member_prompts"].get(entry_id) != curation:
            member, _, name = entry_id.partition("__")
            calls += 1
            await p.put_member_prompt(ws, bundle_id, member, name, GatewayEntryCuration(**curation))
    for entry_id, curation in spec["member_resources"].items():
        if old["member_resources"].get(entry_id) != curation:
            parsed = parse_member_resource_id(entry_id)
            if parsed is None:
                continue
            calls += 1
            await p.put_member_resource(ws, bundle_id, parsed[0], parsed[1], GatewayEntryCuration(**curation))
    for name, resource in spec["resources"].items():
        if old["resources"].get(name) != resource:
            calls += 1
            await p.put_resource(ws, bundle_id, GatewayResourcePut(**resource))
    for name, prompt in spec["prompts"].items():
        if old["prompts"].get(name) != prompt:
            calls += 1
            await p.put_prompt(ws, bundle_id, GatewayPromptPut(**_prompt_body(prompt)))
    for name in old["prompts"]:
        if name not in spec["prompts"]:
            calls += 1
            await p.delete_prompt(ws, bundle_id, name)
    for name in old["resources"]:
        if name not in spec["resources"]:
            calls += 1
            await p.delete_resource(ws, bundle_id, name)
    return calls


def _prompt_body(prompt: dict[str, Any]) -> dict[str, Any]:
    body = dict(prompt)
    body["messages"] = [{k: v for k, v in m.items() if v is not None} for m in prompt["messages"]]
    return body
