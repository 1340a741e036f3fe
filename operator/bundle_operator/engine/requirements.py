"""The bundle's requirements checked against the platform: what exists, what a substitution
maps to, and what is skipped because nothing on the platform can stand in for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from bundle_operator.document.gateway_rules import GATEWAY_ENTITY
from bundle_operator.document.issues import Code, Issue, blocking, shown, warning
from bundle_operator.document.knowledge import requirement_ref, tenant_address
from bundle_operator.document.models import Bundle, Requirement
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.analyze import requirement_key
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import NotFound
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


@dataclass
class Requirements:
    """What checking the requirements against the platform decided."""

    issues: list[Issue] = field(default_factory=list)
    stripped: set[str] = field(default_factory=set)  # "kind:ref" dropped by a strip policy
    # Tool substitutions that take effect: an MCP key of the bundle stands for another MCP, either
    # one of the bundle's own (aliases, key -> key) or an MCP instance on the platform (bound, id).
    aliases: dict[str, str] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)
    replaced: dict[str, str] = field(default_factory=dict)  # "mcp:key" -> why it is not installed


class _Catalog:
    """What the platform offers, read once per plan and only when a requirement asks."""

    def __init__(self, platform: PlatformAPI, workspace: str) -> None:
        self.platform = platform
        self.workspace = workspace
        self._models: set[str] | None = None
        self._models_read = False

    async def models(self) -> set[str] | None:
        """The model ids the platform lists; None when it has no model catalog."""
        if not self._models_read:
            self._models_read = True
            try:
                self._models = {m.id for m in await self.platform.list_models(self.workspace)}
            except NotFound:
                self._models = None
        return self._models

    async def instances(self, name_or_id: str) -> list[str]:
        """The ids of the MCP instances with this id or name (an agent can use only instances)."""
        if name_or_id.startswith(f"{kinds.MCP_INSTANCES.prefix}_"):
            try:
                return [(await self.platform.get(self.workspace, kinds.MCP_INSTANCES, name_or_id)).id]
            except NotFound:
                return []
        found = await self.platform.list_all(
            self.workspace, kinds.MCP_INSTANCES, filters={"name": name_or_id}
        )
        return [item.id for item in found]


async def check_requirements(
    platform: PlatformAPI,
    workspace: str,
    parsed: ParsedBundle,
    substitutions: Mapping[str, str],
    skipped: set[str],
) -> Requirements:
    """Check each requirement the offline analysis could not: does the platform have it?

    ``substitute`` requirements without a mapping were blocked offline already. A model is
    present when the platform's model catalog lists it; a tool when the bundle installs an MCP
    with that key or, for a tool the bundle does not bring, when the workspace has an MCP
    instance of that name. A knowledge source's address is never looked up (seed 004: whether a
    bucket is there and readable is for the first sync to say), so one without a mapping counts as
    missing: ``strip`` drops the bundle's sources at that address, ``block`` refuses. A mapped
    model must be in the catalog; a mapped tool is wired in where the bundle uses it, or refused.
    """
    bundle = parsed.bundle
    assert bundle is not None
    own_mcps = {m.key for m in bundle.mcps if f"mcp:{m.key}" not in skipped}
    check = _Check(bundle, own_mcps, skipped, _Catalog(platform, workspace))
    for index, requirement in enumerate(bundle.requires):
        ref = requirement_key(requirement)
        mapped = substitutions.get(ref)
        if mapped is None and requirement.policy == "substitute":
            continue  # blocked offline
        pointer = f"/requires/{index}"
        if requirement.kind == "model":
            present = await check.model(ref, requirement.ref, mapped, pointer)
        elif requirement.kind == "tool":
            present = await check.tool(ref, requirement.ref, mapped, pointer)
        else:
            # A mapped address: only the mapping's shape can be checked, and analyze did.
            present = None if mapped is not None else False
        if present is False:
            check.missing(requirement, ref, pointer)
    out = check.out
    out.issues = [i.with_line(parsed.source_map.line_of(i.path)) for i in out.issues]
    return out


@dataclass
class _Check:
    """One plan's requirement checks and what they decided so far."""

    bundle: Bundle
    own_mcps: set[str]
    skipped: set[str]
    catalog: _Catalog
    out: Requirements = field(default_factory=Requirements)

    async def model(self, ref: str, model: str, mapped: str | None, pointer: str) -> bool | None:
        """Whether the model is offered; None when there is nothing more to decide."""
        models = await self.catalog.models()
        if models is None:
            message = (
                f"requirement {shown(ref)} cannot be checked: the platform lists no models; "
                "it is assumed present"
            )
            self.out.issues.append(warning(Code.REQUIREMENT_NOT_VERIFIED, message, pointer))
            return None
        if mapped is None:
            return model in models
        if mapped not in models:
            message = (
                f"the substitution for {shown(ref)} names model '{shown(mapped)}', which the "
                "platform does not offer (GET .../models lists those it does)"
            )
            self.out.issues.append(blocking(Code.SUBSTITUTION_INVALID, message, pointer))
        return None

    async def tool(self, ref: str, tool: str, mapped: str | None, pointer: str) -> bool | None:
        """Whether the tool is there; a mapped one is wired in (None) or refused."""
        if mapped is not None:
            issue = await _substitute_tool(tool, mapped, self.own_mcps, self.skipped, self.catalog, self.out)
            if issue is not None:
                message = f"the substitution for {shown(ref)} {issue}"
                self.out.issues.append(blocking(Code.SUBSTITUTION_INVALID, message, pointer))
            return None
        if tool in {m.key for m in self.bundle.mcps}:
            return tool in self.own_mcps  # the bundle's own MCP, or nothing: never by name
        return bool(await self.catalog.instances(tool))

    def missing(self, requirement: Requirement, ref: str, pointer: str) -> None:
        """A requirement the platform lacks: refused under ``block``, else stripped."""
        if requirement.policy == "block":
            message = (
                f"requirement {shown(ref)} is missing on the platform and its policy is block; "
                f"substitute it (--substitute {shown(ref)}=VALUE) or install where it exists"
            )
            self.out.issues.append(blocking(Code.REQUIREMENT_MISSING, message, pointer))
            return
        self.out.stripped.add(ref)
        users = _users(self.bundle, requirement.kind, requirement.ref)
        dropped = f"dropped from {', '.join(users)}" if users else "nothing in the bundle refers to it"
        if requirement.kind == "model" and users:
            dropped += ", which run on the platform's default model"
        message = f"requirement {shown(ref)} is missing on the platform; it is {dropped}"
        self.out.issues.append(warning(Code.REQUIREMENT_STRIPPED, message, pointer))


