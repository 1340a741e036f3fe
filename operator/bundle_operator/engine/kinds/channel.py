"""Channels (Telegram): bound to an agent; the bot token is a secret value the platform stores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

from bundle_operator.document.pointer import join_pointer
from bundle_operator.engine.desired import Desired, Inputs, resolve
from bundle_operator.engine.export_report import ENABLED, ExportOut
from bundle_operator.engine.kinds.base import EntityKind, Write, fields_of
from bundle_operator.engine.record import RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform import kinds
from bundle_operator.platform.models import ApiModel, ChannelCreate, Entity

BOT_TOKEN = "bot_token"
BOT_TOKEN_NEVER_READ = "channel bot token, never read"


class ChannelKind(EntityKind):
    """A channel; enabled only once activation is asked for."""

    name = "channel"
    section = "channels"
    collection = kinds.CHANNELS
    runs_agent = True

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        spec = {
            "type": item.type,
            "name": item.key,
            "agent_id": resolve(ids, f"agent:{item.agent}"),
            "enabled": item.enabled and inputs.activate,
        }
        return Desired(self.name, item.key, spec, {BOT_TOKEN: inputs.fill(item.bot_token)})

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        return fields_of(found, ("type", "name", "agent_id", "enabled"))

    def body(self, desired: Desired) -> ApiModel:
        return ChannelCreate(**desired.spec, bot_token=SecretStr(desired.secrets[BOT_TOKEN]))

    def changes(self, step: Write) -> dict[str, Any]:
        changes = super().changes(step)
        values = step.secrets.values
        if values is not None and BOT_TOKEN in step.secrets.changed:
            changes[BOT_TOKEN] = SecretStr(values[BOT_TOKEN])
        return changes

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        docs = out.section(self.section)
        # One bound to an archived or unknown agent has nothing to wire it to: it is dropped.
        for channel, agent in out.with_agents(listed.get(self.collection.path, []), self.collection.path):
            key = out.key(channel.name or f"{channel.type}_channel")
            path = join_pointer("/channels", len(docs))
            label = f"Bot token of channel {channel.name or key}"
            token = out.secret(f"{key}_bot_token", label, join_pointer(path, BOT_TOKEN), BOT_TOKEN_NEVER_READ)
            if channel.enabled:
                out.drop(join_pointer(path, "enabled"), ENABLED)
            docs.append({"key": key, "type": channel.type, "agent": agent, BOT_TOKEN: token})
