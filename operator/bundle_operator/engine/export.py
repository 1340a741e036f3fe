"""Export: a workspace's agents, MCPs, skills, automations, channels and policies as one bundle.

No credential travels: secret-backed values are never read and become secret setup fields, and
plain MCP configuration is screened (seed 000) the same way. Keys are derived from names and
setup keys from the MCP key and the position, so one workspace always exports the same bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from bundle_operator.document.credentials import (
    authorization_prefix,
    is_credentialed_url,
    screen_args,
    value_is_credential,
)
from bundle_operator.document.models import SCHEMA_VERSION
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    Agent,
    Channel,
    McpInstance,
    McpServer,
    Policy,
    SecretRef,
    Skill,
    Trigger,
)
from bundle_operator.platform.protocol import PlatformAPI


class ExportRefused(Exception):
    """The workspace holds something the export cannot represent; ``entity`` names it."""

    def __init__(self, entity: str, message: str) -> None:
        super().__init__(f"{entity}: {message}")
        self.entity = entity
        self.message = message


@dataclass
class _Setup:
    fields: list[dict[str, Any]] = field(default_factory=list)

    def secret(self, key: str, label: str) -> str:
        self.fields.append({"key": key, "label": label, "type": "secret"})
        return f"${{setup.{key}}}"


def make_key(name: str, taken: set[str]) -> str:
    """A key from a display name: letters, digits and '_', starting with a letter, unique."""
    base = re.sub(r"[^a-zA-Z0-9]+", "_", name).strip("_").lower() or "item"
    if not base[0].isalpha():
        base = f"x_{base}"
    base = base[:60]
    key, n = base, 2
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    taken.add(key)
    return key


async def export_workspace(platform: PlatformAPI, workspace: str, name: str, version: str = "0.0.0") -> str:
    """The workspace as a bundle document (YAML), deterministic for the same workspace."""
    servers = {s.id: s for s in await platform.list_all(workspace, kinds.MCP_SERVERS)}
    instances = await platform.list_all(workspace, kinds.MCP_INSTANCES)
    skills = await platform.list_all(workspace, kinds.SKILLS)
    agents = [a for a in await platform.list_all(workspace, kinds.AGENTS) if not a.archived]
    channels = await platform.list_all(workspace, kinds.CHANNELS)
    triggers = await platform.list_all(workspace, kinds.TRIGGERS)
    policies = await platform.list_all(workspace, kinds.POLICIES)
    return render(
        build_document(name, version, servers, instances, skills, agents, channels, triggers, policies)
    )


def build_document(
    name: str,
    version: str,
    servers: dict[str, McpServer],
    instances: list[McpInstance],
    skills: list[Skill],
    agents: list[Agent],
    channels: list[Channel],
    triggers: list[Trigger],
    policies: list[Policy],
) -> dict[str, Any]:
    """Build the document from listed entities (in the platform's creation order)."""
    taken: set[str] = set()
    setup = _Setup()
    mcp_keys: dict[str, str] = {}
    mcps: list[dict[str, Any]] = []
    for instance in instances:
        server = servers.get(instance.server_id)
        if server is None:
            continue
        key = make_key(instance.name, taken)
        mcp_keys[instance.id] = key
        mcps.append(_mcp(key, instance, server, setup))
    skill_keys: dict[str, str] = {}
    skill_docs: list[dict[str, Any]] = []
    for skill in skills:
        key = make_key(skill.name, taken)
        skill_keys[skill.id] = key
        if skill.source_type == "github" and skill.source_url:
            skill_docs.append({"key": key, "source_type": "github", "source_url": skill.source_url})
        else:
            skill_docs.append({"key": key, "source_type": "inline", "content": skill.content})
    agent_keys: dict[str, str] = {}
    agent_docs: list[dict[str, Any]] = []
    for agent in agents:
        key = make_key(agent.name, taken)
        agent_keys[agent.id] = key
        entity = f"agent '{agent.name}' ({agent.id})"
        for instance_id in agent.mcp_instance_ids:
            if instance_id not in mcp_keys:
                raise ExportRefused(
                    entity, f"refers to MCP instance {instance_id}, which the export cannot represent"
                )
        for skill_id in agent.skill_ids:
            if skill_id not in skill_keys:
                raise ExportRefused(entity, f"refers to skill {skill_id}, which the export cannot represent")
        doc: dict[str, Any] = {"key": key, "name": agent.name}
        if agent.description:
            doc["description"] = agent.description
        if agent.instructions:
            doc["instructions"] = agent.instructions
        doc["model"] = agent.model
        doc["mcps"] = [mcp_keys[i] for i in agent.mcp_instance_ids]
        doc["skills"] = [skill_keys[i] for i in agent.skill_ids]
        agent_docs.append(doc)
    channel_docs = []
    for channel in channels:
        if channel.agent_id not in agent_keys:
            continue  # bound to an archived or unknown agent: nothing to wire it to
        key = make_key(channel.name or f"{channel.type}_channel", taken)
        token = setup.secret(f"{key}_bot_token", f"Bot token of channel {channel.name or key}")
        channel_docs.append(
            {"key": key, "type": channel.type, "agent": agent_keys[channel.agent_id], "bot_token": token}
        )
    automation_docs = []
    for trigger in triggers:
        if trigger.agent_id not in agent_keys:
            continue
        label = trigger.name.split(":", 1)[1] if ":" in trigger.name else trigger.name
        key = make_key(label, taken)
        automation_docs.append(
            {
                "key": key,
                "type": trigger.type,
                "agent": agent_keys[trigger.agent_id],
                "schedule": trigger.schedule,
                "timezone": trigger.timezone,
                "message": trigger.message,
            }
        )
    policy_docs = []
    for policy in policies:
        if policy.agent_id not in agent_keys:
            continue
        key = make_key(f"{agent_keys[policy.agent_id]}_{policy.type}", taken)
        policy_docs.append(
            {"key": key, "type": policy.type, "agent": agent_keys[policy.agent_id], "config": policy.config}
        )
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": name, "version": version}
    for section, items in (
        ("setup", setup.fields),
        ("mcps", mcps),
        ("skills", skill_docs),
        ("agents", agent_docs),
        ("channels", channel_docs),
        ("automations", automation_docs),
        ("policies", policy_docs),
    ):
        if items:
            document[section] = items
    return document


def _mcp(key: str, instance: McpInstance, server: McpServer, setup: _Setup) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": key, "name": instance.name, "type": server.type}

    def secret_field(site: str, label: str) -> str:
        return setup.secret(f"{key}_{site}", f"{label} of MCP {instance.name}")

    def screened(site: str, label: str, name: str, value: str | SecretRef) -> str:
        if isinstance(value, SecretRef):
            return secret_field(site, label)
        if value_is_credential(name, value):
            return authorization_prefix(value) + secret_field(site, label)
        return value

    if server.type == "url":
        url = instance.endpoint_url if instance.endpoint_url is not None else server.endpoint_url
        if isinstance(url, SecretRef) or (isinstance(url, str) and is_credentialed_url(url)):
            doc["endpoint_url"] = secret_field("url", "Endpoint URL")
        else:
            doc["endpoint_url"] = url
        if instance.headers:
            doc["headers"] = {
                name: screened(f"header_{i}", f"Header {name}", name, value)
                for i, (name, value) in enumerate(sorted(instance.headers.items()))
            }
        if instance.context_signing:
            doc["context_secret"] = secret_field("context_secret", "Call-context signing key")
        return doc
    if server.type == "command":
        doc["command"] = server.command
    else:
        doc["image"] = server.image
    args: list[str | SecretRef] = list(instance.args if instance.args is not None else server.args)
    plain = [a if isinstance(a, str) else "" for a in args]
    findings = {f.index: f.prefix for f in screen_args(plain)}
    out_args: list[str] = []
    for index, arg in enumerate(args):
        if isinstance(arg, SecretRef):
            out_args.append(secret_field(f"arg_{index}", f"Argument {index}"))
        elif index in findings:
            out_args.append(findings[index] + secret_field(f"arg_{index}", f"Argument {index}"))
        else:
            out_args.append(arg)
    if out_args:
        doc["args"] = out_args
    if instance.env:
        doc["env"] = {
            name: screened(f"env_{i}", f"Environment variable {name}", name, value)
            for i, (name, value) in enumerate(sorted(instance.env.items()))
        }
    return doc


def render(document: dict[str, Any]) -> str:
    """YAML with the document's own key order, wide lines, literal blocks for multi-line text."""

    class _Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value and not value.startswith(" ") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, text)
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
