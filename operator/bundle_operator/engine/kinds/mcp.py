"""MCP servers: a server spec (how to run or reach it), an instance (its configured values) and a
platform secret per secret-backed value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from bundle_operator.document import placeholders
from bundle_operator.document.credentials import (
    authorization_prefix,
    install_sees_credential,
    is_authorization_value,
    is_credentialed_url,
    name_looks_like_credential,
    screen_args,
    value_is_credential,
)
from bundle_operator.document.models import CommandMcp, DockerMcp, Mcp, UrlMcp
from bundle_operator.document.pointer import join_pointer
from bundle_operator.engine.desired import Desired, Inputs
from bundle_operator.engine.export_report import CREDENTIALED_URL, SECRET_BACKED, ExportOut
from bundle_operator.engine.kinds.base import AnyKind, EntityKind, Holds, Write, referenced_ids
from bundle_operator.engine.record import Part, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    ApiModel,
    Entity,
    McpInstance,
    McpServer,
    SchemaField,
    SchemaFieldIn,
    SecretCreate,
    SecretRef,
    SecretUpdate,
)
from bundle_operator.platform.protocol import PlatformAPI

CONTEXT_SECRET = "context_secret"  # sent with the instance, never a platform secret of its own
ARTIFACT_FIELDS = ("runtime", "artifact")  # in a server spec only when it runs from an archive
# Instance states in which the platform cannot run the server (a crash is restarted with backoff).
TROUBLED = frozenset({"tree_changed", "crashed", "failed"})

# Why an export replaced a value (the wording of the report).
CREDENTIAL_NAME = "credential-like name"
AUTHORIZATION_VALUE = "Authorization-style value"
CREDENTIAL_ARGUMENT = "credential argument"
SIGNING_KEY = "call-context signing key, never read"


class _Filler:
    """Substitutes setup values into one MCP's strings and collects the secret ones."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.secrets: dict[str, str] = {}

    def is_secret(self, text: str) -> bool:
        return any(key.strip() in self.inputs.secret_fields for key in placeholders.references(text))

    def field_type(self, name: str, text: str) -> str:
        """How an env or header entry is declared to the MCP service.

        A value backed by a ``secret`` setup field is a secret (seed 000: the setup field's type
        decides, not a guess from the name). A value that looks like a credential by the shared
        screening rules but is not backed by one (analyze blocks those) is declared secret as
        well, so the platform's own ``secret_required`` check refuses the plain value instead of
        being switched off by a ``string`` declaration.
        """
        if self.is_secret(text) or install_sees_credential(name, self.inputs.fill(text)):
            return "secret"
        return "string"

    def value(self, site: str, text: str) -> Any:
        if self.is_secret(text):
            self.secrets[site] = self.inputs.fill(text)
            return {"secret": site}
        return self.inputs.fill(text)


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
            if mcp.artifact is not None:
                # The platform runs it from its own copy of the archive: what runs, by content.
                server["runtime"] = mcp.runtime
                server["artifact"] = {"digest": mcp.artifact.digest, "entry": mcp.artifact.entry}
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
        server["endpoint_url"] = _origin(inputs.fill(mcp.endpoint_url)) if isinstance(url, dict) else url
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
        filler.secrets[CONTEXT_SECRET] = inputs.fill(mcp.context_secret)
    return Desired("mcp", mcp.key, {"server": server, "instance": instance}, filler.secrets)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "invalid"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/"


def server_fields(server: dict[str, Any]) -> dict[str, Any]:
    """A server spec in the request form that create and update share."""
    return {
        "name": server["name"],
        "command": server["command"],
        "image": server["image"],
        "endpoint_url": server["endpoint_url"],
        "env_schema": [SchemaFieldIn(name=e["name"], type=e["type"]) for e in server["env_schema"]],
        "headers_schema": [SchemaFieldIn(name=e["name"], type=e["type"]) for e in server["headers_schema"]],
        **{name: server[name] for name in ARTIFACT_FIELDS if name in server},
    }


def server_create(server: dict[str, Any]) -> ApiModel:
    """The create request of a server spec."""
    return kinds.MCP_SERVERS.create(type=server["type"], **server_fields(server))


