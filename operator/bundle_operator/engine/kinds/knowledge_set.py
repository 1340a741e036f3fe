"""Knowledge sets and their sources, written by key; a source's credentials are secret values.

Beyond the generic three-way merge: a source's fields belong to its type, so a type change meets a
local edit as one conflict on the whole source; a source's credential names are the bundle's
(their values come from setup and are never read back), so the merge may not keep a name whose
value the writer does not have, and a value the platform lost must be sent again. A source a user
added on the platform (it has no key) is theirs: never drift, never written, and it keeps its set.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

from bundle_operator.document.credentials import is_credentialed_url
from bundle_operator.document.knowledge import (
    ORGANISATION_FIELDS,
    SOURCE_FIELDS,
    TENANT_ADDRESS,
    requirement_ref,
    tenant_address,
)
from bundle_operator.document.models import KnowledgeSet as DocumentSet
from bundle_operator.document.pointer import join_pointer
from bundle_operator.engine.desired import Desired, Inputs
from bundle_operator.engine.export_report import CREDENTIALED_URL, ExportOut
from bundle_operator.engine.kinds.base import EntityKind, Settled, Update, Write
from bundle_operator.engine.merge import MergeResult, OnConflict, merge
from bundle_operator.engine.record import Part, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Sending, Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import NotFound, PlatformError
from bundle_operator.platform.models import (
    Entity,
    KnowledgeSet,
    KnowledgeSetCreate,
    KnowledgeSetUpdate,
    KnowledgeSource,
    KnowledgeSourcePut,
)

log = logging.getLogger(__name__)

# Why an export left something out (the wording of the report).
SOURCE_CREDENTIAL = "knowledge source credential, never read"
ORGANISATION = "ties the source to the exporting organisation; set it afresh after installing"
SOURCE_URL_CREDENTIAL = "the source's base URL carries a credential; add the source afresh after installing"


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


def desired_knowledge_set(knowledge_set: DocumentSet, inputs: Inputs) -> Desired:
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
            value = inputs.fill(text)
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


def project_source(source: KnowledgeSource) -> dict[str, Any]:
    """A live source in the spec form the engine writes (credential names, never values)."""
    return source_spec(source.type, source.model_dump(), list(source.credentials))


def own_sources(entity: Entity | None) -> list[KnowledgeSource]:
    """The sources of a live knowledge set that a user added on the platform (they have no key)."""
    if not isinstance(entity, KnowledgeSet):
        return []
    return [s for s in entity.sources if s.key is None]


class KnowledgeSetKind(EntityKind):
    """A knowledge set: the set, then each keyed source put by key."""

    name = "knowledge_set"
    section = "knowledge_sets"
    collection = kinds.KNOWLEDGE_SETS
    schema = "0.2.0"
    held_by = (kinds.AGENTS,)

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        return desired_knowledge_set(item, inputs)

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        found = found
        return {
            "set": {
                "name": found.name,
                "description": found.description,
                "data_description": found.data_description,
            },
            # Keyed sources only: one a user added (no key) is theirs, not a divergence (seed 004).
            "sources": {s.key: project_source(s) for s in found.sources if s.key is not None},
        }

    async def create(self, writer: Writer, desired: Desired) -> list[Part]:
        spec = desired.spec
        created = await writer.create(
            desired.entity, "primary", self.collection, KnowledgeSetCreate(**spec["set"])
        )
        # Sources are written by key, so a replay after a crash puts the same ones again.
        await write_sources(writer, created.id, spec["sources"], {}, Sending(desired.secrets), new=True)
        return [Part(role="primary", path=self.collection.path, id=created.id)]

    async def write(self, writer: Writer, step: Write) -> list[Part]:
        if step.differs("set"):
            await writer.update(self.collection, step.primary, KnowledgeSetUpdate(**step.target["set"]))
        target, current = step.target["sources"], step.current["sources"]
        await write_sources(writer, step.primary, target, current, step.secrets, entity=step.recorded.entity)
        return list(step.recorded.parts)

    def must_rewrite(self, recorded: RecordedEntity, live: dict[str, Any]) -> bool:
        # A live source lacking a credential the installation wrote (a rolled-back update that
        # replaced them, say) needs the values sent again.
        for key, source in recorded.spec.get("sources", {}).items():
            current = live.get("sources", {}).get(key)
            if current is not None and not set(source["credentials"]) <= set(current["credentials"]):
                return True
        return False

    def settle(self, update: Update) -> Settled:
        desired, live, mode = update.desired.spec, update.live, update.mode
        result = merge(without_retyped_sources(update.base, desired, live), desired, live, mode)
        blocked = settle_credentials(update.recorded.spec, desired, live, result, update.changed, mode)
        return Settled(result, blocked)

    def keeper(self, recorded: RecordedEntity, snapshot: Snapshot, app_held: Mapping[str, str]) -> str | None:
        own = own_sources(snapshot.get(self.collection.path, recorded.primary_id))
        if own:
            return f"holds sources added on the platform ({', '.join(s.id for s in own)})"
        return None

    def own_holders(self, recorded: RecordedEntity, snapshot: Snapshot) -> list[str]:
        set_id = recorded.primary_id
        where = f"{self.collection.path}/{set_id}/sources"
        return [
            f"{where}/{source.id} (a {source.type} source added on the platform)"
            for source in own_sources(snapshot.get(self.collection.path, set_id))
        ]

    def begin(self, writer: Writer, snapshot: Snapshot) -> None:
        # A keyed source is written at the revision the plan read: one edited since fails (412).
        writer.source_revisions = {
            (found.id, source.key): source.revision
            for found in snapshot.entities.get(self.collection.path, {}).values()
            if isinstance(found, KnowledgeSet)
            for source in found.sources
            if source.key is not None
        }

    async def finish(self, writer: Writer) -> None:
        """Delete the sources the run's updates dropped, now that the run has worked; one that will
        not go is logged (it then shows as drift of its set)."""
        touched: set[str] = set()
        for set_id, key, entity in writer.retired_sources:
            writer.calls += 1
            revision = writer.source_revisions.get((set_id, key))
            try:
                await writer.platform.delete_source(writer.workspace, set_id, key, revision=revision)
            except NotFound:
                continue
            except PlatformError as exc:
                log.warning("could not delete source %s of %s: %s", key, entity, exc.code)
                continue
            touched.add(set_id)
        writer.retired_sources = []
        for set_id in sorted(touched):
            await _saw_set(writer, set_id)

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        keys = out.keys.setdefault(self.name, {})
        docs = out.section(self.section)
        for found in listed.get(self.collection.path, []):
            assert isinstance(found, KnowledgeSet)
            key = keys[found.id] = out.key(found.name)
            docs.append(_export_set(key, len(docs), found, out))


async def write_sources(
    writer: Writer,
    set_id: str,
    target: dict[str, Any],
    current: dict[str, Any],
    secrets: Sending,
    *,
    new: bool = False,
    entity: str = "",
) -> None:
    """Bring a knowledge set's keyed sources from ``current`` to ``target``, source by source.

    Sources without a key (a user's own) are in neither and never touched. A source's credentials
    are sent when they differ by name from the live ones or a value changed (a PUT replaces them
    all); otherwise the stored ones stay. A restore (``secrets.values`` None) never sends values. A
    source the target drops is deleted only once the whole run has worked (a run rolled back puts
    back what it changed, and a deleted source's credentials could not be).
    """
    ws, p = writer.workspace, writer.platform
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
        writer.calls += 1
        body = KnowledgeSourcePut(**fields, credentials=credentials)
        revision = writer.source_revisions.get((set_id, key)) if before is not None else None
        written = await p.put_source(ws, set_id, key, body, revision=revision)
        writer.source_revisions[(set_id, key)] = written.revision
        wrote = True
    for key in current:
        if key in target:
            continue
        if secrets.values is None:
            # A restore: the source is one this run added; nothing else was deleted yet.
            writer.calls += 1
            with contextlib.suppress(NotFound):
                await p.delete_source(ws, set_id, key, revision=writer.source_revisions.get((set_id, key)))
            wrote = True
        else:
            writer.retired_sources.append((set_id, key, entity))
    if wrote or new:
        await _saw_set(writer, set_id)


async def _saw_set(writer: Writer, set_id: str) -> None:
    # The set's answer to its last write no longer shows its sources: read it once.
    writer.calls += 1
    found = await writer.platform.get(writer.workspace, kinds.KNOWLEDGE_SETS, set_id)
    writer.saw(kinds.KNOWLEDGE_SETS, found)
    writer.revisions[set_id] = found.revision


def without_retyped_sources(
    base: dict[str, Any], theirs: dict[str, Any], mine: dict[str, Any]
) -> dict[str, Any]:
    """The base without each source whose type the bundle or the platform changed while the other
    side changed it too.

    Merging fields across a type change would make a source of neither type. With a base that is
    no source at all, the two versions meet as one conflict on the whole source, which the conflict
    mode settles whole: the live source or the bundle's.
    """
    sources = dict(base.get("sources", {}))
    for key, old in base.get("sources", {}).items():
        new, live = theirs["sources"].get(key), mine.get("sources", {}).get(key)
        if new is None or live is None or new == old or live == old:
            continue
        if new["type"] != old["type"] or live["type"] != old["type"]:
            sources[key] = None
    return {**base, "sources": sources}


def settle_credentials(
    recorded: dict[str, Any],
    desired: dict[str, Any],
    live: dict[str, Any],
    merged: MergeResult,
    changed_sites: set[str],
    mode: OnConflict,
) -> str | None:
    """Make each merged source's credential names ones the writer can send; returns why the set
    cannot be updated at all, if so.

    The bundle's names win, unless someone added credentials of their own on the platform: those
    stay while nothing needs sending; when a bundle value must be (re)sent, the platform would
    replace them all, which is a conflict on ``/sources/<key>/credentials`` that TakeTheirs
    settles by dropping them, and that KeepMine cannot settle.
    """
    # The merge hands back parts of the live state itself where nothing changed: settle a copy.
    merged.merged = copy.deepcopy(merged.merged)
    for key, wanted in desired["sources"].items():
        out = merged.merged.get("sources", {}).get(key)
        if not isinstance(out, dict) or out.get("type") != wanted["type"]:
            continue  # a whole-source conflict kept the live source; nothing of the bundle's is sent
        want = list(wanted["credentials"])
        current = live.get("sources", {}).get(key)
        if current is None:
            out["credentials"] = want
            continue
        have = set(current["credentials"])
        base = set(recorded.get("sources", {}).get(key, {}).get("credentials", []))
        own = sorted(have - set(want) - base)
        send = (
            any(source_site(key, name) in changed_sites for name in want)
            or not set(want) <= have
            or bool((base - set(want)) & have)
        )
        if not own or not send:
            out["credentials"] = want if not own else sorted(have)
            continue
        pointer = f"/sources/{key}/credentials"
        merged.conflicts.append(pointer)
        if mode is OnConflict.TAKE_THEIRS:
            out["credentials"] = want
        elif mode is OnConflict.KEEP_MINE:
            return (
                f"source '{key}' holds credentials added on the platform ({', '.join(own)}) that "
                "writing the bundle's would replace (TakeTheirs drops them)"
            )
    return None


def source_key(source: KnowledgeSource) -> str:
    """The key a source travels under: its own when it has one (its identity across instances),
    else ``<type>-<short hash>`` of its id, the same on every export of the workspace."""
    if source.key is not None:
        return source.key
    return f"{source.type}-{hashlib.sha256(source.id.encode()).hexdigest()[:8]}"


def _export_set(key: str, index: int, found: KnowledgeSet, out: ExportOut) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": key, "name": found.name}
    if found.description:
        doc["description"] = found.description
    if found.data_description:
        doc["data_description"] = found.data_description
    sources: dict[str, Any] = {}
    taken = {s.key for s in found.sources if s.key is not None}
    for source in found.sources:
        skey = source_key(source)
        while skey in sources or (source.key is None and skey in taken):
            skey += "-x"  # a hash that collides with a key in the set: never two sources under one
        base = join_pointer("/knowledge_sets", index, "sources", skey)
        if isinstance(source.base_url, str) and is_credentialed_url(source.base_url):
            # The address itself carries the credential: nothing of it can travel.
            out.drop(base, SOURCE_URL_CREDENTIAL)
            continue
        exported = _export_source(key, skey, base, source, found, out)
        if exported is not None:
            sources[skey] = exported
    doc["sources"] = sources
    return doc


def _export_source(
    key: str, skey: str, base: str, source: KnowledgeSource, found: KnowledgeSet, out: ExportOut
) -> dict[str, Any] | None:
    doc: dict[str, Any] = {"type": source.type}
    organisation = ORGANISATION_FIELDS.get(source.type, ())
    for name in SOURCE_FIELDS[source.type].all:
        value = getattr(source, name)
        if name == "urls" and isinstance(value, list):
            for position, url in enumerate(value):
                if is_credentialed_url(url):
                    out.drop(join_pointer(base, "urls", position), CREDENTIALED_URL)
            value = [url for url in value if not is_credentialed_url(url)]
        if value is None or value == []:
            continue
        if name in organisation:
            out.drop(join_pointer(base, name), ORGANISATION)
            continue
        doc[name] = value
    if source.type == "website" and "urls" not in doc:
        return None  # every URL it had carried a credential, each reported
    if source.sync_schedule is not None:
        doc["sync_schedule"] = source.sync_schedule
    if source.credentials:
        doc["credentials"] = {
            name: out.secret(
                f"{key}_{skey.replace('-', '_')}_{name}",
                f"Credential {name} of source {skey} of knowledge set {found.name}",
                join_pointer(base, "credentials", name),
                SOURCE_CREDENTIAL,
            )
            for name in sorted(source.credentials)
        }
    address = tenant_address(doc)
    if address is not None:
        ref = requirement_ref(source.type, address[1])
        if ref not in out.tenant_refs:
            out.tenant_refs.append(ref)
    return doc