def _users(bundle: Bundle, kind: str, ref: str) -> list[str]:
    """The entities that refer to a requirement (a model by name, a tool by MCP key)."""
    if kind == "model":
        return [f"agent:{a.key}" for a in bundle.agents if a.model == ref]
    if kind == "tool":
        users = [f"agent:{a.key}" for a in bundle.agents if ref in a.mcps]
        if bundle.gateway is not None and ref in bundle.gateway.members:
            users.append(GATEWAY_ENTITY)
        return users
    if kind == "knowledge_source":
        return [
            f"knowledge_set:{k.key} (source {key})"
            for k in bundle.knowledge_sets
            for key, source in k.sources.items()
            if (address := tenant_address(source.model_dump())) is not None
            and requirement_ref(source.type, address[1]) == ref
        ]
    return []


async def _substitute_tool(
    ref: str, mapped: str, own_mcps: set[str], skipped: set[str], catalog: _Catalog, out: Requirements
) -> str | None:
    """Make ``tool:ref=mapped`` take effect, or say why it cannot (the rest of the message)."""
    if mapped == ref and ref in own_mcps:
        return None
    if mapped in own_mcps:
        target = f"the bundle's MCP '{shown(mapped)}'"
        out.aliases[f"mcp:{ref}"] = f"mcp:{mapped}"
    else:
        found = await catalog.instances(mapped)
        if not found:
            return (
                f"names '{shown(mapped)}', which is neither an MCP of the bundle nor an MCP instance "
                "(by name or id) in the workspace"
            )
        if len(found) > 1:
            return (
                f"names '{shown(mapped)}', which several MCP instances in the workspace are called; "
                "give the id of the one to use"
            )
        target = f"the workspace's MCP instance {found[0]}"
        out.bound[f"mcp:{ref}"] = found[0]
    if f"mcp:{ref}" in skipped or ref in own_mcps:
        out.replaced[f"mcp:{ref}"] = f"replaced by {target} (substitution tool:{shown(ref)})"
    return None