def instance_values(instance: dict[str, Any], secret_ids: dict[str, str]) -> dict[str, Any]:
    """Env, headers, args and endpoint URL with secret markers turned into secret references."""

    def value(item: Any) -> Any:
        if isinstance(item, dict) and "secret" in item:
            return SecretRef(secret_id=secret_ids[item["secret"]])
        if isinstance(item, dict) and "secret_id" in item:
            return SecretRef(secret_id=item["secret_id"])
        return item

    return {
        "env": {k: value(v) for k, v in instance["env"].items()},
        "headers": {k: value(v) for k, v in instance["headers"].items()},
        "args": None if instance["args"] is None else [value(a) for a in instance["args"]],
        "endpoint_url": value(instance["endpoint_url"]),
    }


def _artifact_fields(server: McpServer) -> dict[str, Any]:
    """A live server's runtime and archive in spec form, when it runs from one."""
    if server.artifact is None:
        return {}
    return {"runtime": server.runtime, "artifact": server.artifact.model_dump(mode="json")}


def _schema(entries: list[SchemaField]) -> list[dict[str, Any]]:
    return [{"name": e.name, "type": e.type or ("secret" if e.secret else "string")} for e in entries]


class McpKind(EntityKind):
    """An MCP: secrets, then its server spec, then its instance (the primary)."""

    name = "mcp"
    section = "mcps"
    collection = kinds.MCP_INSTANCES
    immutable = ("/server/type",)
    held_by = (kinds.AGENTS, kinds.MCP_INSTANCES, kinds.GATEWAY_BUNDLES, kinds.APPS)
    reads = (kinds.MCP_SERVERS, kinds.MCP_INSTANCES)
    used_by_apps = True

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        return desired_mcp(item, inputs)

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        instance = found
        server_part = next((p for p in recorded.parts if p.role == "server"), None)
        server = snapshot.get(kinds.MCP_SERVERS.path, server_part.id if server_part else instance.server_id)
        if not isinstance(server, McpServer):
            return None
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
                **_artifact_fields(server),
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

    def trouble(self, recorded: RecordedEntity, snapshot: Snapshot) -> str | None:
        instance = snapshot.get(kinds.MCP_INSTANCES.path, recorded.primary_id)
        health = instance.health if isinstance(instance, McpInstance) else None
        if health is None or health.state not in TROUBLED:
            return None
        said = health.message
        return said if said.startswith(health.state) else f"{health.state}: {said}"

    def parts(self, desired: Desired) -> list[tuple[str, AnyKind]]:
        secrets = [(f"secret:{site}", kinds.SECRETS) for site in desired.secrets if site != CONTEXT_SECRET]
        return [*secrets, ("server", kinds.MCP_SERVERS), ("primary", kinds.MCP_INSTANCES)]

    async def create(self, writer: Writer, desired: Desired) -> list[Part]:
        parts: list[Part] = []
        secret_ids: dict[str, str] = {}
        for site, value in desired.secrets.items():
            if site != CONTEXT_SECRET:
                part = await _create_secret(writer, desired.entity, desired.key, site, value)
                secret_ids[site] = part.id
                parts.append(part)
        artifact = desired.spec["server"].get("artifact")
        if artifact is not None:
            delivered = await writer.deliver_artifact(desired.entity, artifact["digest"])
            if delivered is not None:
                parts.append(delivered)
        server = await writer.create(
            desired.entity, "server", kinds.MCP_SERVERS, server_create(desired.spec["server"])
        )
        parts.append(Part(role="server", path=kinds.MCP_SERVERS.path, id=server.id))
        instance_spec = desired.spec["instance"]
        context = desired.secrets.get(CONTEXT_SECRET)
        body = kinds.MCP_INSTANCES.create(
            server_id=server.id,
            name=instance_spec["name"],
            **instance_values(instance_spec, secret_ids),
            context_secret=SecretStr(context) if context is not None else None,
        )
        instance = await writer.create(desired.entity, "primary", kinds.MCP_INSTANCES, body)
        parts.append(Part(role="primary", path=kinds.MCP_INSTANCES.path, id=instance.id))
        return parts

    async def write(self, writer: Writer, step: Write) -> list[Part]:
        recorded, target, current, secrets = step.recorded, step.target, step.current, step.secrets
        parts = list(recorded.parts)
        by_role = {p.role: p for p in parts}
        secret_ids = {p.role.removeprefix("secret:"): p.id for p in parts if p.role.startswith("secret:")}
        for site, value in (secrets.values or {}).items():
            if site == CONTEXT_SECRET:
                continue
            if site in secret_ids:
                if site in secrets.changed:
                    await writer.update(kinds.SECRETS, secret_ids[site], SecretUpdate(value=SecretStr(value)))
                continue
            part = await _create_secret(writer, recorded.entity, recorded.key, site, value)
            secret_ids[site] = part.id
            parts.append(part)
        if target["server"] != current["server"]:
            fields = server_fields(target["server"])
            artifact = target["server"].get("artifact")
            if artifact is not None and artifact != current["server"].get("artifact"):
                delivered = await writer.deliver_artifact(recorded.entity, artifact["digest"])
                if delivered is not None:
                    parts.append(delivered)
            elif artifact is None and "artifact" in current["server"]:
                fields.update(runtime=None, artifact=None)  # no longer runs from an archive
            await writer.update(kinds.MCP_SERVERS, by_role["server"].id, kinds.MCP_SERVERS.update(**fields))
            # The archive it ran from goes once the whole run has worked (if this installation
            # uploaded it and nothing else runs from it).
            for old in [p for p in parts if p.role == "artifact" and p.id != (artifact or {}).get("digest")]:
                writer.retired.append((old, recorded.entity))
                parts.remove(old)
        instance = target["instance"]
        context_changed = secrets.values is not None and CONTEXT_SECRET in secrets.changed
        if instance != current["instance"] or context_changed:
            values = instance_values(instance, secret_ids)
            if context_changed and secrets.values is not None and CONTEXT_SECRET in secrets.values:
                values["context_secret"] = SecretStr(secrets.values[CONTEXT_SECRET])
            update = kinds.MCP_INSTANCES.update(name=instance["name"], **values)
            await writer.update(kinds.MCP_INSTANCES, by_role["primary"].id, update)
        if secrets.values is not None:
            # Secrets the bundle no longer uses are deleted only once the whole run has worked.
            for site, secret_id in list(secret_ids.items()):
                if site not in secrets.values:
                    retired = next(p for p in parts if p.id == secret_id)
                    writer.retired.append((retired, recorded.entity))
                    parts.remove(retired)
        return parts

    async def holds(self, platform: PlatformAPI, workspace: str, item: Entity) -> Holds:
        refs = referenced_ids(item.model_dump(mode="json"))
        if isinstance(item, McpInstance):
            refs.add(item.server_id)
        return Holds({ref: "" for ref in refs})

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        servers = {s.id: s for s in listed.get(kinds.MCP_SERVERS.path, []) if isinstance(s, McpServer)}
        used: set[str] = set()
        docs = out.section(self.section)
        keys = out.keys.setdefault(self.name, {})
        for instance in listed.get(kinds.MCP_INSTANCES.path, []):
            assert isinstance(instance, McpInstance)
            server = servers.get(instance.server_id)
            if server is None:
                out.drop(f"{kinds.MCP_INSTANCES.path}/{instance.id}", "its MCP server spec is gone")
                continue
            used.add(server.id)
            key = out.claimed.get(instance.id) or out.key(instance.name)
            keys[instance.id] = key
            docs.append(_export_mcp(key, len(docs), instance, server, out))
        for server_id in sorted(servers.keys() - used):
            out.drop(f"{kinds.MCP_SERVERS.path}/{server_id}", "a server spec no MCP instance uses")


