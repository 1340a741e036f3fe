"""What an installation remembers: the record of what it wrote, and the journal of creates in flight.

The caller persists both (the operator in the cluster, the CLI in a state file); the engine hands
them back through a ``persist`` callback at every step that must survive a crash. No secret value
is ever kept: where a value matters for change detection, its salted hash is kept instead.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RECORD_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Part(_Model):
    """One platform entity written for a bundle entity (an MCP has secrets, a server and an instance)."""

    role: str  # "primary", "server", "secret:<site>"
    path: str  # the platform collection, e.g. "mcp-instances"
    id: str


class RecordedEntity(_Model):
    """A bundle entity as the installation last wrote it."""

    kind: str
    key: str
    parts: list[Part] = Field(default_factory=list)
    spec: dict[str, Any] = Field(default_factory=dict)
    # Hashes of the secret values written (site -> hash), to notice a changed setup value.
    secrets: dict[str, str] = Field(default_factory=dict)
    seq: int = 0  # creation order: uninstall and rollback go newest first

    @property
    def entity(self) -> str:
        """``kind:key``."""
        return f"{self.kind}:{self.key}"

    @property
    def primary(self) -> Part | None:
        """The part that stands for this entity (the instance of an MCP, say)."""
        return next((part for part in self.parts if part.role == "primary"), None)

    @property
    def primary_id(self) -> str | None:
        """The id of the entity that stands for this one."""
        primary = self.primary
        return primary.id if primary is not None else None


class JournalEntry(_Model):
    """A create about to happen or done: enough to find its entity again after a crash."""

    entity: str  # kind:key
    role: str
    path: str
    idempotency_key: str
    id: str | None = None
    state: Literal["pending", "created", "deleted"] = "pending"
    seq: int = 0


class Record(_Model):
    """The state of one installation."""

    version: int = RECORD_VERSION
    installation: str
    workspace: str
    # The key of the HMACs of secret values: random per installation, kept with the record (in the
    # operator, inside the installation's own state Secret), so the hashes cannot be brute-forced
    # from a value guessed offline without it.
    hmac_key: str = Field(default_factory=lambda: secrets.token_hex(32), repr=False)
    bundle_name: str | None = None
    bundle_version: str | None = None
    digest: str | None = None
    attempt: int = 0  # grows with every run that writes, so its creates get fresh idempotency keys
    # The run in flight: its inputs' fingerprint and attempt, so a restart can replay its creates.
    inflight_fingerprint: str | None = None
    inflight_attempt: int | None = None
    seq: int = 0
    entities: list[RecordedEntity] = Field(default_factory=list)
    journal: list[JournalEntry] = Field(default_factory=list)
    # Parts still owned but no longer used, whose delete failed: every run tries them again.
    leftovers: list[Part] = Field(default_factory=list)
    # Creates a rolled-back run could not confirm either way (the platform did not answer): the
    # next run looks each up by idempotency key and deletes what did land.
    unresolved: list[JournalEntry] = Field(default_factory=list)
    # Apps the installation archived instead of deleting (seed 004: running instances keep
    # working): still its own, so they never count as someone else's, and the MCPs they use stay.
    archived: list[Part] = Field(default_factory=list)

    def keep_archived(self, part: Part) -> None:
        """Remember an app the installation archived (once)."""
        if all(kept.id != part.id for kept in self.archived):
            self.archived.append(part)

    def find(self, entity: str) -> RecordedEntity | None:
        """The recorded entity ``kind:key``, if any."""
        for recorded in self.entities:
            if recorded.entity == entity:
                return recorded
        return None

    def next_seq(self) -> int:
        """A new creation sequence number."""
        self.seq += 1
        return self.seq


def primary_first(parts: list[Part]) -> list[Part]:
    """Parts in the order they go: the primary, then the server spec it uses, then the rest
    (secrets), so that nothing is deleted while an entity that stays still refers to it."""
    return sorted(parts, key=lambda p: (p.role != "primary", p.role != "server"))


def idempotency_key(record: Record, fingerprint: str, attempt: int, entity: str, role: str) -> str:
    """Stable for one installation, inputs (bundle digest and setup), attempt, entity and part: a create
    repeated after a crash returns the entity the first one made."""
    material = "\x1f".join([record.installation, record.workspace, fingerprint, str(attempt), entity, role])
    return "bo-" + hashlib.sha256(material.encode()).hexdigest()[:40]


def secret_hash(record: Record, value: str) -> str:
    """An HMAC of a secret value under the record's key: equal values compare equal, the value cannot
    be read back, and without the key a guess cannot be checked."""
    digest = hmac.new(bytes.fromhex(record.hmac_key), value.encode(), hashlib.sha256).hexdigest()
    return "hmac-sha256:" + digest
