"""Writing bundle entities to the platform: journaled creates, updates from a merged spec, deletes.

Every create is journaled, with its idempotency key, and persisted before the call, so a crash
leaves enough behind to find the entity again instead of creating a second one. A run journals all
its creates ahead in one write (keys depend only on the run and the entity, not on ids), so an
install writes its record twice, not once per create; a create not journaled ahead (a secret an
update adds) is persisted on its own. Ids are noted in the journal after each call and reach the
store with the next persist: a crash before that costs one lookup by idempotency key.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from bundle_operator.engine.bodies import (
    SIMPLE_CREATES,
    SIMPLE_UPDATES,
    ImmutableField,
    instance_values,
    server_create,
    server_fields,
)
from bundle_operator.engine.desired import Desired, source_site
from bundle_operator.engine.gateway_writer import write_gateway_contents
from bundle_operator.engine.record import (
    JournalEntry,
    Part,
    Record,
    RecordedEntity,
    idempotency_key,
    secret_hash,
)
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import NotFound, PlatformError
from bundle_operator.platform.kinds import Kind
from bundle_operator.platform.models import (
    ApiModel,
    AppUpdate,
    AppVersionCreate,
    ChannelCreate,
    Entity,
    GatewayBundleCreate,
    GatewayBundleUpdate,
    KnowledgeSetCreate,
    KnowledgeSetUpdate,
    KnowledgeSourcePut,
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServerUpdate,
    SecretCreate,
    SecretUpdate,
    TriggerCreate,
    TriggerUpdate,
)
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)

Persist = Callable[[Record], Awaitable[None]]


@dataclass(frozen=True)
class Sending:
    """The setup secret values a write may send, and the sites whose value changed since the record.

    ``values`` None is a restore: secret values are never read back, so none is sent.
    """

    values: dict[str, str] | None
    changed: frozenset[str] = frozenset()


RESTORE = Sending(None)


_PRIMARY_KIND: dict[str, Kind[Any, Any, Any]] = {
    "skill": kinds.SKILLS,
    "knowledge_set": kinds.KNOWLEDGE_SETS,
    "agent": kinds.AGENTS,
    "app": kinds.APPS,
    "channel": kinds.CHANNELS,
    "automation": kinds.TRIGGERS,
    "policy": kinds.POLICIES,
    "gateway": kinds.GATEWAY_BUNDLES,
}


def planned_parts(desired: Desired) -> list[tuple[str, Kind[Any, Any, Any]]]:
    """The (role, collection) of every platform create a new bundle entity makes, in their order."""
    if desired.kind == "mcp":
        secrets = [(f"secret:{site}", kinds.SECRETS) for site in desired.secrets if site != "context_secret"]
        return [*secrets, ("server", kinds.MCP_SERVERS), ("primary", kinds.MCP_INSTANCES)]
    return [("primary", _PRIMARY_KIND[desired.kind])]


@dataclass
class Writer:
    """One run's writes: which platform, which record, and how to persist it."""

    platform: PlatformAPI
    workspace: str
    record: Record
    persist: Persist
    fingerprint: str
    attempt: int
    bundle_name: str
    calls: int = 0
    # Bodies of creates still pending, kept in memory so a rollback can replay them to learn ids.
    pending_bodies: dict[str, tuple[Kind[Any, Any, Any], ApiModel]] = field(default_factory=dict)
    # Revisions as the plan read them (entity id -> revision), and as our own updates left them.
    revisions: dict[str, int] = field(default_factory=dict)
    # Parts an update stopped using: deleted once the whole run has worked.
    retired: list[tuple[Part, str]] = field(default_factory=list)
    # The platform's answers to this run's writes (path -> id -> entity) and what it deleted: the
    # live state right after the run, without listing again.
    written: dict[str, dict[str, Entity]] = field(default_factory=dict)
    gone: set[tuple[str, str]] = field(default_factory=set)
    # Keys this writer journaled ahead, and those it sent a create for: one journaled ahead and
    # never sent needs no lookup when the run is rolled back.
    ahead: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)
    # Sources an update dropped (set id, key, entity): deleted once the whole run has worked.
    retired_sources: list[tuple[str, str, str]] = field(default_factory=list)
    # The version each app got from this run (app id -> version), so a rollback archives it.
    app_versions: dict[str, int] = field(default_factory=dict)
    # Revisions of keyed sources as the plan read them, and as our own writes left them
    # ((set id, key) -> revision): a source edited since the plan fails its write (412).
    source_revisions: dict[tuple[str, str], int] = field(default_factory=dict)

    def saw(self, kind: Kind[Any, Any, Any], entity: Entity) -> Entity:
        """Keep the platform's answer to a write of ``entity``; returns it."""
        self.written.setdefault(kind.path, {})[entity.id] = entity
        self.gone.discard((kind.path, entity.id))
        return entity

    def journal_ahead(self, planned: list[Desired]) -> bool:
        """Journal every create these entities will make as pending, to be persisted in one write
        before the first of them (their keys do not depend on what earlier creates return).
        Returns whether anything was added."""
        known = {e.idempotency_key for e in self.record.journal}
        added = False
        for desired in planned:
            for role, kind in planned_parts(desired):
                key = idempotency_key(self.record, self.fingerprint, self.attempt, desired.entity, role)
                if key not in known:
                    self.record.journal.append(
                        JournalEntry(entity=desired.entity, role=role, path=kind.path, idempotency_key=key)
                    )
                    known.add(key)
                    self.ahead.add(key)
                    added = True
        return added

    async def create(self, entity: str, role: str, kind: Kind[Any, Any, Any], body: ApiModel) -> Entity:
        """A journaled, idempotent create (persisted first unless journaled ahead)."""
        key = idempotency_key(self.record, self.fingerprint, self.attempt, entity, role)
        entry = next((e for e in self.record.journal if e.idempotency_key == key), None)
        if entry is None:
            entry = JournalEntry(entity=entity, role=role, path=kind.path, idempotency_key=key)
            self.record.journal.append(entry)
            await self.persist(self.record)
        self.pending_bodies[key] = (kind, body)
        self.sent.add(key)
        self.calls += 1
        created = self.saw(kind, await self.platform.create(self.workspace, kind, body, idempotency_key=key))
        entry.id = created.id
        entry.state = "created"
        entry.seq = self.record.next_seq()
        self.pending_bodies.pop(key, None)
        return created

    async def update(self, kind: Kind[Any, Any, Any], entity_id: str, body: ApiModel) -> Entity:
        """An update at the revision the plan read: an edit made since then fails (412) rather than
        being overwritten unseen."""
        revision = self.revisions.get(entity_id)
        if revision is None:
            self.calls += 1
            revision = (await self.platform.get(self.workspace, kind, entity_id)).revision
        self.calls += 1
        updated = self.saw(
            kind, await self.platform.update(self.workspace, kind, entity_id, body, revision=revision)
        )
        self.revisions[entity_id] = updated.revision
        return updated

    async def delete(self, path: str, entity_id: str) -> None:
        """Delete one platform entity; already gone counts as done."""
        kind = kinds.BY_PATH[path]
        self.calls += 1
        with contextlib.suppress(NotFound):
            await self.platform.delete(self.workspace, kind, entity_id)
        self.written.get(path, {}).pop(entity_id, None)
        self.gone.add((path, entity_id))

    # --- creates per bundle entity kind -----------------------------------------------------------

    async def create_entity(self, desired: Desired) -> RecordedEntity:
        """Create every platform entity a bundle entity needs; returns what to record."""
        creator = {
            "mcp": self._create_mcp,
            "knowledge_set": self._create_knowledge_set,
            "channel": self._create_channel,
            "automation": self._create_automation,
            "gateway": self._create_gateway,
        }.get(desired.kind, self._create_simple)
        parts = await creator(desired)
        return RecordedEntity(
            kind=desired.kind,
            key=desired.key,
            parts=parts,
            spec=desired.spec,
            secrets={site: secret_hash(self.record, v) for site, v in desired.secrets.items()},
            seq=self.record.next_seq(),
        )

    async def _create_simple(self, desired: Desired) -> list[Part]:
        """A bundle entity that is one platform entity, created from its spec as it stands."""
        create_model, kind = SIMPLE_CREATES[desired.kind]
        created = await self.create(desired.entity, "primary", kind, create_model(**desired.spec))
        return [Part(role="primary", path=kind.path, id=created.id)]

    async def _create_mcp(self, desired: Desired) -> list[Part]:
        entity = desired.entity
        parts: list[Part] = []
        secret_ids: dict[str, str] = {}
        for site, value in desired.secrets.items():
            if site == "context_secret":
                continue
            body = SecretCreate(name=f"{self.bundle_name}/{desired.key}/{site}", value=SecretStr(value))
            secret = await self.create(entity, f"secret:{site}", kinds.SECRETS, body)
            secret_ids[site] = secret.id
            parts.append(Part(role=f"secret:{site}", path=kinds.SECRETS.path, id=secret.id))
        server_spec = desired.spec["server"]
        server = await self.create(entity, "server", kinds.MCP_SERVERS, server_create(server_spec))
        parts.append(Part(role="server", path=kinds.MCP_SERVERS.path, id=server.id))
        instance_spec = desired.spec["instance"]
        context = desired.secrets.get("context_secret")
        instance_body = McpInstanceCreate(
            server_id=server.id,
            name=instance_spec["name"],
            **instance_values(instance_spec, secret_ids),
            context_secret=SecretStr(context) if context is not None else None,
        )
        instance = await self.create(entity, "primary", kinds.MCP_INSTANCES, instance_body)
        parts.append(Part(role="primary", path=kinds.MCP_INSTANCES.path, id=instance.id))
        return parts

    async def _create_knowledge_set(self, desired: Desired) -> list[Part]:
        spec = desired.spec
        body = KnowledgeSetCreate(**spec["set"])
        created = await self.create(desired.entity, "primary", kinds.KNOWLEDGE_SETS, body)
        # Sources are written by key, so a replay after a crash puts the same ones again.
        await self.write_sources(created.id, spec["sources"], {}, Sending(desired.secrets), new=True)
        return [Part(role="primary", path=kinds.KNOWLEDGE_SETS.path, id=created.id)]

    async def write_sources(
        self,
        set_id: str,
        target: dict[str, Any],
        current: dict[str, Any],
        secrets: Sending,
        *,
        new: bool = False,
        entity: str = "",
    ) -> None:
        """Bring a knowledge set's keyed sources from ``current`` to ``target``, source by source.

        Sources without a key (a user's own) are in neither and never touched. A source's
        credentials are sent when they differ by name from the live ones or a value changed (a PUT
        replaces them all); otherwise the stored ones stay. A restore (``secrets.values`` None) never
        sends values. A source the target drops is deleted only once the whole run has worked (a run
        rolled back puts back what it changed, and a deleted source's credentials could not be).
        """
        ws, p = self.workspace, self.platform
        wrote = False
        for key, source in target.items():
            names = source["credentials"]
            before = current.get(key)
            send = secrets.values is not None and (
                (before is None and bool(names))
                or (before is not None and before["credentials"] != names)
                or any(source_site(key, name) in secrets.changed for name in names)
            )
            if before == source and not send:
                continue
            fields = {k: v for k, v in source.items() if k != "credentials" and v is not None}
            credentials = None
            if send and secrets.values is not None:
                credentials = {name: SecretStr(secrets.values[source_site(key, name)]) for name in names}
            self.calls += 1
            body = KnowledgeSourcePut(**fields, credentials=credentials)
            revision = self.source_revisions.get((set_id, key)) if before is not None else None
            written = await p.put_source(ws, set_id, key, body, revision=revision)
            self.source_revisions[(set_id, key)] = written.revision
            wrote = True
        for key in current:
            if key in target:
                continue
            if secrets.values is None:
                # A restore: the source is one this run added; nothing else was deleted yet.
                self.calls += 1
                with contextlib.suppress(NotFound):
                    await p.delete_source(ws, set_id, key, revision=self.source_revisions.get((set_id, key)))
                wrote = True
            else:
                self.retired_sources.append((set_id, key, entity))
        if wrote or new:
            await self._saw_set(set_id)

    async def _saw_set(self, set_id: str) -> None:
        # The set's answer to its last write no longer shows its sources: read it once.
        self.calls += 1
        knowledge_set = await self.platform.get(self.workspace, kinds.KNOWLEDGE_SETS, set_id)
        self.saw(kinds.KNOWLEDGE_SETS, knowledge_set)
        self.revisions[set_id] = knowledge_set.revision

    async def delete_retired_sources(self) -> None:
        """Delete the sources the run's updates dropped, now that the run has worked; one that will
        not go is logged (it then shows as drift of its set)."""
        touched: set[str] = set()
        for set_id, key, entity in self.retired_sources:
            self.calls += 1
            revision = self.source_revisions.get((set_id, key))
            try:
                await self.platform.delete_source(self.workspace, set_id, key, revision=revision)
            except NotFound:
                continue
            except PlatformError as exc:
                log.warning("could not delete source %s of %s: %s", key, entity, exc.code)
                continue
            touched.add(set_id)
        self.retired_sources = []
        for set_id in sorted(touched):
            await self._saw_set(set_id)

    async def _create_channel(self, desired: Desired) -> list[Part]:
        body = ChannelCreate(**desired.spec, bot_token=SecretStr(desired.secrets["bot_token"]))
        channel = await self.create(desired.entity, "primary", kinds.CHANNELS, body)
        return [Part(role="primary", path=kinds.CHANNELS.path, id=channel.id)]

    async def _create_automation(self, desired: Desired) -> list[Part]:
        spec = dict(desired.spec)
        enabled = spec.pop("enabled")
        trigger = await self.create(desired.entity, "primary", kinds.TRIGGERS, TriggerCreate(**spec))
        if not enabled:
            # The platform schedules a trigger as it is created: stop it before it can run.
            self.calls += 1
            disabled = await self.platform.update(
                self.workspace,
                kinds.TRIGGERS,
                trigger.id,
                TriggerUpdate(enabled=False),
                revision=trigger.revision,
            )
            self.saw(kinds.TRIGGERS, disabled)
        return [Part(role="primary", path=kinds.TRIGGERS.path, id=trigger.id)]

    async def _create_gateway(self, desired: Desired) -> list[Part]:
        spec = desired.spec
        bundle = await self.create(
            desired.entity, "primary", kinds.GATEWAY_BUNDLES, GatewayBundleCreate(**spec["bundle"])
        )
        self.calls += await write_gateway_contents(self.platform, self.workspace, bundle.id, spec, None)
        return [Part(role="primary", path=kinds.GATEWAY_BUNDLES.path, id=bundle.id)]

    # --- updates ----------------------------------------------------------------------------------

    async def update_entity(
        self, recorded: RecordedEntity, desired: Desired, merged: dict[str, Any], live: dict[str, Any]
    ) -> RecordedEntity:
        """Write the merged spec where it differs from live, and changed secret values; returns the record.

        The record keeps what the bundle asked for (``desired.spec``), not the merge: a local edit the
        merge kept stays a visible difference, so drift reports it, later merges keep it, and
        uninstall does not take it for unmodified.
        """
        hashes = {site: secret_hash(self.record, v) for site, v in desired.secrets.items()}
        changed = {site for site, h in hashes.items() if recorded.secrets.get(site) != h}
        parts = await self._write(recorded, merged, live, Sending(desired.secrets, frozenset(changed)))
        return RecordedEntity(
            kind=recorded.kind,
            key=recorded.key,
            parts=parts,
            spec=desired.spec,
            secrets=hashes,
            seq=recorded.seq,
        )

    async def restore_entity(
        self, written: RecordedEntity, live_before: dict[str, Any], merged: dict[str, Any]
    ) -> None:
        """Put an updated entity back to its live state before the run. Secret values cannot be put
        back (they are never read); a changed one stays, and the old hash in the record makes the
        next run write it again."""
        await self._write(written, live_before, merged, RESTORE)

    async def _write(
        self,
        recorded: RecordedEntity,
        target: dict[str, Any],
        current: dict[str, Any],
        secrets: Sending,
    ) -> list[Part]:
        """Bring a live entity from ``current`` to ``target``, sending the secret values ``secrets`` says."""
        primary = recorded.primary_id
        assert primary is not None
        kind = recorded.kind
        if kind == "mcp":
            return await self._write_mcp(recorded, target, current, secrets)
        if kind == "knowledge_set":
            if target["set"] != current["set"]:
                await self.update(kinds.KNOWLEDGE_SETS, primary, KnowledgeSetUpdate(**target["set"]))
            await self.write_sources(
                primary,
                target["sources"],
                current["sources"],
                secrets,
                entity=recorded.entity,
            )
            return list(recorded.parts)
        if kind == "app":
            changes = {k: v for k, v in target.items() if k != "document" and current.get(k) != v}
            if changes:
                await self.update(kinds.APPS, primary, AppUpdate(**changes))
            if target["document"] != current["document"]:
                await self._write_document(primary, target["document"], restore=secrets.values is None)
            return list(recorded.parts)
        if kind == "gateway":
            if target["bundle"] != current["bundle"]:
                body = GatewayBundleUpdate(
                    description=target["bundle"]["description"], overview=target["bundle"]["overview"]
                )
                await self.update(kinds.GATEWAY_BUNDLES, primary, body)
            self.calls += await write_gateway_contents(
                self.platform, self.workspace, primary, target, current
            )
            return list(recorded.parts)
        changes = {k: v for k, v in target.items() if current.get(k) != v}
        if kind == "agent" and "knowledge_set_ids" in current and "knowledge_set_ids" not in target:
            changes["knowledge_set_ids"] = []  # the spec leaves the field out while it is empty
        if kind == "channel" and secrets.values is not None and "bot_token" in secrets.changed:
            changes["bot_token"] = SecretStr(secrets.values["bot_token"])
        update_model, path_kind = SIMPLE_UPDATES[kind]
        unsupported = sorted(k for k in changes if k not in update_model.model_fields)
        if unsupported:
            # The platform cannot change these in place (a policy's type, say): fail the run rather
            # than record a write that did not happen.
            raise ImmutableField(recorded.entity, unsupported)
        if changes:
            await self.update(path_kind, primary, update_model(**changes))
        return list(recorded.parts)

    async def _write_mcp(
        self,
        recorded: RecordedEntity,
        target: dict[str, Any],
        current: dict[str, Any],
        secrets: Sending,
    ) -> list[Part]:
        parts = list(recorded.parts)
        by_role = {p.role: p for p in parts}
        secret_ids = {p.role.removeprefix("secret:"): p.id for p in parts if p.role.startswith("secret:")}
        for site, value in (secrets.values or {}).items():
            if site == "context_secret":
                continue
            if site in secret_ids:
                if site in secrets.changed:
                    await self.update(kinds.SECRETS, secret_ids[site], SecretUpdate(value=SecretStr(value)))
                continue
            body = SecretCreate(name=f"{self.bundle_name}/{recorded.key}/{site}", value=SecretStr(value))
            secret = await self.create(recorded.entity, f"secret:{site}", kinds.SECRETS, body)
            secret_ids[site] = secret.id
            parts.append(Part(role=f"secret:{site}", path=kinds.SECRETS.path, id=secret.id))
        if target["server"] != current["server"]:
            await self.update(
                kinds.MCP_SERVERS, by_role["server"].id, McpServerUpdate(**server_fields(target["server"]))
            )
        instance = target["instance"]
        context_changed = secrets.values is not None and "context_secret" in secrets.changed
        if instance != current["instance"] or context_changed:
            values = instance_values(instance, secret_ids)
            if context_changed and secrets.values is not None and "context_secret" in secrets.values:
                values["context_secret"] = SecretStr(secrets.values["context_secret"])
            await self.update(
                kinds.MCP_INSTANCES, by_role["primary"].id, McpInstanceUpdate(name=instance["name"], **values)
            )
        if secrets.values is not None:
            # Secrets the bundle no longer uses are deleted only once the whole run has worked.
            for site, secret_id in list(secret_ids.items()):
                if site not in secrets.values:
                    retired = next(p for p in parts if p.id == secret_id)
                    self.retired.append((retired, recorded.entity))
                    parts.remove(retired)
        return parts

    # --- deletes ----------------------------------------------------------------------------------

    async def delete_entity(self, recorded: RecordedEntity) -> list[str]:
        """Delete every part of a recorded entity, the primary first; returns the failures. When the
        primary stays (in use, say), its server and secrets stay too: it still uses them. An app is
        archived instead (seed 004): instances of it that are running keep working."""
        if recorded.kind == "app":
            return await self._archive_app(recorded)
        failures: list[str] = []
        order = sorted(recorded.parts, key=lambda p: (p.role != "primary", p.role != "server"))
        for part in order:
            if await self.failed_to_delete(part, recorded.entity):
                failures.append(f"{part.path}/{part.id}")
                if part.role in ("primary", "server"):
                    break
        return failures

    async def _write_document(self, app_id: str, document: dict[str, Any] | None, *, restore: bool) -> None:
        """A document is never changed in place: it becomes the app's next version. A restore
        archives the version the run added instead, which brings back the one before it."""
        added = self.app_versions.pop(app_id, None) if restore else None
        if added is not None:
            self.calls += 2
            await self.platform.set_app_version_archived(self.workspace, app_id, added, True)
            app = await self.platform.get(self.workspace, kinds.APPS, app_id)
        elif document is None:
            return  # nothing to bring back: every version was archived before the run
        else:
            self.calls += 1
            app = await self.platform.add_app_version(
                self.workspace, app_id, AppVersionCreate(document=document)
            )
            if not restore and app.latest_version is not None:
                self.app_versions[app_id] = app.latest_version
        self.saw(kinds.APPS, app)
        self.revisions[app_id] = app.revision

    async def _archive_app(self, recorded: RecordedEntity) -> list[str]:
        part = recorded.primary
        if part is None:
            return []
        try:
            await self.update(kinds.APPS, part.id, AppUpdate(archived=True))
        except NotFound:
            return []  # deleted on the platform already
        except PlatformError as exc:
            log.warning("could not archive %s %s of %s: %s", part.path, part.id, recorded.entity, exc.code)
            return [f"{part.path}/{part.id}"]
        self.record.keep_archived(part)
        return []

    async def failed_to_delete(self, part: Part, entity: str) -> bool:
        """Delete one part; log and answer True when the platform would not."""
        try:
            await self.delete(part.path, part.id)
        except PlatformError as exc:
            log.warning("could not delete %s %s of %s: %s", part.path, part.id, entity, exc.code)
            return True
        return False