async def _create_secret(writer: Writer, entity: str, key: str, site: str, value: str) -> Part:
    body = SecretCreate(name=f"{writer.bundle_name}/{key}/{site}", value=SecretStr(value))
    secret = await writer.create(entity, f"secret:{site}", kinds.SECRETS, body)
    return Part(role=f"secret:{site}", path=kinds.SECRETS.path, id=secret.id)


def _reason(name: str, value: str) -> str:
    if name_looks_like_credential(name):
        return CREDENTIAL_NAME
    if is_credentialed_url(value):
        return CREDENTIALED_URL
    if is_authorization_value(value):
        return AUTHORIZATION_VALUE
    return "looks like a credential"


class _Screen:
    """Turns one exported MCP's values into setup references where they are or look secret."""

    def __init__(self, key: str, instance: McpInstance, out: ExportOut) -> None:
        self.key, self.instance, self.out = key, instance, out

    def secret(self, site: str, label: str, path: str, reason: str) -> str:
        return self.out.secret(f"{self.key}_{site}", f"{label} of MCP {self.instance.name}", path, reason)

    def values(
        self, base: str, site: str, label: str, items: Mapping[str, str | SecretRef]
    ) -> dict[str, str]:
        """Env or headers by name; the n-th (by name) that is or looks secret becomes ``{site}_{n}``."""
        out: dict[str, str] = {}
        for i, (name, value) in enumerate(sorted(items.items())):
            path, field_site, field_label = join_pointer(base, name), f"{site}_{i}", f"{label} {name}"
            if isinstance(value, SecretRef):
                out[name] = self.secret(field_site, field_label, path, SECRET_BACKED)
            elif value_is_credential(name, value):
                reason = _reason(name, value)
                out[name] = authorization_prefix(value) + self.secret(field_site, field_label, path, reason)
            else:
                out[name] = value
        return out


