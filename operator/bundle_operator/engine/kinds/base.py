"""What the engine knows of one bundle entity kind: ``EntityKind``, with the defaults most share.

The generic plan, apply, uninstall, drift and export loops ask a kind, and nothing else in the
engine names one. A kind only has to say how its entities are made from the document
(``desired_of``) and read back (``project``); the defaults write it as one platform entity whose
spec stands as it is in the request bodies, update the fields that differ and delete its parts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from bundle_operator.engine.desired import Desired, Inputs
from bundle_operator.engine.export_report import ExportOut
from bundle_operator.engine.merge import MergeResult, OnConflict, merge
from bundle_operator.engine.record import Part, Record, RecordedEntity, primary_first
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Sending, Writer
from bundle_operator.platform.kinds import Kind
from bundle_operator.platform.models import ApiModel, Entity
from bundle_operator.platform.protocol import PlatformAPI

AnyKind = Kind[Any, Any, Any]

GONE = "the entity it recorded no longer exists; it is created again"


class ImmutableField(Exception):
    """The bundle changed a field the platform cannot change in place."""

    def __init__(self, entity: str, fields: list[str]) -> None:
        super().__init__(f"{entity}: the platform cannot change {', '.join(fields)} in place")
        self.entity = entity
        self.fields = fields


@dataclass(frozen=True)
class Write:
    """One write of a recorded entity: from its live state ``current`` to ``target``, sending the
    secret values ``secrets`` says (an update, or the undo of one)."""

    recorded: RecordedEntity
    target: dict[str, Any]
    current: dict[str, Any]
    secrets: Sending

    @property
    def primary(self) -> str:
        """The id of the platform entity that stands for it."""
        primary = self.recorded.primary_id
        assert primary is not None
        return primary

    def differs(self, name: str) -> bool:
        """Whether the field ``name`` of the target differs from the live one."""
        return bool(self.target.get(name) != self.current.get(name))


@dataclass(frozen=True)
class Update:
    """What an update of a recorded entity is merged from: the base (what the installation wrote,
    less what must not count as the base), the bundle's spec, the live state, the secret sites
    whose value changed, and the conflict mode."""

    recorded: RecordedEntity
    base: dict[str, Any]
    desired: Desired
    live: dict[str, Any]
    changed: set[str]
    mode: OnConflict


@dataclass
class Settled:
    """An update's merge, with why the entity cannot be brought to the bundle at all (if so)."""

    merge: MergeResult
    blocked: str | None = None


class UniqueName(NamedTuple):
    """A name the platform keeps unique in a workspace: the name, what holds such names, and the
    document pointer the name comes from."""

    name: str
    what: str
    pointer: str


@dataclass(frozen=True)
class Holds:
    """What one live entity refers to: each platform id, with a detail naming how (may be empty)."""

    refs: dict[str, str] = field(default_factory=dict)


