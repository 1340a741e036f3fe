"""Export: a workspace's agents, MCPs, skills, knowledge sets, apps, automations, channels and
policies as one bundle.

No credential travels: secret-backed values are never read and become secret setup fields, and
plain MCP configuration is screened (seed 000) the same way. Keys are derived from names and
setup keys from the MCP key and the position, so one workspace always exports the same bytes.

The document lists under ``requires`` the models and tools its agents use (seed 004: a model is
instance-specific, so ``substitute``; a tool, one of the bundle's own MCPs, ``strip``), and every
agent keeps the model it has on the platform, the platform's ``default`` included. What the export
replaced with a setup reference, and what it left out, is reported by path (a JSON Pointer into the
document, or the platform collection and id), never by value: the file itself looks unremarkable.

A knowledge set travels as its sources, never its documents (seed 004). What ties a source to the
exporting organisation (login names, the SMB domain, OneDrive shared links, the S3 endpoint) is
left out and reported; a tenant address (bucket, host, server, base URL) stays as written and is
declared under ``requires`` as a ``knowledge_source`` to substitute. An app travels as its latest
unarchived version. A document with neither keeps schema 0.1.0, byte for byte as before.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml

from bundle_operator.document.credentials import (
    authorization_prefix,
    is_authorization_value,
    is_credentialed_url,
    name_looks_like_credential,
    screen_args,
    value_is_credential,
)
from bundle_operator.document.keys import MAX_KEY_LENGTH
from bundle_operator.document.knowledge import (
    ORGANISATION_FIELDS,
    SOURCE_FIELDS,
    requirement_ref,
    tenant_address,
)
from bundle_operator.document.models import LATEST_SCHEMA_VERSION, SCHEMA_VERSION
from bundle_operator.document.pointer import join_pointer
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    Agent,
    App,
    Channel,
    GatewayBundle,
    KnowledgeSet,
    KnowledgeSource,
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


class Replaced(NamedTuple):
    """A value the export did not write: ``path`` (a JSON Pointer into the document) now holds a
    reference to the secret setup field ``setup``; ``reason`` says why, never what it was."""

    path: str
    setup: str
    reason: str


class Dropped(NamedTuple):
    """Something of the workspace the document leaves out: ``path`` is the platform collection and
    id (``agents/agt_…``), or a JSON Pointer into the document for a field that was dropped."""

    path: str
    reason: str


@dataclass
class ExportReport:
    """Every value replaced with a setup reference and everything dropped, by path, never by value."""

    replaced: list[Replaced] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The report as JSON data."""
        return {
            "replaced": [r._asdict() for r in self.replaced],
            "dropped": [d._asdict() for d in self.dropped],
        }

    def lines(self) -> list[str]:
        """The report for a person, a line per item."""
        out = [f"replaced {r.path} with ${{setup.{r.setup}}} ({r.reason})" for r in self.replaced]
        out += [f"dropped {d.path}: {d.reason}" for d in self.dropped]
        return out


@dataclass(frozen=True)
class Export:
    """An exported workspace: the document, its YAML text, and the report."""

    document: dict[str, Any]
    text: str
    report: ExportReport


# Why a value was replaced (the wording of the report).
SECRET_BACKED = "secret-backed value, never read"
CREDENTIAL_NAME = "credential-like name"
CREDENTIALED_URL = "credentialed URL"
AUTHORIZATION_VALUE = "Authorization-style value"
CREDENTIAL_ARGUMENT = "credential argument"
SIGNING_KEY = "call-context signing key, never read"
BOT_TOKEN = "channel bot token, never read"
SOURCE_CREDENTIAL = "knowledge source credential, never read"
ORGANISATION = "ties the source to the exporting organisation; set it afresh after installing"
SOURCE_URL_CREDENTIAL = "the source's base URL carries a credential; add the source afresh after installing"


