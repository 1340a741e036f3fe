"""What the platform should hold for each bundle entity: comparable specs and the secret values.

A spec is plain JSON in the platform's own field names, with every secret value replaced by a
marker naming its site (``{"secret": "env:GITHUB_TOKEN"}``); the values themselves travel beside
it, in memory only. Specs of entities that refer to others carry the platform ids of those (or a
``<new kind:key>`` marker while they are not created yet), so a re-created MCP shows up as a
changed agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bundle_operator.document import placeholders
from bundle_operator.document.credentials import install_sees_credential
from bundle_operator.document.knowledge import SOURCE_FIELDS, TENANT_ADDRESS, requirement_ref
from bundle_operator.document.models import (
    Agent,
    App,
    Automation,
    Bundle,
    Channel,
    CommandMcp,
    DockerMcp,
    Gateway,
    InlineSkill,
    KnowledgeSet,
    Mcp,
    Policy,
    Skill,
    UrlMcp,
)
from bundle_operator.engine.record import KIND_ORDER
from bundle_operator.platform.models import member_resource_id


@dataclass(frozen=True)
class Inputs:
    """Everything besides the document that decides the desired state."""

    bundle: Bundle
    setup: Mapping[str, str]
    secret_fields: frozenset[str]
    activate: bool = False
    substitutions: Mapping[str, str] = field(default_factory=dict)
    stripped: frozenset[str] = frozenset()  # "kind:ref" requirements dropped


@dataclass
class Desired:
    """The desired state of one bundle entity."""

    kind: str
    key: str
    spec: dict[str, Any]
    secrets: dict[str, str] = field(default_factory=dict)

    @property
    def entity(self) -> str:
        """``kind:key``."""
        return f"{self.kind}:{self.key}"


# An agent the bundle gives no model runs on the platform's default, which the API spells so.
DEFAULT_MODEL = "default"


def new_marker(entity: str) -> str:
    """Stands for the id of an entity that is not created yet."""
    return f"<new {entity}>"


def resolve(ids: Mapping[str, str], entity: str) -> str:
    """The platform id of an entity, or its marker."""
    return ids.get(entity) or new_marker(entity)


def trigger_name(bundle: Bundle, key: str) -> str:
    """Triggers are named ``{bundle}:{key}``: the name is how a re-run recognises its own."""
    return f"{bundle.name}:{key}"


def gateway_name(bundle: Bundle) -> str:
    """The gateway bundle's name on the platform: the bundle name in the URL-safe alphabet."""
    return bundle.name.replace(".", "-")[:64]


