"""Agents and what hangs off them: channels, cron triggers and policies."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, SecretStr

from bundle_operator.document.mcp_rules import TELEGRAM_TOKEN
from bundle_operator.platform import kinds
from bundle_operator.platform.models import (
    AgentCreate,
    ChannelCreate,
    PolicyCreate,
    TriggerCreate,
)
from bundle_operator.reference_platform import cron
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored, merge_changes, require_ref
from bundle_operator.reference_platform.problems import refused
from bundle_operator.reference_platform.secret_store import (
    delete_owned_secrets,
    secret_value,
    store_owned_secret,
)
from bundle_operator.reference_platform.storage import Row, Tx

MAX_POLICY_CONFIG = 64 * 1024


def live_agent(tx: Tx, workspace: str, agent_id: str, field: str = "agent_id") -> Row:
    """The agent a field refers to; archived agents take no new channels, triggers or policies."""
    agent = require_ref(tx, workspace, kinds.AGENTS.path, agent_id, field, "agent")
    if agent.data.get("archived"):
        raise refused(field, f"the agent {agent_id} is archived", code="agent_archived")
    return agent


class AgentRules(KindRules):
    """Agents: their MCP instances, skills and knowledge sets must exist; archiving is an update."""

    kind = kinds.AGENTS
    held_by = (kinds.CHANNELS.path, kinds.TRIGGERS.path, kinds.POLICIES.path)

    def _check(self, tx: Tx, workspace: str, data: dict[str, Any]) -> None:
        for i, ref in enumerate(data["mcp_instance_ids"]):
            require_ref(tx, workspace, kinds.MCP_INSTANCES.path, ref, f"mcp_instance_ids.{i}", "MCP instance")
        for i, ref in enumerate(data["skill_ids"]):
            require_ref(tx, workspace, kinds.SKILLS.path, ref, f"skill_ids.{i}", "skill")
        for i, ref in enumerate(data["knowledge_set_ids"]):
            require_ref(
                tx, workspace, kinds.KNOWLEDGE_SETS.path, ref, f"knowledge_set_ids.{i}", "knowledge set"
            )

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, AgentCreate)
        data = prepared.model_dump(mode="json") | {"archived": False}
        self._check(tx, workspace, data)
        return data, data["name"]

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, BaseModel)
        data = merge_changes(row, prepared, ("name", "model", "archived"))
        for field in ("description", "instructions"):
            data[field] = data[field] or ""
        for field in ("mcp_instance_ids", "skill_ids", "knowledge_set_ids"):
            # .get: agents stored before knowledge sets existed have no knowledge_set_ids.
            data[field] = data.get(field) or []
        self._check(tx, workspace, data)
        return data, data["name"]

    def render(self, tx: Tx, ctx: Context, row: Row, *, issued: bool) -> dict[str, Any]:
        return {"knowledge_set_ids": []} | row.public()


def _bot_token(
    tx: Tx, workspace: str, owner_id: str, name: str, token: SecretStr | None, ref: str | None
) -> str:
    if (token is None) == (ref is None):
        raise refused("bot_token", "give exactly one of bot_token or bot_token_secret_id")
    if token is not None:
        if not TELEGRAM_TOKEN.match(token.get_secret_value()):
            raise refused("bot_token", "is not a Telegram bot token (digits, ':' and the key)")
        return store_owned_secret(
            tx, workspace, owner_id, f"{name or owner_id} bot token", token.get_secret_value()
        )
    assert ref is not None
    secret_value(tx, workspace, ref, "bot_token_secret_id")
    return ref


class ChannelRules(KindRules):
    """Telegram channels: the bot token is kept in the secret store, never in the channel."""

    kind = kinds.CHANNELS

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, ChannelCreate)
        live_agent(tx, workspace, prepared.agent_id)
        secret_id = _bot_token(
            tx, workspace, entity_id, prepared.name, prepared.bot_token, prepared.bot_token_secret_id
        )
        data = {
            "type": prepared.type,
            "name": prepared.name,
            "agent_id": prepared.agent_id,
            "bot_token_secret_id": secret_id,
            "enabled": prepared.enabled,
        }
        return data, prepared.name

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, BaseModel)
        fields = prepared.model_fields_set
        data = dict(row.data)
        dumped = prepared.model_dump(mode="json", exclude={"bot_token"})
        for field in fields - {"bot_token", "bot_token_secret_id"}:
            if dumped[field] is None:
                raise refused(field, "must not be null")
            data[field] = dumped[field]
        if "agent_id" in fields:
            live_agent(tx, workspace, data["agent_id"])
        if fields & {"bot_token", "bot_token_secret_id"}:
            token = getattr(prepared, "bot_token", None)
            ref = getattr(prepared, "bot_token_secret_id", None)
            new_id = _bot_token(tx, workspace, row.id, data["name"], token, ref)
            delete_owned_secrets(tx, workspace, row.id, keep={new_id})
            data["bot_token_secret_id"] = new_id
        return data, data["name"]

    def after_delete(self, tx: Tx, ctx: Context, workspace: str, row: Row) -> None:
        delete_owned_secrets(tx, workspace, row.id)


def _schedule(data: dict[str, Any]) -> None:
    try:
        parsed = cron.parse_cron(data["schedule"])
    except cron.CronError as exc:
        raise refused("schedule", str(exc), code="invalid_schedule") from None
    try:
        zone = cron.parse_timezone(data["timezone"])
    except ValueError as exc:
        raise refused("timezone", str(exc), code="invalid_timezone") from None
    upcoming = cron.next_run(parsed, zone, datetime.now(UTC))
    if upcoming is None:
        raise refused("schedule", "the schedule never fires", code="invalid_schedule")
    stamp = upcoming.isoformat().replace("+00:00", "Z")
    data["next_run_at"] = stamp if data["enabled"] else None


class TriggerRules(KindRules):
    """Cron triggers: creating one schedules it at once; disabling is a separate update."""

    kind = kinds.TRIGGERS

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, TriggerCreate)
        live_agent(tx, workspace, prepared.agent_id)
        # The scheduler takes every new trigger: there is no way to create one disabled.
        data = prepared.model_dump(mode="json") | {"enabled": True}
        _schedule(data)
        return data, data["name"]

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, BaseModel)
        data = merge_changes(row, prepared, ("name", "agent_id", "schedule", "timezone", "enabled"))
        data["message"] = data["message"] or ""
        if "agent_id" in prepared.model_fields_set:
            live_agent(tx, workspace, data["agent_id"])
        _schedule(data)
        return data, data["name"]


class PolicyRules(KindRules):
    """Policies bound to an agent."""

    kind = kinds.POLICIES

    def _check(self, tx: Tx, workspace: str, data: dict[str, Any], agent_changed: bool) -> None:
        if agent_changed:
            live_agent(tx, workspace, data["agent_id"])
        if len(json.dumps(data["config"])) > MAX_POLICY_CONFIG:
            raise refused("config", f"is larger than {MAX_POLICY_CONFIG} bytes", code="limit_exceeded")

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, PolicyCreate)
        data = prepared.model_dump(mode="json")
        self._check(tx, workspace, data, True)
        return data, None

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        assert isinstance(prepared, BaseModel)
        data = merge_changes(row, prepared, ("agent_id",))
        data["config"] = data["config"] or {}
        self._check(tx, workspace, data, "agent_id" in prepared.model_fields_set)
        return data, None
