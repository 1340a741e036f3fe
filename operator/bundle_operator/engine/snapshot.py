"""The live state of what an installation recorded, read with one list call per kind, and projected
into the same spec form the engine writes, so live and recorded compare field by field."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bundle_operator.engine.desired import source_spec
from bundle_operator.engine.record import Record, RecordedEntity
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    Agent,
    App,
    Channel,
    Entity,
    GatewayBundle,
    KnowledgeSet,
    KnowledgeSource,
    McpInstance,
    McpServer,
    Policy,
    SchemaField,
    SecretRef,
    Skill,
    Trigger,
)
from bundle_operator.platform.protocol import Listed, PlatformAPI

# Which platform collection holds the primary entity of each bundle entity kind.
PRIMARY_PATH: dict[str, str] = {
    "mcp": kinds.MCP_INSTANCES.path,
    "skill": kinds.SKILLS.path,
    "knowledge_set": kinds.KNOWLEDGE_SETS.path,
    "agent": kinds.AGENTS.path,
    "app": kinds.APPS.path,
    "channel": kinds.CHANNELS.path,
    "automation": kinds.TRIGGERS.path,
    "policy": kinds.POLICIES.path,
    "gateway": kinds.GATEWAY_BUNDLES.path,
}


@dataclass
class Snapshot:
    """Live entities by collection and id, plus the gateway's contents when one is recorded."""

    entities: dict[str, dict[str, Entity]] = field(default_factory=dict)
    gateway: dict[str, Any] | None = None
    calls: int = 0

    def get(self, path: str, entity_id: str | None) -> Entity | None:
        """A live entity, or None when it is gone."""
        if entity_id is None:
            return None
        return self.entities.get(path, {}).get(entity_id)


async def read_snapshot(platform: PlatformAPI, workspace: str, record: Record) -> Snapshot:
    """List every collection the record has entities in (one call per kind, pages aside)."""
    snapshot = Snapshot()
    # Secrets are never read back (their values are write-only), so they need no list call.
    owned = {part.path for recorded in record.entities for part in recorded.parts}
    paths = sorted((owned | {part.path for part in record.archived}) - {kinds.SECRETS.path})
    for path in paths:
        kind = kinds.BY_PATH.get(path)
        if kind is None:
            continue
        items = await platform.list_all(workspace, kind)
        snapshot.calls += 1
        # Shared lists come with their id map; the snapshot's maps are only read.
        snapshot.entities[path] = items.by_id() if isinstance(items, Listed) else {i.id: i for i in items}
    gateway = record.find("gateway:gateway")
    if gateway is not None:
        bundle = snapshot.get(kinds.GATEWAY_BUNDLES.path, gateway.primary_id)
        if isinstance(bundle, GatewayBundle):
            snapshot.gateway = await _read_gateway(platform, workspace, bundle)
            snapshot.calls += 6
    return snapshot


async def _read_gateway(platform: PlatformAPI, workspace: str, bundle: GatewayBundle) -> dict[str, Any]:
    members, tools, member_prompts, member_resources, prompts, resources = await asyncio.gather(
        platform.list_members(workspace, bundle.id),
        platform.list_tools(workspace, bundle.id),
        platform.list_member_prompts(workspace, bundle.id),
        platform.list_member_resources(workspace, bundle.id),
        platform.list_prompts(workspace, bundle.id),
        platform.list_resources(workspace, bundle.id),
    )
    return {
        "bundle": {"name": bundle.name, "description": bundle.description, "overview": bundle.overview},
        "members": [
            {"name": m.name, "mcp_instance_id": m.mcp_instance_id, "enabled": m.enabled}
            for m in sorted(members, key=lambda m: m.position)
        ],
        "tools": {
            t.id: {
                "enabled": t.enabled,
                "override_name": t.override_name,
                "override_title": t.override_title,
                "override_description": t.override_description,
                "override_annotations": t.override_annotations,
            }
            for t in tools
        },
        "member_prompts": {
            p.id: {"enabled": p.enabled, "title": p.title, "description": p.description}
            for p in member_prompts
        },
        "member_resources": {
            r.id: {"enabled": r.enabled, "title": r.title, "description": r.description}
            for r in member_resources
        },
        "prompts": {
            p.name: {
                "name": p.name,
                "title": p.title,
                "description": p.description,
                "arguments": [a.model_dump(mode="json") for a in p.arguments],
                "messages": [m.model_dump(mode="json") for m in p.messages],
            }
            for p in prompts
        },
        "resources": {
            r.name: {"name": r.name, "title": r.title, "mime_type": r.mime_type, "content": r.content}
            for r in resources
        },
    }


# What makes a live entity the one an install bound (seed 000): a trigger is the install's only
# while it carries the name ``{bundle}:{key}`` and runs the agent the install bound it to.
BINDING: dict[str, tuple[str, ...]] = {"automation": ("name", "agent_id")}