class _Filler:
    """Substitutes setup values into one MCP's strings and collects the secret ones."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.secrets: dict[str, str] = {}

    def is_secret(self, text: str) -> bool:
        return any(key.strip() in self.inputs.secret_fields for key in placeholders.references(text))

    def fill(self, text: str) -> str:
        return placeholders.substitute(text, lambda key: self.inputs.setup.get(key, ""))

    def field_type(self, name: str, text: str) -> str:
        """How an env or header entry is declared to the MCP service.

        A value backed by a ``secret`` setup field is a secret (seed 000: the setup field's type
        decides, not a guess from the name). A value that looks like a credential by the shared
        screening rules but is not backed by one (analyze blocks those) is declared secret as
        well, so the platform's own ``secret_required`` check refuses the plain value instead of
        being switched off by a ``string`` declaration.
        """
        if self.is_secret(text) or install_sees_credential(name, self.fill(text)):
            return "secret"
        return "string"

    def value(self, site: str, text: str) -> Any:
        if self.is_secret(text):
            self.secrets[site] = self.fill(text)
            return {"secret": site}
        return self.fill(text)


def desired_mcp(mcp: Mcp, inputs: Inputs) -> Desired:
    """An MCP: the server spec (how to run or reach it) and the instance (its configured values)."""
    filler = _Filler(inputs)
    server: dict[str, Any] = {"name": mcp.name, "type": mcp.type, "command": None, "image": None}
    instance: dict[str, Any] = {
        "name": mcp.name,
        "env": {},
        "headers": {},
        "args": None,
        "endpoint_url": None,
    }
    if isinstance(mcp, CommandMcp | DockerMcp):
        if isinstance(mcp, CommandMcp):
            server["command"] = mcp.command
        else:
            server["image"] = mcp.image
        server["endpoint_url"] = None
        server["env_schema"] = [
            {"name": name, "type": filler.field_type(name, text)} for name, text in mcp.env.items()
        ]
        server["headers_schema"] = []
        instance["env"] = {name: filler.value(f"env:{name}", text) for name, text in mcp.env.items()}
        instance["args"] = [filler.value(f"arg:{i}", text) for i, text in enumerate(mcp.args)]
    else:
        assert isinstance(mcp, UrlMcp)
        url = filler.value("endpoint_url", mcp.endpoint_url)
        # The server spec names where the server is; a credentialed URL stays on the instance only.
        server["endpoint_url"] = _origin(filler.fill(mcp.endpoint_url)) if isinstance(url, dict) else url
        server["env_schema"] = []
        server["headers_schema"] = [
            {"name": name, "type": filler.field_type(name, text)} for name, text in mcp.headers.items()
        ]
        instance["headers"] = {
            name: filler.value(f"header:{name}", text) for name, text in mcp.headers.items()
        }
        instance["endpoint_url"] = url if isinstance(url, dict) else None
    instance["context_signing"] = mcp.context_secret is not None
    if mcp.context_secret is not None:
        filler.secrets["context_secret"] = filler.fill(mcp.context_secret)
    return Desired("mcp", mcp.key, {"server": server, "instance": instance}, filler.secrets)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "invalid"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/"


def desired_skill(skill: Skill) -> Desired:
    """A skill: inline SKILL.md content or a GitHub source."""
    if isinstance(skill, InlineSkill):
        spec: dict[str, Any] = {"source_type": "inline", "content": skill.content}
    else:
        spec = {"source_type": "github", "source_url": skill.source_url}
    return Desired("skill", skill.key, spec)


def desired_agent(agent: Agent, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
    """An agent wired by id to the bundle's MCP instances and skills that are installed."""
    mcps = [m for m in agent.mcps if f"mcp:{m}" not in skipped and f"tool:{m}" not in inputs.stripped]
    model = agent.model
    if model is not None:
        model = inputs.substitutions.get(f"model:{model}", model)
        if f"model:{agent.model}" in inputs.stripped:
            model = None
    spec: dict[str, Any] = {
        "name": agent.name,
        "description": agent.description or "",
        "instructions": agent.instructions or "",
        "model": model or DEFAULT_MODEL,
        "mcp_instance_ids": [resolve(ids, f"mcp:{m}") for m in mcps],
        "skill_ids": [resolve(ids, f"skill:{s}") for s in agent.skills],
    }
    if agent.knowledge_sets:
        # Only when used: an agent installed before 0.2.0 keeps the spec it was recorded with.
        spec["knowledge_set_ids"] = [resolve(ids, f"knowledge_set:{k}") for k in agent.knowledge_sets]
    return Desired("agent", agent.key, spec)


def source_site(source_key: str, name: str) -> str:
    """Where a source credential's value goes among an entity's secrets."""
    return f"source:{source_key}:{name}"


def source_spec(source_type: str, fields: Mapping[str, Any], credentials: list[str]) -> dict[str, Any]:
    """A source in spec form: its type, every field of the type (None when unset), its schedule
    and the names of its credentials (values are secrets, kept beside the spec)."""
    spec: dict[str, Any] = {"type": source_type}
    lists = SOURCE_FIELDS[source_type].lists
    for name in SOURCE_FIELDS[source_type].all:
        value = fields.get(name)
        spec[name] = list(value or []) if name in lists else value
    spec["sync_schedule"] = fields.get("sync_schedule")
    spec["credentials"] = sorted(credentials)
    return spec


def desired_knowledge_set(knowledge_set: KnowledgeSet, inputs: Inputs) -> Desired:
    """A knowledge set and its sources by key, with tenant addresses substituted as mapped.

    A substitution replaces the address alone (seed 004); a stripped requirement drops the sources
    at that address.
    """
    secrets: dict[str, str] = {}
    sources: dict[str, Any] = {}
    for key, source in knowledge_set.sources.items():
        fields = source.model_dump(exclude={"type", "credentials"})
        address_field = TENANT_ADDRESS.get(source.type)
        if address_field is not None:
            ref = f"knowledge_source:{requirement_ref(source.type, fields[address_field])}"
            if ref in inputs.stripped:
                continue
            mapped = inputs.substitutions.get(ref)
            if mapped is not None:
                fields[address_field] = mapped.partition(":")[2].strip()
        names: list[str] = []
        for name, text in source.credentials.items():
            value = placeholders.substitute(text, lambda k: inputs.setup.get(k, ""))
            if value:  # an optional secret field left empty: the source goes without that credential
                secrets[source_site(key, name)] = value
                names.append(name)
        sources[key] = source_spec(source.type, fields, names)
    spec = {
        "set": {
            "name": knowledge_set.name,
            "description": knowledge_set.description or "",
            "data_description": knowledge_set.data_description or "",
        },
        "sources": sources,
    }
    return Desired("knowledge_set", knowledge_set.key, spec, secrets)