@dataclass
class _Setup:
    fields: list[dict[str, Any]] = field(default_factory=list)
    report: ExportReport = field(default_factory=ExportReport)

    def secret(self, key: str, label: str, path: str = "", reason: str = "") -> str:
        taken = {f["key"] for f in self.fields}
        unique, n = _bounded_key(key), 2
        while unique in taken:  # two places whose derived keys meet: never one field for both
            unique, n = _bounded_key(f"{key}_{n}"), n + 1
        key = unique
        self.fields.append({"key": key, "label": label, "type": "secret"})
        if path:
            self.report.replaced.append(Replaced(path, key, reason))
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
    return (await export_with_report(platform, workspace, name, version)).text


async def export_with_report(
    platform: PlatformAPI, workspace: str, name: str, version: str = "0.0.0"
) -> Export:
    """The workspace as a bundle document, with the report of what was replaced and dropped."""
    servers = {s.id: s for s in await platform.list_all(workspace, kinds.MCP_SERVERS)}
    instances = await platform.list_all(workspace, kinds.MCP_INSTANCES)
    skills = await platform.list_all(workspace, kinds.SKILLS)
    listed = await platform.list_all(workspace, kinds.AGENTS)
    channels = await platform.list_all(workspace, kinds.CHANNELS)
    triggers = await platform.list_all(workspace, kinds.TRIGGERS)
    policies = await platform.list_all(workspace, kinds.POLICIES)
    gateways = await platform.list_all(workspace, kinds.GATEWAY_BUNDLES)
    knowledge_sets = await platform.list_all(workspace, kinds.KNOWLEDGE_SETS)
    report = ExportReport()
    apps = []
    for app in await platform.list_all(workspace, kinds.APPS):
        if app.archived or app.document is None:
            why = "an archived app" if app.archived else "an app whose every version is archived"
            report.dropped.append(Dropped(f"{kinds.APPS.path}/{app.id}", why))
        else:
            apps.append(app)
    agents = []
    for agent in listed:
        if agent.archived:
            report.dropped.append(Dropped(f"{kinds.AGENTS.path}/{agent.id}", "an archived agent"))
        else:
            agents.append(agent)
    document = build_document(
        name,
        version,
        servers,
        instances,
        skills,
        agents,
        channels,
        triggers,
        policies,
        report=report,
        knowledge_sets=knowledge_sets,
        apps=apps,
    )
    _drop_gateways(gateways, report)
    return Export(document, render(document), report)