class EntityKind(ABC):
    """One bundle entity kind: where its entities live, and how each step of a run treats them."""

    name: ClassVar[str]  # ``mcp``; an entity is ``name:key``
    section: ClassVar[str]  # the document's section (``mcps``); the export writes it
    collection: ClassVar[AnyKind]  # the platform collection of the entity that stands for it
    schema: ClassVar[str] = "0.1.0"  # the oldest schema version that has the section
    immutable: ClassVar[tuple[str, ...]] = ()  # spec pointers the platform cannot change in place
    binding: ClassVar[tuple[str, ...]] = ()  # live fields that make the entity this install's own
    held_by: ClassVar[tuple[AnyKind, ...]] = ()  # collections whose entities may refer to its parts
    reads: ClassVar[tuple[AnyKind, ...]] = ()  # collections an export lists for it (else its own)
    contents_reads: ClassVar[int] = 0  # calls that read what its collection's list does not show
    used_by_apps: ClassVar[bool] = False  # an archived app may keep using it
    remove_archives: ClassVar[bool] = False  # removing it archives it (running instances keep working)
    uses_mcps: ClassVar[bool] = False  # its document entities name MCPs (``mcps``) to use
    runs_agent: ClassVar[bool] = False  # its document entities name the agent they belong to (``agent``)

    # --- from the document ------------------------------------------------------------------

    def desired(self, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> list[Desired]:
        """The entities of this kind the document asks for, in document order."""
        return [self.desired_of(item, inputs, ids, skipped) for item in self.items(inputs)]

    def items(self, inputs: Inputs) -> Sequence[Any]:
        """The document's entities of this kind."""
        return list(getattr(inputs.bundle, self.section))

    @abstractmethod
    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        """What the platform should hold for one document entity (``ids`` resolve references)."""

    # --- from the platform ------------------------------------------------------------------

    def project(self, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        """The live state in spec form, or None when it is gone (or archived)."""
        found = snapshot.get(self.collection.path, recorded.primary_id)
        if not isinstance(found, self.collection.entity):
            return None
        return self.live_spec(found, recorded, snapshot)

    @abstractmethod
    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        """A live primary entity (of the collection's model) in spec form; None when it counts as
        gone (archived, say)."""

    async def read_contents(self, platform: PlatformAPI, workspace: str, found: Entity) -> dict[str, Any]:
        """What the list of the collection does not show (a gateway's members), in
        ``contents_reads`` calls; only asked of a kind that has any."""
        return {}

    # --- writes -----------------------------------------------------------------------------

    def parts(self, desired: Desired) -> list[tuple[str, AnyKind]]:
        """The (role, collection) of every platform create a new entity makes, in their order."""
        return [("primary", self.collection)]

    async def create(self, writer: Writer, desired: Desired) -> list[Part]:
        """Create every platform entity it needs; returns the parts."""
        created = await writer.create(desired.entity, "primary", self.collection, self.body(desired))
        return [Part(role="primary", path=self.collection.path, id=created.id)]

    def body(self, desired: Desired) -> ApiModel:
        """The create request of a kind written as its spec stands."""
        return self.collection.create(**desired.spec)  # type: ignore[no-any-return]

    async def write(self, writer: Writer, step: Write) -> list[Part]:
        """Bring a live entity to ``step.target``; returns the parts it now has."""
        await self.update_fields(writer, step.recorded, self.changes(step))
        return list(step.recorded.parts)

    def changes(self, step: Write) -> dict[str, Any]:
        """The fields an update sends: those of the target that differ from the live ones."""
        return {k: v for k, v in step.target.items() if step.current.get(k) != v}

    async def update_fields(self, writer: Writer, recorded: RecordedEntity, changes: dict[str, Any]) -> None:
        """Update the primary entity's ``changes``; a field its update model lacks fails the run."""
        model = self.collection.update
        unsupported = sorted(k for k in changes if k not in model.model_fields)
        if unsupported:
            # The platform cannot change these in place (a policy's type, say): fail the run rather
            # than record a write that did not happen.
            raise ImmutableField(recorded.entity, unsupported)
        primary = recorded.primary_id
        assert primary is not None
        if changes:
            await writer.update(self.collection, primary, model(**changes))

    async def remove(self, writer: Writer, recorded: RecordedEntity) -> list[str]:
        """Delete it, the primary first; returns the parts that would not go."""
        failures: list[str] = []
        for part in primary_first(recorded.parts):
            if await writer.failed_to_delete(part, recorded.entity):
                failures.append(f"{part.path}/{part.id}")
                if part.role in ("primary", "server"):
                    # The primary stays (in use, say): it still uses its server and secrets.
                    break
        return failures

    def begin(self, writer: Writer, snapshot: Snapshot) -> None:
        """Give a run's writer what it must know of this kind's live state."""
        return None

    async def finish(self, writer: Writer) -> None:
        """What a run that worked does last for this kind (parts it dropped along the way)."""
        return None

    def superseded(self, record: Record, recorded: RecordedEntity, snapshot: Snapshot) -> None:
        """An entity of this kind was created again; ``recorded`` is the one it replaces."""
        return None

    # --- decisions --------------------------------------------------------------------------

    def unique_name(self, desired: Desired) -> UniqueName | None:
        """The name a new entity of this kind must find free (the platform refuses a create that
        takes a name already held); None when names may repeat."""
        return None

    def trouble(self, recorded: RecordedEntity, snapshot: Snapshot) -> str | None:
        """Why a live entity the platform runs cannot do its work now (a server that cannot start),
        or None."""
        return None

    def gone_reason(self, recorded: RecordedEntity, snapshot: Snapshot) -> str:
        """Why a recorded entity that no longer shows live is created again."""
        return GONE

    def must_rewrite(self, recorded: RecordedEntity, live: dict[str, Any]) -> bool:
        """Whether a live entity equal to the bundle still needs writing (a lost credential)."""
        return False

    def settle(self, update: Update) -> Settled:
        """The three-way merge of an update."""
        return Settled(merge(update.base, update.desired.spec, update.live, update.mode))

    def keeper(self, recorded: RecordedEntity, snapshot: Snapshot, app_held: Mapping[str, str]) -> str | None:
        """Why an entity the bundle dropped stays although nobody edited it, or None."""
        holder = app_held.get(recorded.primary_id or "") if self.used_by_apps else None
        return f"{holder} still uses it" if holder is not None else None

    def own_holders(self, recorded: RecordedEntity, snapshot: Snapshot) -> list[str]:
        """What someone added inside the entity on the platform, which its delete would take along."""
        return []

    async def holds(self, platform: PlatformAPI, workspace: str, item: Entity) -> Holds:
        """What a live entity of this kind's collection refers to (uninstall asks before deleting)."""
        return Holds({ref: "" for ref in referenced_ids(item.model_dump(mode="json"))})

    # --- export -----------------------------------------------------------------------------

    def claim_keys(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        """Before any kind exports: claim the keys that entities of other kinds must get (see
        ``ExportOut.claimed``)."""
        return None

    @abstractmethod
    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        """Add the workspace's entities of this kind (``listed``: collection path -> entities) to
        the exported document."""


def fields_of(found: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The named fields of a live entity, in spec form where the spec keeps them as they are."""
    return {name: getattr(found, name) for name in names}


def referenced_ids(spec: Any) -> set[str]:
    """Every platform id a live spec refers to (agent, instance, skill and knowledge set ids)."""
    found: set[str] = set()
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("agent_id", "mcp_instance_id") and isinstance(item, str):
                    found.add(item)
                elif key in ("mcp_instance_ids", "skill_ids", "knowledge_set_ids") and isinstance(item, list):
                    found.update(i for i in item if isinstance(i, str))
                else:
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return found
