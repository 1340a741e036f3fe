"""Platform request bodies made from a desired spec, and which kinds are written as they stand."""

from __future__ import annotations

from typing import Any

from bundle_operator.platform import kinds
from bundle_operator.platform.kinds import Kind
from bundle_operator.platform.models import (
    AgentCreate,
    AgentUpdate,
    ApiModel,
    AppCreate,
    ChannelUpdate,
    McpServerCreate,
    PolicyCreate,
    PolicyUpdate,
    SchemaFieldIn,
    SecretRef,
    SkillCreate,
    SkillUpdate,
    TriggerUpdate,
)


class ImmutableField(Exception):
    """The bundle changed a field the platform cannot change in place."""

    def __init__(self, entity: str, fields: list[str]) -> None:
        super().__init__(f"{entity}: the platform cannot change {', '.join(fields)} in place")
        self.entity = entity
        self.fields = fields


SIMPLE_CREATES: dict[str, tuple[type[ApiModel], Kind[Any, Any, Any]]] = {
    "skill": (SkillCreate, kinds.SKILLS),
    "agent": (AgentCreate, kinds.AGENTS),
    "app": (AppCreate, kinds.APPS),
    "policy": (PolicyCreate, kinds.POLICIES),
}

SIMPLE_UPDATES: dict[str, tuple[type[ApiModel], Kind[Any, Any, Any]]] = {
    "skill": (SkillUpdate, kinds.SKILLS),
    "agent": (AgentUpdate, kinds.AGENTS),
    "channel": (ChannelUpdate, kinds.CHANNELS),
    "automation": (TriggerUpdate, kinds.TRIGGERS),
    "policy": (PolicyUpdate, kinds.POLICIES),
}


def server_fields(server: dict[str, Any]) -> dict[str, Any]:
    """A server spec in the request form that create and update share."""
    return {
        "name": server["name"],
        "command": server["command"],
        "image": server["image"],
        "endpoint_url": server["endpoint_url"],
        "env_schema": [SchemaFieldIn(name=e["name"], type=e["type"]) for e in server["env_schema"]],
        "headers_schema": [SchemaFieldIn(name=e["name"], type=e["type"]) for e in server["headers_schema"]],
    }


def server_create(server: dict[str, Any]) -> McpServerCreate:
    return McpServerCreate(type=server["type"], **server_fields(server))


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