def _drop_gateways(gateways: list[GatewayBundle], report: ExportReport) -> None:
    for gateway in gateways:
        report.dropped.append(
            Dropped(
                f"{kinds.GATEWAY_BUNDLES.path}/{gateway.id}",
                "a gateway bundle (and its endpoints): the export does not write gateways",
            )
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
    *,
    report: ExportReport | None = None,
    knowledge_sets: list[KnowledgeSet] | None = None,
    apps: list[App] | None = None,
) -> dict[str, Any]:
    """Build the document from listed entities (in the platform's creation order); what was replaced
    and dropped goes to ``report`` when one is given."""
    taken: set[str] = set()
    setup = _Setup(report=report if report is not None else ExportReport())
    dropped = setup.report.dropped
    mcp_keys: dict[str, str] = {}
    mcps: list[dict[str, Any]] = []
    used_servers: set[str] = set()
    for instance in instances:
        server = servers.get(instance.server_id)
        if server is None:
            dropped.append(
                Dropped(f"{kinds.MCP_INSTANCES.path}/{instance.id}", "its MCP server spec is gone")
            )
            continue
        used_servers.add(server.id)
        key = make_key(instance.name, taken)
        mcp_keys[instance.id] = key
        mcps.append(_mcp(key, len(mcps), instance, server, setup))
    for server_id in sorted(servers.keys() - used_servers):
        dropped.append(Dropped(f"{kinds.MCP_SERVERS.path}/{server_id}", "a server spec no MCP instance uses"))
    skill_keys: dict[str, str] = {}
    skill_docs: list[dict[str, Any]] = []
    for skill in skills:
        key = make_key(skill.name, taken)
        skill_keys[skill.id] = key
        if skill.source_type == "github" and skill.source_url:
            skill_docs.append({"key": key, "source_type": "github", "source_url": skill.source_url})
        else:
            skill_docs.append({"key": key, "source_type": "inline", "content": skill.content})
    set_keys: dict[str, str] = {}
    set_docs: list[dict[str, Any]] = []
    tenant_refs: list[str] = []
    for knowledge_set in knowledge_sets or []:
        key = make_key(knowledge_set.name, taken)
        set_keys[knowledge_set.id] = key
        set_docs.append(_knowledge_set(key, len(set_docs), knowledge_set, setup, tenant_refs))
    agent_keys: dict[str, str] = {}
    agent_docs: list[dict[str, Any]] = []
    for agent in agents:
        key = make_key(agent.name, taken)
        agent_keys[agent.id] = key
        entity = f"agent '{agent.name}' ({agent.id})"
        agent_mcps = _keys_of(entity, agent.mcp_instance_ids, mcp_keys, "MCP instance")
        agent_skills = _keys_of(entity, agent.skill_ids, skill_keys, "skill")
        agent_sets = _keys_of(entity, agent.knowledge_set_ids, set_keys, "knowledge set")
        doc: dict[str, Any] = {"key": key, "name": agent.name}
        if agent.description:
            doc["description"] = agent.description
        if agent.instructions:
            doc["instructions"] = agent.instructions
        doc["model"] = agent.model
        doc["mcps"] = agent_mcps
        doc["skills"] = agent_skills
        if agent_sets:
            doc["knowledge_sets"] = agent_sets
        agent_docs.append(doc)
    app_docs: list[dict[str, Any]] = []
    for app in apps or []:
        app_mcps = _keys_of(f"app '{app.name}' ({app.id})", app.mcp_instance_ids, mcp_keys, "MCP instance")
        app_doc: dict[str, Any] = {"key": make_key(app.name, taken), "name": app.name}
        if app.description:
            app_doc["description"] = app.description
        app_doc["document"] = app.document
        if app_mcps:
            app_doc["mcps"] = app_mcps
        app_docs.append(app_doc)
    unbound = "bound to an agent the export does not write (archived or gone)"
    enabled = "was enabled; the bundle installs it disabled until the installation is activated"
    channel_docs: list[dict[str, Any]] = []
    for channel in channels:
        if channel.agent_id not in agent_keys:
            # Bound to an archived or unknown agent: nothing to wire it to.
            dropped.append(Dropped(f"{kinds.CHANNELS.path}/{channel.id}", unbound))
            continue
        key = make_key(channel.name or f"{channel.type}_channel", taken)
        path = join_pointer("/channels", len(channel_docs))
        token = setup.secret(
            f"{key}_bot_token",
            f"Bot token of channel {channel.name or key}",
            join_pointer(path, "bot_token"),
            BOT_TOKEN,
        )
        if channel.enabled:
            dropped.append(Dropped(join_pointer(path, "enabled"), enabled))
        channel_docs.append(
            {"key": key, "type": channel.type, "agent": agent_keys[channel.agent_id], "bot_token": token}
        )
    automation_docs: list[dict[str, Any]] = []
    for trigger in triggers:
        if trigger.agent_id not in agent_keys:
            dropped.append(Dropped(f"{kinds.TRIGGERS.path}/{trigger.id}", unbound))
            continue
        if trigger.enabled:
            dropped.append(Dropped(join_pointer("/automations", len(automation_docs), "enabled"), enabled))
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
    policy_docs: list[dict[str, Any]] = []
    for policy in policies:
        if policy.agent_id not in agent_keys:
            dropped.append(Dropped(f"{kinds.POLICIES.path}/{policy.id}", unbound))
            continue
        key = make_key(f"{agent_keys[policy.agent_id]}_{policy.type}", taken)
        policy_docs.append(
            {"key": key, "type": policy.type, "agent": agent_keys[policy.agent_id], "config": policy.config}
        )
    schema = LATEST_SCHEMA_VERSION if set_docs or app_docs else SCHEMA_VERSION
    document: dict[str, Any] = {"schema_version": schema, "name": name, "version": version}
    required = requirements([*agent_docs, *app_docs], [m["key"] for m in mcps])
    required += [{"kind": "knowledge_source", "ref": ref, "policy": "substitute"} for ref in tenant_refs]
    for section, items in (
        ("setup", setup.fields),
        ("mcps", mcps),
        ("skills", skill_docs),
        ("knowledge_sets", set_docs),
        ("agents", agent_docs),
        ("apps", app_docs),
        ("channels", channel_docs),
        ("automations", automation_docs),
        ("policies", policy_docs),
        ("requires", required),
    ):
        if items:
            document[section] = items
    return document