def _export_mcp(
    key: str, index: int, instance: McpInstance, server: McpServer, out: ExportOut
) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": key, "name": instance.name, "type": server.type}
    base = join_pointer("/mcps", index)
    screen = _Screen(key, instance, out)
    if server.type == "url":
        _export_url(doc, base, instance, server, screen)
    else:
        _export_process(doc, base, instance, server, screen)
    return doc


def _export_url(
    doc: dict[str, Any], base: str, instance: McpInstance, server: McpServer, screen: _Screen
) -> None:
    url = instance.endpoint_url if instance.endpoint_url is not None else server.endpoint_url
    url_path = join_pointer(base, "endpoint_url")
    if isinstance(url, SecretRef):
        doc["endpoint_url"] = screen.secret("url", "Endpoint URL", url_path, SECRET_BACKED)
    elif isinstance(url, str) and is_credentialed_url(url):
        doc["endpoint_url"] = screen.secret("url", "Endpoint URL", url_path, CREDENTIALED_URL)
    else:
        doc["endpoint_url"] = url
    if instance.headers:
        doc["headers"] = screen.values(join_pointer(base, "headers"), "header", "Header", instance.headers)
    if instance.context_signing:
        path = join_pointer(base, "context_secret")
        doc["context_secret"] = screen.secret("context_secret", "Call-context signing key", path, SIGNING_KEY)


def _export_process(
    doc: dict[str, Any], base: str, instance: McpInstance, server: McpServer, screen: _Screen
) -> None:
    if server.type == "command":
        if server.artifact is not None:
            # The archive stays on the platform, named by content: the export runs from the same one.
            doc["runtime"] = server.runtime
            doc["artifact"] = server.artifact.model_dump(mode="json")
        doc["command"] = server.command
    else:
        doc["image"] = server.image
    args: list[str | SecretRef] = list(instance.args if instance.args is not None else server.args)
    findings = {f.index: f.prefix for f in screen_args([a if isinstance(a, str) else "" for a in args])}
    out_args: list[str] = []
    for index, arg in enumerate(args):
        path = join_pointer(base, "args", index)
        if isinstance(arg, SecretRef):
            out_args.append(screen.secret(f"arg_{index}", f"Argument {index}", path, SECRET_BACKED))
        elif index in findings:
            site = screen.secret(f"arg_{index}", f"Argument {index}", path, CREDENTIAL_ARGUMENT)
            out_args.append(findings[index] + site)
        else:
            out_args.append(arg)
    if out_args:
        doc["args"] = out_args
    if instance.env:
        doc["env"] = screen.values(join_pointer(base, "env"), "env", "Environment variable", instance.env)