def desired_app(app: App, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
    """An app: its texts, the MCP instances its tools come from, and its document."""
    mcps = [m for m in app.mcps if f"mcp:{m}" not in skipped and f"tool:{m}" not in inputs.stripped]
    spec: dict[str, Any] = {
        "name": app.name,
        "description": app.description or "",
        "mcp_instance_ids": [resolve(ids, f"mcp:{m}") for m in mcps],
        "document": dict(app.document),
    }
    return Desired("app", app.key, spec)


def desired_channel(channel: Channel, inputs: Inputs, ids: Mapping[str, str]) -> Desired:
    """A Telegram channel; its bot token is a secret value, stored by the platform."""
    token = placeholders.substitute(channel.bot_token, lambda key: inputs.setup.get(key, ""))
    spec = {
        "type": channel.type,
        "name": channel.key,
        "agent_id": resolve(ids, f"agent:{channel.agent}"),
        "enabled": channel.enabled and inputs.activate,
    }
    return Desired("channel", channel.key, spec, {"bot_token": token})


def desired_automation(automation: Automation, inputs: Inputs, ids: Mapping[str, str]) -> Desired:
    """A cron trigger named ``{bundle}:{key}``, enabled only once activation is asked for."""
    spec = {
        "name": trigger_name(inputs.bundle, automation.key),
        "type": automation.type,
        "agent_id": resolve(ids, f"agent:{automation.agent}"),
        "schedule": automation.schedule,
        "timezone": automation.timezone,
        "message": automation.message,
        "enabled": automation.enabled and inputs.activate,
    }
    return Desired("automation", automation.key, spec)


def desired_policy(policy: Policy, ids: Mapping[str, str]) -> Desired:
    """A policy bound to an agent."""
    spec = {
        "type": policy.type,
        "agent_id": resolve(ids, f"agent:{policy.agent}"),
        "config": dict(policy.config),
    }
    return Desired("policy", policy.key, spec)


def desired_gateway(gateway: Gateway, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
    """The gateway bundle: texts, ordered members, curation, and its own prompts and resources.

    Curation and content are keyed by their ids so that a three-way merge works entry by entry.
    """
    members = [m for m in gateway.members if f"mcp:{m}" not in skipped]
    spec: dict[str, Any] = {
        "bundle": {
            "name": gateway_name(inputs.bundle),
            "description": gateway.description or "",
            "overview": gateway.overview or "",
        },
        "members": [
            {"name": m, "mcp_instance_id": resolve(ids, f"mcp:{m}"), "enabled": True} for m in members
        ],
        "tools": {
            f"{t.member}__{t.tool}": {
                "enabled": t.enabled,
                "override_name": t.override_name,
                "override_title": t.override_title,
                "override_description": t.override_description,
                "override_annotations": t.override_annotations,
            }
            for t in gateway.tools
            if t.member in members
        },
        "member_prompts": {
            f"{p.member}__{p.name}": {"enabled": p.enabled, "title": p.title, "description": p.description}
            for p in gateway.member_prompts
            if p.member in members
        },
        "member_resources": {
            member_resource_id(r.member, r.uri): {
                "enabled": r.enabled,
                "title": r.title,
                "description": r.description,
            }
            for r in gateway.member_resources
            if r.member in members
        },
        "prompts": {
            p.name: {
                "name": p.name,
                "title": p.title,
                "description": p.description or "",
                "arguments": [
                    {"name": a.name, "description": "", "required": a.required, "values": list(a.values)}
                    for a in p.arguments
                ],
                "messages": [{"role": m.role, "text": m.text, "resource": m.resource} for m in p.messages],
            }
            for p in gateway.prompts
        },
        "resources": {
            r.name: {"name": r.name, "title": r.title, "mime_type": r.mime_type, "content": r.content}
            for r in gateway.resources
        },
    }
    return Desired("gateway", "gateway", spec)


LEVELS: tuple[str, ...] = KIND_ORDER


def desired_level(level: str, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> list[Desired]:
    """The desired state of every entity of one install level, in document order."""
    bundle = inputs.bundle
    out: list[Desired] = []
    if level == "mcp":
        out = [desired_mcp(m, inputs) for m in bundle.mcps]
    elif level == "skill":
        out = [desired_skill(s) for s in bundle.skills]
    elif level == "knowledge_set":
        out = [desired_knowledge_set(k, inputs) for k in bundle.knowledge_sets]
    elif level == "agent":
        out = [desired_agent(a, inputs, ids, skipped) for a in bundle.agents]
    elif level == "app":
        out = [desired_app(a, inputs, ids, skipped) for a in bundle.apps]
    elif level == "channel":
        out = [desired_channel(c, inputs, ids) for c in bundle.channels]
    elif level == "automation":
        out = [desired_automation(a, inputs, ids) for a in bundle.automations]
    elif level == "policy":
        out = [desired_policy(p, ids) for p in bundle.policies]
    elif level == "gateway" and bundle.gateway is not None:
        out = [desired_gateway(bundle.gateway, inputs, ids, skipped)]
    return [d for d in out if d.entity not in skipped]