DEFAULT_MODEL = "default"  # the platform's default model: every workspace has one


def requirements(agent_docs: list[dict[str, Any]], mcp_keys: list[str]) -> list[dict[str, Any]]:
    """``requires`` for what the agents use (seed 004): each named model, ``substitute`` (which
    model is which is instance-specific; the platform's ``default`` exists everywhere, so it needs
    no mapping and round-trips as it is); each MCP an agent uses as a tool, ``strip`` (the bundle
    carries it; a target that skips it drops the reference). ``agent_docs`` may hold apps too: the
    MCPs an app's tools come from are required the same way."""
    models = sorted({doc["model"] for doc in agent_docs if "model" in doc} - {DEFAULT_MODEL})
    used = {key for doc in agent_docs for key in doc.get("mcps", [])}
    out = [{"kind": "model", "ref": model, "policy": "substitute"} for model in models]
    out += [{"kind": "tool", "ref": key, "policy": "strip"} for key in mcp_keys if key in used]
    return out


def _keys_of(entity: str, ids: list[str], keys: dict[str, str], what: str) -> list[str]:
    """The document keys of the entities ``ids`` name; ExportRefused names one the export does not
    write."""
    for entity_id in ids:
        if entity_id not in keys:
            raise ExportRefused(entity, f"refers to {what} {entity_id}, which the export cannot represent")
    return [keys[i] for i in ids]


def source_key(source: KnowledgeSource) -> str:
    """The key a source travels under: its own when it has one (its identity across instances),
    else ``<type>-<short hash>`` of its id, the same on every export of the workspace."""
    if source.key is not None:
        return source.key
    return f"{source.type}-{hashlib.sha256(source.id.encode()).hexdigest()[:8]}"


