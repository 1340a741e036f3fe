"""The MCP service's rules: server specs (how to run or reach a server) and configured instances."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from bundle_operator.document.artifact_rules import command_problem, relative_path_problem
from bundle_operator.document.runtimes import unsupported_runtime_reason
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServerCreate,
    McpServerUpdate,
    SchemaFieldIn,
    SecretRef,
)
from bundle_operator.reference_platform import gateway_rules
from bundle_operator.reference_platform.artifact_files import artifact_row
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored, require_ref
from bundle_operator.reference_platform.problems import conflict, from_validation, refused
from bundle_operator.reference_platform.secret_store import (
    delete_owned_secrets,
    secret_value,
    store_owned_secret,
)
from bundle_operator.reference_platform.stdio_launch import runs_itself
from bundle_operator.reference_platform.storage import Row, Tx

# Used only when a field declares neither a type nor ``secret``: the service's name heuristic.
_CREDENTIAL_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API[_-]?KEY|PRIVATE[_-]?KEY|CREDENTIAL|AUTH)", re.I
)
CONTEXT_SECRET_MIN = 32
CONTEXT_SECRET_MAX = 512


def check_url(field: str, value: str) -> None:
    """Refuse anything but an absolute http(s) URL with a host."""
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises on a port that is not a number
    except ValueError:
        ok = False
    if not ok:
        raise refused(field, "must be an absolute http or https URL")


def settle_fields(entries: list[SchemaFieldIn], field: str) -> list[dict[str, Any]]:
    """Decide ``secret`` for each env or header entry: the declared type first, then the name."""
    settled: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if entry.name in seen:
            raise refused(f"{field}.{i}.name", f"'{entry.name}' is declared twice")
        seen.add(entry.name)
        if entry.type is not None:
            secret = entry.type == "secret"
            if entry.secret is not None and entry.secret != secret:
                raise refused(f"{field}.{i}.secret", f"contradicts the declared type '{entry.type}'")
        elif entry.secret is not None:
            secret = entry.secret
        else:
            secret = bool(_CREDENTIAL_NAME.search(entry.name))
        settled.append(
            {
                "name": entry.name,
                "type": entry.type,
                "secret": secret,
                "required": entry.required,
                "description": entry.description,
            }
        )
    return settled


def _check_catalog(spec: McpServerCreate) -> None:
    for label, names in (
        ("tools", [t.name for t in spec.catalog.tools]),
        ("prompts", [p.name for p in spec.catalog.prompts]),
        ("resources", [r.uri for r in spec.catalog.resources]),
    ):
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                raise refused(f"catalog.{label}.{i}", f"'{name}' is listed twice")
            seen.add(name)


def _check_artifact(tx: Tx, workspace: str, spec: McpServerCreate) -> None:
    """A server run from an uploaded archive: a command server, its runtime, the archive stored."""
    if spec.artifact is None:
        raise refused("runtime", "runtime is given only with an artifact to run")
    if spec.type != "command":
        raise refused("artifact", f"a {spec.type} server takes no artifact; only a command server runs one")
    if spec.runtime is None:
        raise refused("runtime", "a server with an artifact needs runtime: node, python or binary")
    if artifact_row(tx, workspace, spec.artifact.digest) is None:
        raise refused(
            "artifact.digest",
            f"there is no artifact {spec.artifact.digest} in this workspace; upload it first",
            code="artifact_missing",
        )
    entry_reason = relative_path_problem(spec.artifact.entry)
    if entry_reason is not None:
        raise refused("artifact.entry", entry_reason)
    command_reason = command_problem(spec.runtime, spec.command or "")
    if command_reason is not None:
        wanted = f"a {spec.runtime} server's command {command_reason}"
        raise refused("command", wanted, code="unsupported_runtime")


def validate_server(tx: Tx, workspace: str, spec: McpServerCreate) -> dict[str, Any]:
    """The stored form of a server spec, or a 422 naming what the MCP service refuses."""
    by_type = {
        "command": ("command",),
        "docker": ("image",),
        "url": ("endpoint_url",),
    }
    for field in by_type[spec.type]:
        if getattr(spec, field) is None:
            raise refused(field, f"a {spec.type} server needs {field}")
    for other_type, fields in by_type.items():
        for field in fields:
            if other_type != spec.type and getattr(spec, field) is not None:
                raise refused(field, f"a {spec.type} server takes no {field}")
    if spec.type == "url":
        if spec.args:
            raise refused("args", "a url server takes no args")
        if spec.env_schema:
            raise refused("env_schema", "a url server takes headers, not environment variables")
    elif spec.headers_schema:
        raise refused("headers_schema", f"a {spec.type} server takes environment variables, not headers")
    if spec.artifact is not None or spec.runtime is not None:
        _check_artifact(tx, workspace, spec)
    elif spec.command is not None:
        reason = unsupported_runtime_reason(spec.command)
        if reason is not None:
            raise refused("command", reason, code="unsupported_runtime")
    if spec.endpoint_url is not None:
        check_url("endpoint_url", spec.endpoint_url)
    _check_catalog(spec)
    data = spec.model_dump(mode="json")
    data["env_schema"] = settle_fields(spec.env_schema, "env_schema")
    data["headers_schema"] = settle_fields(spec.headers_schema, "headers_schema")
    return data


def _as_create(data: dict[str, Any]) -> McpServerCreate:
    # Stored entries carry a settled ``secret`` next to their type, so they validate as written.
    try:
        return McpServerCreate.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


class McpServerRules(KindRules):
    """Server specs: runtime, shape per type, env/header secrecy."""

    kind = kinds.MCP_SERVERS
    held_by = (kinds.MCP_INSTANCES.path,)

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, McpServerCreate)
        data = validate_server(tx, workspace, prepared)
        return data, data["name"]

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, McpServerUpdate)
        merged = dict(row.data)
        changes = prepared.model_dump(mode="json")
        for field in prepared.model_fields_set:
            value = changes[field]
            if value is None:
                if field == "name":
                    raise refused("name", "must not be null")
                # null puts an optional field back to its default (no command, no args, ...)
                value = McpServerCreate.model_fields[field].get_default(call_default_factory=True)
                if isinstance(value, BaseModel):
                    value = value.model_dump(mode="json")
            merged[field] = value
        data = validate_server(tx, workspace, _as_create(merged))
        _check_instances_still_fit(tx, workspace, row, data)
        if "endpoint_url" in prepared.model_fields_set and data["endpoint_url"]:
            # A member's URL must never become the gateway's own endpoint.
            for instance in tx.select(workspace, kinds.MCP_INSTANCES.path, equals={"server_id": row.id}):
                if instance.data.get("endpoint_url") is None and tx.holders(
                    workspace, (gateway_rules.MEMBER,), instance.id
                ):
                    gateway_rules.check_not_self(ctx, data["endpoint_url"], "endpoint_url")
        return data, data["name"]


def _check_instances_still_fit(tx: Tx, workspace: str, server: Row, data: dict[str, Any]) -> None:
    """409 when a spec change would leave existing instances breaking it.

    A variable newly declared secret would keep its plain value in instances that are shown to
    anyone who can read them, and a newly required one would be missing: the instances are named
    so the caller can move the value into a secret or set it first.
    """
    problems: dict[str, list[str]] = {}
    for instance in tx.select(workspace, kinds.MCP_INSTANCES.path, equals={"server_id": server.id}):
        for field, schema in (("env", data["env_schema"]), ("headers", data["headers_schema"])):
            values = instance.data.get(field) or {}
            for entry in schema:
                name = entry["name"]
                if entry["secret"] and isinstance(values.get(name), str):
                    problems.setdefault(instance.id, []).append(f"{field}.{name} holds a plain value")
                elif entry["required"] and name not in values:
                    problems.setdefault(instance.id, []).append(f"{field}.{name} is not set")
    if problems:
        holders = sorted(problems)
        what = "; ".join(f"{i}: {', '.join(problems[i])}" for i in holders)
        raise conflict(
            "instances_do_not_fit",
            f"the change would break existing instances ({what}); pass secret values by reference"
            " and set required values in those instances first",
            holders=holders,
            field="env_schema"
            if any(p.startswith("env.") for v in problems.values() for p in v)
            else "headers_schema",
        )


def _check_values(
    tx: Tx,
    workspace: str,
    field: str,
    values: dict[str, str | SecretRef],
    schema: list[dict[str, Any]],
) -> None:
    declared = {entry["name"]: entry for entry in schema}
    for name, value in values.items():
        entry = declared.get(name)
        if entry is None:
            raise refused(f"{field}.{name}", "is not declared by the server spec")
        if isinstance(value, SecretRef):
            secret_value(tx, workspace, value.secret_id, f"{field}.{name}")
        elif entry["secret"]:
            raise refused(
                f"{field}.{name}",
                'is a secret input: store the value as a secret and pass {"secret_id": ...}',
                code="secret_required",
            )
    for name, entry in declared.items():
        if entry["required"] and name not in values:
            raise refused(f"{field}.{name}", "is required by the server spec")


def _check_context_secret(tx: Tx, workspace: str, body: McpInstanceCreate, server: Row) -> None:
    if body.context_secret is not None and body.context_secret_id is not None:
        raise refused("context_secret", "give either context_secret or context_secret_id, not both")
    if body.context_secret is None and body.context_secret_id is None:
        return
    field = "context_secret" if body.context_secret is not None else "context_secret_id"
    if server.data["type"] != "url":
        raise refused(
            field, "only a url server verifies a signed call context", code="context_secret_refused"
        )
    if body.context_secret_id is not None:
        value = secret_value(tx, workspace, body.context_secret_id, field)
        if not CONTEXT_SECRET_MIN <= len(value) <= CONTEXT_SECRET_MAX:
            raise refused(
                field,
                f"the secret must be {CONTEXT_SECRET_MIN} to {CONTEXT_SECRET_MAX} characters",
                code="context_secret_refused",
            )


def validate_instance(
    tx: Tx, ctx: Context, workspace: str, entity_id: str, body: McpInstanceCreate, previous: Row | None
) -> dict[str, Any]:
    """The stored form of an instance, storing a context secret given by value."""
    server = require_ref(tx, workspace, kinds.MCP_SERVERS.path, body.server_id, "server_id", "MCP server")
    spec = server.data
    _check_values(tx, workspace, "env", body.env, spec["env_schema"])
    _check_values(tx, workspace, "headers", body.headers, spec["headers_schema"])
    if body.args is not None:
        if spec["type"] == "url":
            raise refused("args", "a url server takes no args")
        for i, arg in enumerate(body.args):
            if isinstance(arg, SecretRef):
                if runs_itself(spec):
                    raise refused(
                        f"args.{i}",
                        "the platform passes a secret to a server it runs in its environment, never on "
                        "its command line: declare it in env_schema and set it in env",
                        code="secret_on_command_line",
                    )
                secret_value(tx, workspace, arg.secret_id, f"args.{i}")
    if body.endpoint_url is not None:
        if spec["type"] != "url":
            raise refused("endpoint_url", f"a {spec['type']} server has no endpoint URL")
        if isinstance(body.endpoint_url, SecretRef):
            secret_value(tx, workspace, body.endpoint_url.secret_id, "endpoint_url")
        else:
            check_url("endpoint_url", body.endpoint_url)
    _check_context_secret(tx, workspace, body, server)
    data = body.model_dump(mode="json", exclude={"context_secret"})
    keep: set[str] = set()
    if body.context_secret is not None:
        data["context_secret_id"] = store_owned_secret(
            tx, workspace, entity_id, f"{body.name} context secret", body.context_secret.get_secret_value()
        )
        keep.add(data["context_secret_id"])
    elif body.context_secret_id is not None:
        keep.add(body.context_secret_id)
    if previous is not None:
        # A context secret the platform stored earlier and that is no longer used goes away.
        delete_owned_secrets(tx, workspace, entity_id, keep=keep)
    data["context_signing"] = data["context_secret_id"] is not None
    return data


class McpInstanceRules(KindRules):
    """Instances: values checked against the spec; secret inputs only by reference."""

    kind = kinds.MCP_INSTANCES
    held_by = (kinds.AGENTS.path, kinds.APPS.path, gateway_rules.MEMBER)

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, McpInstanceCreate)
        data = validate_instance(tx, ctx, workspace, entity_id, prepared, None)
        return data, data["name"]

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, McpInstanceUpdate)
        merged = {k: v for k, v in row.data.items() if k != "context_signing"}
        changes = prepared.model_dump(mode="python")
        for field in prepared.model_fields_set:
            value = changes[field]
            if field in ("name", "env", "headers") and value is None:
                if field == "name":
                    raise refused("name", "must not be null")
                value = {}
            merged[field] = value
        if prepared.context_secret is not None:
            merged["context_secret_id"] = None  # the new value replaces whatever signed before
        try:
            body = McpInstanceCreate.model_validate(merged)
        except ValidationError as exc:
            raise from_validation(exc) from None
        data = validate_instance(tx, ctx, workspace, row.id, body, row)
        if tx.holders(workspace, (gateway_rules.MEMBER,), row.id):
            # Checked on where the change leads, not on what was sent: null falls back to the
            # server's URL, and a secret reference hides a URL until it is resolved.
            url = target_url(tx, workspace, data)
            if url is not None:
                gateway_rules.check_not_self(ctx, url, "endpoint_url")
        return data, data["name"]

    def after_delete(self, tx: Tx, ctx: Context, workspace: str, row: Row) -> None:
        delete_owned_secrets(tx, workspace, row.id)

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        shown = row.public()
        server = tx.get(row.workspace, kinds.MCP_SERVERS.path, row.data["server_id"])
        health: dict[str, Any] | None = None
        if server is not None and runs_itself(server.data):
            health = ctx.instance_health(row.id) or {
                "state": "idle",
                "message": "not started yet: the platform starts its server on first use",
                "checked_at": row.updated_at,
            }
        return {**shown, "health": health}


def instance_url(tx: Tx, workspace: str, instance: Row) -> str | None:
    """The plain URL a gateway member reaches the instance at, or None (hosted or secret URL)."""
    own = instance.data.get("endpoint_url")
    if isinstance(own, str):
        return own
    if own is not None:
        return None
    server = tx.get(workspace, kinds.MCP_SERVERS.path, instance.data["server_id"])
    if server is None or server.data["type"] != "url":
        return None
    url = server.data.get("endpoint_url")
    return url if isinstance(url, str) else None


def target_url(tx: Tx, workspace: str, data: dict[str, Any]) -> str | None:
    """The URL a gateway member calls for an instance's ``data``, secret references resolved."""
    own = data.get("endpoint_url")
    if isinstance(own, str):
        return own
    if isinstance(own, dict):
        return tx.secret(str(own.get("secret_id")))
    server = tx.get(workspace, kinds.MCP_SERVERS.path, data["server_id"])
    if server is None or server.data["type"] != "url":
        return None
    url = server.data.get("endpoint_url")
    return url if isinstance(url, str) else None