def binding_changes(kind: str, spec: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """The binding fields (as JSON Pointers) where ``live`` no longer matches ``spec``."""
    return [f"/{name}" for name in BINDING.get(kind, ()) if live.get(name) != spec.get(name)]


def project(recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
    """The live state of a recorded entity in spec form, or None when it is gone (or archived)."""
    primary = snapshot.get(PRIMARY_PATH[recorded.kind], recorded.primary_id)
    if primary is None:
        return None
    if isinstance(primary, McpInstance):
        server_part = next((p for p in recorded.parts if p.role == "server"), None)
        server = snapshot.get(kinds.MCP_SERVERS.path, server_part.id if server_part else primary.server_id)
        if not isinstance(server, McpServer):
            return None
        return _project_mcp(recorded, primary, server)
    if isinstance(primary, Skill):
        if primary.source_type == "inline":
            return {"source_type": "inline", "content": primary.content}
        return {"source_type": "github", "source_url": primary.source_url}
    if isinstance(primary, Agent):
        if primary.archived:
            return None  # an archived agent is installed again
        agent: dict[str, Any] = {
            "name": primary.name,
            "description": primary.description,
            "instructions": primary.instructions,
            "model": primary.model,
            "mcp_instance_ids": list(primary.mcp_instance_ids),
            "skill_ids": list(primary.skill_ids),
        }
        if primary.knowledge_set_ids:
            agent["knowledge_set_ids"] = list(primary.knowledge_set_ids)
        return agent
    if isinstance(primary, KnowledgeSet):
        return {
            "set": {
                "name": primary.name,
                "description": primary.description,
                "data_description": primary.data_description,
            },
            # Keyed sources only: one a user added (no key) is theirs, not a divergence (seed 004).
            "sources": {s.key: project_source(s) for s in primary.sources if s.key is not None},
        }
    if isinstance(primary, App):
        if primary.archived:
            return None  # installed again, like an archived agent
        # Every version archived shows as a document of None: drift, and an update adds a version.
        return {
            "name": primary.name,
            "description": primary.description,
            "mcp_instance_ids": list(primary.mcp_instance_ids),
            "document": None if primary.document is None else dict(primary.document),
        }
    if isinstance(primary, Channel):
        return {
            "type": primary.type,
            "name": primary.name,
            "agent_id": primary.agent_id,
            "enabled": primary.enabled,
        }
    if isinstance(primary, Trigger):
        return {
            "name": primary.name,
            "type": primary.type,
            "agent_id": primary.agent_id,
            "schedule": primary.schedule,
            "timezone": primary.timezone,
            "message": primary.message,
            "enabled": primary.enabled,
        }
    if isinstance(primary, Policy):
        return {"type": primary.type, "agent_id": primary.agent_id, "config": dict(primary.config)}
    if isinstance(primary, GatewayBundle):
        return _project_gateway(recorded, snapshot.gateway)
    return None


def project_source(source: KnowledgeSource) -> dict[str, Any]:
    """A live source in the spec form the engine writes (credential names, never values)."""
    return source_spec(source.type, source.model_dump(), list(source.credentials))


def own_sources(entity: Entity | None) -> list[KnowledgeSource]:
    """The sources of a live knowledge set that a user added on the platform (they have no key)."""
    if not isinstance(entity, KnowledgeSet):
        return []
    return [s for s in entity.sources if s.key is None]


_DEFAULT_CURATION = {"enabled": True, "title": None, "description": None}
_DEFAULT_TOOL_CURATION = {
    "enabled": True,
    "override_name": None,
    "override_title": None,
    "override_description": None,
    "override_annotations": None,
}


def _project_gateway(recorded: RecordedEntity, live: dict[str, Any] | None) -> dict[str, Any] | None:
    """The gateway as recorded sees it: curation entries the bundle set, plus any entry someone curated
    on the platform. Entries discovery found and nobody curated are not drift."""
    if live is None:
        return None
    out = dict(live)
    for section, default in (
        ("tools", _DEFAULT_TOOL_CURATION),
        ("member_prompts", _DEFAULT_CURATION),
        ("member_resources", _DEFAULT_CURATION),
    ):
        known = recorded.spec.get(section, {})
        out[section] = {k: v for k, v in live[section].items() if k in known or v != default}
    return out


def _schema(entries: list[SchemaField]) -> list[dict[str, Any]]:
    return [{"name": e.name, "type": e.type or ("secret" if e.secret else "string")} for e in entries]


def _project_mcp(recorded: RecordedEntity, instance: McpInstance, server: McpServer) -> dict[str, Any]:
    sites = {p.id: p.role.removeprefix("secret:") for p in recorded.parts if p.role.startswith("secret:")}

    def value(item: Any) -> Any:
        if isinstance(item, SecretRef):
            site = sites.get(item.secret_id)
            return {"secret": site} if site is not None else {"secret_id": item.secret_id}
        return item

    return {
        "server": {
            "name": server.name,
            "type": server.type,
            "command": server.command,
            "image": server.image,
            "endpoint_url": server.endpoint_url,
            "env_schema": _schema(server.env_schema),
            "headers_schema": _schema(server.headers_schema),
        },
        "instance": {
            "name": instance.name,
            "env": {k: value(v) for k, v in instance.env.items()},
            "headers": {k: value(v) for k, v in instance.headers.items()},
            "args": None if instance.args is None else [value(a) for a in instance.args],
            "endpoint_url": value(instance.endpoint_url),
            "context_signing": instance.context_signing,
        },
    }