def _bounded_key(key: str) -> str:
    """A setup key within the document's key length: a long one keeps its start and a hash of it all."""
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return f"{key[: MAX_KEY_LENGTH - 9]}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _knowledge_set(
    key: str, index: int, knowledge_set: KnowledgeSet, setup: _Setup, tenant_refs: list[str]
) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": key, "name": knowledge_set.name}
    if knowledge_set.description:
        doc["description"] = knowledge_set.description
    if knowledge_set.data_description:
        doc["data_description"] = knowledge_set.data_description
    sources: dict[str, Any] = {}
    taken = {s.key for s in knowledge_set.sources if s.key is not None}
    for source in knowledge_set.sources:
        skey = source_key(source)
        while skey in sources or (source.key is None and skey in taken):
            skey += "-x"  # a hash that collides with a key in the set: never two sources under one
        base = join_pointer("/knowledge_sets", index, "sources", skey)
        if isinstance(source.base_url, str) and is_credentialed_url(source.base_url):
            # The address itself carries the credential: nothing of it can travel.
            setup.report.dropped.append(Dropped(base, SOURCE_URL_CREDENTIAL))
            continue
        out: dict[str, Any] = {"type": source.type}
        organisation = ORGANISATION_FIELDS.get(source.type, ())
        for name in SOURCE_FIELDS[source.type].all:
            value = getattr(source, name)
            if name == "urls" and isinstance(value, list):
                for position, url in enumerate(value):
                    if is_credentialed_url(url):
                        setup.report.dropped.append(
                            Dropped(join_pointer(base, "urls", position), CREDENTIALED_URL)
                        )
                value = [url for url in value if not is_credentialed_url(url)]
            if value is None or value == []:
                continue
            if name in organisation:
                setup.report.dropped.append(Dropped(join_pointer(base, name), ORGANISATION))
                continue
            out[name] = value
        if source.type == "website" and "urls" not in out:
            continue  # every URL it had carried a credential, each reported
        if source.sync_schedule is not None:
            out["sync_schedule"] = source.sync_schedule
        if source.credentials:
            out["credentials"] = {
                name: setup.secret(
                    f"{key}_{skey.replace('-', '_')}_{name}",
                    f"Credential {name} of source {skey} of knowledge set {knowledge_set.name}",
                    join_pointer(base, "credentials", name),
                    SOURCE_CREDENTIAL,
                )
                for name in sorted(source.credentials)
            }
        address = tenant_address(out)
        if address is not None:
            ref = requirement_ref(source.type, address[1])
            if ref not in tenant_refs:
                tenant_refs.append(ref)
        sources[skey] = out
    doc["sources"] = sources
    return doc


def _reason(name: str, value: str) -> str:
    if name_looks_like_credential(name):
        return CREDENTIAL_NAME
    if is_credentialed_url(value):
        return CREDENTIALED_URL
    if is_authorization_value(value):
        return AUTHORIZATION_VALUE
    return "looks like a credential"


def _mcp(key: str, index: int, instance: McpInstance, server: McpServer, setup: _Setup) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": key, "name": instance.name, "type": server.type}
    base = join_pointer("/mcps", index)

    def secret_field(site: str, label: str, path: str, reason: str) -> str:
        return setup.secret(f"{key}_{site}", f"{label} of MCP {instance.name}", path, reason)

    def screened(section: str, site: str, label: str, name: str, value: str | SecretRef) -> str:
        path = join_pointer(base, section, name)
        if isinstance(value, SecretRef):
            return secret_field(site, label, path, SECRET_BACKED)
        if value_is_credential(name, value):
            return authorization_prefix(value) + secret_field(site, label, path, _reason(name, value))
        return value

    if server.type == "url":
        url = instance.endpoint_url if instance.endpoint_url is not None else server.endpoint_url
        url_path = join_pointer(base, "endpoint_url")
        if isinstance(url, SecretRef):
            doc["endpoint_url"] = secret_field("url", "Endpoint URL", url_path, SECRET_BACKED)
        elif isinstance(url, str) and is_credentialed_url(url):
            doc["endpoint_url"] = secret_field("url", "Endpoint URL", url_path, CREDENTIALED_URL)
        else:
            doc["endpoint_url"] = url
        if instance.headers:
            doc["headers"] = {
                name: screened("headers", f"header_{i}", f"Header {name}", name, value)
                for i, (name, value) in enumerate(sorted(instance.headers.items()))
            }
        if instance.context_signing:
            doc["context_secret"] = secret_field(
                "context_secret",
                "Call-context signing key",
                join_pointer(base, "context_secret"),
                SIGNING_KEY,
            )
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
        path = join_pointer(base, "args", index)
        if isinstance(arg, SecretRef):
            out_args.append(secret_field(f"arg_{index}", f"Argument {index}", path, SECRET_BACKED))
        elif index in findings:
            out_args.append(
                findings[index] + secret_field(f"arg_{index}", f"Argument {index}", path, CREDENTIAL_ARGUMENT)
            )
        else:
            out_args.append(arg)
    if out_args:
        doc["args"] = out_args
    if instance.env:
        doc["env"] = {
            name: screened("env", f"env_{i}", f"Environment variable {name}", name, value)
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
