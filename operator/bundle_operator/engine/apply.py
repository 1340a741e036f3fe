"""Analyze against a live platform, then install or update all-or-nothing by compensation.

``plan`` reads (the record, one list per kind) and writes nothing: every entity CREATE, REUSE,
UPDATE or SKIPPED, the three-way merge of each update with its conflicts, the entities the bundle
dropped, the requirements. ``apply`` carries a plan out level by level (MCPs, skills, agents,
channels, automations, policies, gateway), creates within a level concurrently; when anything
fails, everything this run created is deleted again, newest first, and the original error is
raised.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bundle_operator.document.gateway_rules import GATEWAY_ENTITY
from bundle_operator.document.issues import Code, Issue, blocking, shown, warning
from bundle_operator.document.knowledge import requirement_ref, tenant_address
from bundle_operator.document.models import Bundle
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.analyze import analyze_with_values, requirement_key
from bundle_operator.engine.desired import LEVELS, Desired, Inputs, desired_level
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.knowledge import (
    archived_app_holders,
    credentials_lost,
    settle_credentials,
    without_retyped_sources,
)
from bundle_operator.engine.merge import MergeResult, OnConflict, merge
from bundle_operator.engine.preview import Action, EntityPlan, Preview
from bundle_operator.engine.record import (
    JournalEntry,
    Part,
    Record,
    RecordedEntity,
    deletion_order,
    secret_hash,
)
from bundle_operator.engine.snapshot import Snapshot, binding_changes, own_sources, project, read_snapshot
from bundle_operator.engine.writer import Persist, Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import NotFound, PlatformError
from bundle_operator.platform.models import KnowledgeSet
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """How to install: activation, requirement substitutions, and what to do on a conflict."""

    activate: bool = False
    substitutions: Mapping[str, str] = field(default_factory=dict)
    on_conflict: OnConflict = OnConflict.FAIL


@dataclass
class Planned:
    """The decision for one entity, with what it was decided from."""

    desired: Desired
    action: Action
    reason: str | None = None
    recorded: RecordedEntity | None = None
    live: dict[str, Any] | None = None
    merge: MergeResult | None = None
    replaces: bool = False  # a CREATE that replaces a live entity the platform cannot change in place
    blocked: str | None = None  # why this entity cannot be brought to the bundle at all
    rebound: list[str] = field(default_factory=list)  # binding paths changed on the platform


# Fields the platform cannot change in place: a change replaces the entity, if nobody edited it.
IMMUTABLE: dict[str, tuple[str, ...]] = {
    "policy": ("/type",),
    "skill": ("/source_type",),
    "mcp": ("/server/type",),
}


def _at(spec: Any, pointer: str) -> Any:
    for token in pointer.strip("/").split("/"):
        spec = spec.get(token) if isinstance(spec, dict) else None
    return spec


@dataclass
class Removal:
    """A recorded entity the bundle no longer has: deleted when unmodified, else kept."""

    recorded: RecordedEntity
    delete: bool
    edited_paths: list[str]


@dataclass
class Plan:
    """Everything an install would do, and the preview that reports it."""

    preview: Preview
    items: list[Planned]
    removals: list[Removal]
    inputs: Inputs | None
    snapshot: Snapshot
    fingerprint: str
    drift: dict[str, list[str]] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)  # see Requirements
    bound: dict[str, str] = field(default_factory=dict)


@dataclass
class ApplyResult:
    """What an install or update did."""

    preview: Preview
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    calls: int = 0
    # The live state of the platform entities right after the run, from the plan's snapshot and
    # the platform's answers to the run's writes (the gateway's contents excepted).
    snapshot: Snapshot | None = None


class Blocked(Exception):
    """Analyze found something that blocks: nothing was written."""

    def __init__(self, preview: Preview) -> None:
        codes = sorted({str(i.code) for i in preview.issues if i.blocking})
        super().__init__(f"the install is blocked: {', '.join(codes)}")
        self.preview = preview


BUNDLE_INVALID = "bundle_invalid"
BUNDLE_INSTALL_FAILED = "bundle_install_failed"


class PersistFailed(Exception):
    """The record could not be stored. The run stops where it is, as a crash would, and rolls
    nothing back: a rollback would delete entities whose deletion the store could not record
    either. The next run resumes from what the store holds."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class InstallFailed(Exception):
    """A platform write failed and the run was rolled back; ``cause`` is the original error.

    ``entity`` is the bundle entity (``kind:key``) whose write failed, when one did;
    ``rolled_back`` what the rollback deleted (``kind:key (collection/id)``, newest first) and
    ``rollback_failures`` what it could not delete (``collection/id``, kept as leftovers that the
    next run deletes). ``code`` tells an invalid bundle or setup value (the platform refused an
    entity by its rules, 422) from a step that failed for another reason.
    """

    def __init__(
        self,
        cause: BaseException,
        rollback_failures: list[str],
        entity: str | None = None,
        rolled_back: list[str] | None = None,
    ) -> None:
        self.cause = cause
        self.rollback_failures = rollback_failures
        self.entity = entity
        self.rolled_back = rolled_back or []
        super().__init__(self.detail)

    @property
    def code(self) -> str:
        """``bundle_invalid`` when the platform refused what the bundle asked for (or the request
        could not even be built from it), else ``bundle_install_failed``."""
        if isinstance(self.cause, ValidationError):
            return BUNDLE_INVALID
        if isinstance(self.cause, PlatformError) and self.cause.status == 422:
            return BUNDLE_INVALID
        return BUNDLE_INSTALL_FAILED

    @property
    def fields(self) -> list[str]:
        """The platform's names of the fields it refused (from the problem's ``errors``)."""
        if isinstance(self.cause, PlatformError):
            return [e.field for e in self.cause.errors]
        if isinstance(self.cause, ValidationError):
            return list(dict.fromkeys(_loc(e["loc"]) for e in self.cause.errors()))
        return [str(f) for f in getattr(self.cause, "fields", [])]

    @property
    def detail(self) -> str:
        """What went wrong, never quoting a value: the platform's problem detail, or for a request
        the API models refused before it was sent, each field with the rule it broke."""
        cause = self.cause
        if isinstance(cause, PlatformError):
            return str(cause)
        if isinstance(cause, ValidationError):
            # str(ValidationError) repeats the input, which may be a secret: only the rules.
            rules = dict.fromkeys(f"{_loc(e['loc'])}: {e['msg']}" for e in cause.errors())
            return f"the platform's API does not take this value ({'; '.join(rules)})"
        return type(cause).__name__


_UNION_TAGS = frozenset({"str", "constrained-str", "int", "float", "bool", "SecretRef"})


def _loc(loc: tuple[int | str, ...]) -> str:
    # Union members show up in a location as their type names ("constrained-str"): not fields.
    return ".".join(str(part) for part in loc if part not in _UNION_TAGS)


def fingerprint(record: Record, digest: str, setup: Mapping[str, str], options: Options) -> str:
    """A hash of every input of a run; secret values enter only hashed."""
    material = {
        "digest": digest,
        "setup": {k: secret_hash(record, v) for k, v in sorted(setup.items())},
        "activate": options.activate,
        "substitutions": dict(sorted(options.substitutions.items())),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _decide(desired: Desired, record: Record, snapshot: Snapshot, options: Options) -> Planned:
    recorded = record.find(desired.entity)
    if recorded is None:
        return Planned(desired, "CREATE")
    live = project(recorded, snapshot)
    if live is None:
        reason = (
            "the agent it recorded is archived; it is installed again"
            if desired.kind == "agent" and snapshot.get(kinds.AGENTS.path, recorded.primary_id) is not None
            else "the entity it recorded no longer exists; it is created again"
        )
        return Planned(desired, "CREATE", reason, recorded)
    hashes = {site: secret_hash(record, v) for site, v in desired.secrets.items()}
    # A trigger whose name or agent changed on the platform is not the one this install bound:
    # reusing it as it is would leave it running someone else's agent. Its binding is an update
    # the bundle must win or a conflict for the user to settle, never a local edit that survives.
    rebound = binding_changes(desired.kind, recorded.spec, live)
    lost = desired.kind == "knowledge_set" and credentials_lost(recorded.spec, live)
    if desired.spec == recorded.spec and hashes == recorded.secrets and not rebound and not lost:
        return Planned(desired, "REUSE", None, recorded, live)
    immutable = [p for p in IMMUTABLE.get(desired.kind, ()) if _at(recorded.spec, p) != _at(desired.spec, p)]
    if immutable:
        fields = ", ".join(immutable)
        if not changed_paths(recorded.spec, live):
            reason = f"{fields} cannot change in place; it is replaced"
            return Planned(desired, "CREATE", reason, recorded, live, replaces=True)
        blocked = f"{fields} cannot change in place, and the entity was edited since it was installed"
        return Planned(desired, "UPDATE", None, recorded, live, blocked=blocked)
    base = recorded.spec
    if rebound:
        # Without a base for the binding fields, a changed binding meets the bundle's as a conflict.
        base = {k: v for k, v in recorded.spec.items() if f"/{k}" not in rebound}
    if desired.kind == "knowledge_set":
        base = without_retyped_sources(base, desired.spec, live)
    result = merge(base, desired.spec, live, options.on_conflict)
    if desired.kind == "knowledge_set":
        changed = {site for site, value in hashes.items() if recorded.secrets.get(site) != value}
        unsettled = settle_credentials(
            recorded.spec, desired.spec, live, result, changed, options.on_conflict
        )
        return Planned(desired, "UPDATE", None, recorded, live, result, blocked=unsettled)
    return Planned(desired, "UPDATE", None, recorded, live, result, rebound=rebound)


async def plan(
    platform: PlatformAPI,
    workspace: str,
    parsed: ParsedBundle,
    setup: Mapping[str, object],
    record: Record,
    options: Options | None = None,
    snapshot: Snapshot | None = None,
) -> Plan:
    """Analyze with the platform: what an install would do. Writes nothing."""
    options = options or Options()
    offline, values = analyze_with_values(parsed, setup, options.substitutions)
    bundle = parsed.bundle
    empty = Snapshot()
    if bundle is None or offline.bundle is None:
        return Plan(offline, [], [], None, empty, "")
    # Requirements are checked against the platform below; the offline note does not apply.
    issues = [i for i in offline.issues if i.code != Code.REQUIREMENT_NOT_CHECKED]
    skipped = {f"{p.kind}:{p.key}" for p in offline.entities if p.action == "SKIPPED"}
    reasons = {f"{p.kind}:{p.key}": p.reason for p in offline.entities if p.action == "SKIPPED"}
    checked = await _requirements(platform, workspace, parsed, options, skipped)
    issues += checked.issues
    if checked.replaced:
        # An MCP a tool substitution replaces is not installed; what used it uses the substitute.
        bundle = bundle.model_copy(
            update={"mcps": [m for m in bundle.mcps if f"mcp:{m.key}" not in checked.replaced]}
        )
        skipped -= set(checked.replaced)
        reasons.update(checked.replaced)
    inputs = Inputs(
        bundle=bundle,
        setup=values,
        secret_fields=frozenset(f.key for f in bundle.setup if f.type == "secret"),
        activate=options.activate,
        substitutions=dict(options.substitutions),
        stripped=frozenset(checked.stripped),
    )
    if snapshot is None:
        owned = record.entities or record.archived
        snapshot = await read_snapshot(platform, workspace, record) if owned else empty
    fp = fingerprint(record, offline.bundle.digest, values, options)
    ids: dict[str, str] = dict(checked.bound)
    items: list[Planned] = []
    drift: dict[str, list[str]] = {}
    for level in LEVELS:
        _alias(ids, checked.aliases)
        for desired in desired_level(level, inputs, ids, skipped):
            decided = _decide(desired, record, snapshot, options)
            items.append(decided)
            if decided.action != "CREATE" and decided.recorded is not None and decided.recorded.primary_id:
                ids[desired.entity] = decided.recorded.primary_id
            if decided.action == "REUSE" and decided.live is not None and decided.recorded is not None:
                paths = changed_paths(decided.recorded.spec, decided.live)
                if paths:
                    drift[desired.entity] = paths
            if decided.merge is not None and decided.merge.conflicts:
                plain = [c for c in decided.merge.conflicts if c not in decided.rebound]
                issues += _conflict_issues(desired.entity, plain, options.on_conflict)
                issues += _binding_issues(desired.entity, decided.rebound, options.on_conflict)
            if decided.blocked is not None:
                issues.append(
                    blocking(
                        Code.UPDATE_CONFLICT,
                        f"{desired.entity}: {decided.blocked}; undo the "
                        "local edit or delete the entity to let the bundle replace it",
                        entity=desired.entity,
                    )
                )
    wanted = {p.desired.entity for p in items}
    removals: list[Removal] = []
    leaving = [r for r in record.entities if r.entity not in wanted]
    archiving = [r.primary_id for r in leaving if r.kind == "app" and r.primary_id is not None]
    app_held = archived_app_holders(record, snapshot, archiving)
    for recorded in deletion_order(leaving):
        live = project(recorded, snapshot)
        keeper = _keeper(recorded, snapshot, app_held)
        if keeper is not None:
            removals.append(Removal(recorded, False, []))
            issues.append(
                warning(
                    Code.ENTITY_KEPT,
                    f"{recorded.entity} is no longer in the bundle but {keeper}; it is kept",
                    entity=recorded.entity,
                )
            )
            continue
        if live is None:
            # Gone already, but its other parts (server spec, secrets) are still ours to delete,
            # and the record must let go of it.
            removals.append(Removal(recorded, True, []))
            continue
        edited = changed_paths(recorded.spec, live)
        removals.append(Removal(recorded, not edited, edited))
        if edited:
            issues.append(
                warning(
                    Code.ENTITY_KEPT,
                    f"{recorded.entity} is no longer in the bundle but was edited "
                    f"since it was installed ({', '.join(edited[:5])}); it is kept",
                    entity=recorded.entity,
                )
            )
        else:
            issues.append(
                warning(
                    Code.ENTITY_REMOVED,
                    f"{recorded.entity} is no longer in the bundle; it will be deleted",
                    entity=recorded.entity,
                )
            )
    plans = [
        EntityPlan(p.desired.kind, p.desired.key, p.action, p.reason, ids.get(p.desired.entity))
        for p in items
    ]
    by_entity = {p.entity for p in plans}
    plans += [
        EntityPlan(entity.split(":", 1)[0], entity.split(":", 1)[1], "SKIPPED", reasons[entity])
        for entity in reasons
        if entity not in by_entity
    ]
    plans.sort(key=lambda p: LEVELS.index(p.kind))
    preview = Preview(offline.bundle, plans, issues)
    return Plan(
        preview, items, removals, inputs, snapshot, fp, drift, skipped, checked.aliases, checked.bound
    )


def _keeper(recorded: RecordedEntity, snapshot: Snapshot, app_held: Mapping[str, str]) -> str | None:
    """Why an entity the bundle dropped must stay although nobody edited it, or None.

    A set holding a source someone added on the platform would take that source with it; an MCP an
    archived app uses must keep serving the app's running instances.
    """
    if recorded.kind == "knowledge_set":
        own = own_sources(snapshot.get(kinds.KNOWLEDGE_SETS.path, recorded.primary_id))
        if own:
            return f"holds sources added on the platform ({', '.join(s.id for s in own)})"
    holder = app_held.get(recorded.primary_id or "")
    if recorded.kind == "mcp" and holder is not None:
        return f"{holder} still uses it"
    return None


def _alias(ids: dict[str, str], aliases: Mapping[str, str]) -> None:
    """Let each MCP key a tool substitution points elsewhere resolve to its substitute's id."""
    for entity, target in aliases.items():
        if target in ids:
            ids[entity] = ids[target]


def _conflict_issues(entity: str, conflicts: list[str], mode: OnConflict) -> list[Issue]:
    if mode is OnConflict.FAIL:
        return [
            blocking(
                Code.UPDATE_CONFLICT,
                f"{entity}: {path} was changed on the platform and in the bundle; "
                "set onConflict to KeepMine or TakeTheirs (bundlectl: --on-conflict keep-mine or "
                "take-theirs), or undo one side",
                path,
                entity,
            )
            for path in conflicts
        ]
    side = "the platform's value" if mode is OnConflict.KEEP_MINE else "the bundle's value"
    return [
        warning(Code.UPDATE_CONFLICT, f"{entity}: {path} changed on both sides; {side} is kept", path, entity)
        for path in conflicts
    ]


@dataclass
class Requirements:
    """What checking the requirements against the platform decided."""

    issues: list[Issue] = field(default_factory=list)
    stripped: set[str] = field(default_factory=set)  # "kind:ref" dropped by a strip policy
    # Tool substitutions that take effect: an MCP key of the bundle stands for another MCP, either
    # one of the bundle's own (aliases, key -> key) or an MCP instance on the platform (bound, id).
    aliases: dict[str, str] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)
    replaced: dict[str, str] = field(default_factory=dict)  # "mcp:key" -> why it is not installed


class _Catalog:
    """What the platform offers, read once per plan and only when a requirement asks."""

    def __init__(self, platform: PlatformAPI, workspace: str) -> None:
        self.platform = platform
        self.workspace = workspace
        self._models: set[str] | None = None
        self._models_read = False

    async def models(self) -> set[str] | None:
        """The model ids the platform lists; None when it has no model catalog."""
        if not self._models_read:
            self._models_read = True
            try:
                self._models = {m.id for m in await self.platform.list_models(self.workspace)}
            except NotFound:
                self._models = None
        return self._models

    async def instances(self, name_or_id: str) -> list[str]:
        """The ids of the MCP instances with this id or name (an agent can use only instances)."""
        if name_or_id.startswith(f"{kinds.MCP_INSTANCES.prefix}_"):
            try:
                return [(await self.platform.get(self.workspace, kinds.MCP_INSTANCES, name_or_id)).id]
            except NotFound:
                return []
        found = await self.platform.list_all(
            self.workspace, kinds.MCP_INSTANCES, filters={"name": name_or_id}
        )
        return [item.id for item in found]


def _binding_issues(entity: str, paths: list[str], mode: OnConflict) -> list[Issue]:
    what = {"/name": "no longer carries the name this install gave it", "/agent_id": "now runs another agent"}
    issues: list[Issue] = []
    for path in paths:
        found = f"{entity}: the trigger {what.get(path, 'changed what binds it to this install')} ({path})"
        if mode is OnConflict.FAIL:
            issues.append(
                blocking(
                    Code.UPDATE_CONFLICT,
                    f"{found}; it is not reused as it is: set onConflict to TakeTheirs (bundlectl: "
                    "--on-conflict take-theirs) to bind it back to the bundle, or KeepMine (keep-mine) "
                    "to leave it as edited",
                    path,
                    entity,
                )
            )
        elif mode is OnConflict.KEEP_MINE:
            issues.append(
                warning(Code.UPDATE_CONFLICT, f"{found}; it is left as edited (KeepMine)", path, entity)
            )
        else:
            issues.append(
                warning(Code.UPDATE_CONFLICT, f"{found}; it is bound back (TakeTheirs)", path, entity)
            )
    return issues


async def _requirements(
    platform: PlatformAPI, workspace: str, parsed: ParsedBundle, options: Options, skipped: set[str]
) -> Requirements:
    """Check each requirement the offline analysis could not: does the platform have it?

    ``substitute`` requirements without a mapping were blocked offline already. A model is
    present when the platform's model catalog lists it; a tool when the bundle installs an MCP
    with that key or, for a tool the bundle does not bring, when the workspace has an MCP
    instance of that name. A knowledge source's address is never looked up (seed 004: whether a
    bucket is there and readable is for the first sync to say), so one without a mapping counts as
    missing: ``strip`` drops the bundle's sources at that address, ``block`` refuses. A mapped
    model must be in the catalog; a mapped tool is wired in where the bundle uses it, or refused.
    """
    bundle = parsed.bundle
    assert bundle is not None
    out = Requirements()
    catalog = _Catalog(platform, workspace)
    own_mcps = {m.key for m in bundle.mcps if f"mcp:{m.key}" not in skipped}
    for index, requirement in enumerate(bundle.requires):
        ref = requirement_key(requirement)
        pointer = f"/requires/{index}"
        mapped = options.substitutions.get(ref)
        if mapped is None and requirement.policy == "substitute":
            continue  # blocked offline
        if requirement.kind == "model":
            models = await catalog.models()
            if models is None:
                out.issues.append(
                    warning(
                        Code.REQUIREMENT_NOT_VERIFIED,
                        f"requirement {shown(ref)} cannot be checked: the platform lists no models; "
                        "it is assumed present",
                        pointer,
                    )
                )
                continue
            if mapped is not None:
                if mapped not in models:
                    out.issues.append(
                        blocking(
                            Code.SUBSTITUTION_INVALID,
                            f"the substitution for {shown(ref)} names model '{shown(mapped)}', which the "
                            "platform does not offer (GET .../models lists those it does)",
                            pointer,
                        )
                    )
                continue
            present = requirement.ref in models
        elif requirement.kind == "tool":
            if mapped is not None:
                issue = await _substitute_tool(requirement.ref, mapped, own_mcps, skipped, catalog, out)
                if issue is not None:
                    message = f"the substitution for {shown(ref)} {issue}"
                    out.issues.append(blocking(Code.SUBSTITUTION_INVALID, message, pointer))
                continue
            if requirement.ref in {m.key for m in bundle.mcps}:
                present = requirement.ref in own_mcps  # the bundle's own MCP, or nothing: never by name
            else:
                present = bool(await catalog.instances(requirement.ref))
        else:
            if mapped is not None:
                continue  # only the mapping's shape can be checked, and analyze did
            present = False
        if present:
            continue
        if requirement.policy == "block":
            out.issues.append(
                blocking(
                    Code.REQUIREMENT_MISSING,
                    f"requirement {shown(ref)} is missing on the platform and its policy is block; "
                    f"substitute it (--substitute {shown(ref)}=VALUE) or install where it exists",
                    pointer,
                )
            )
        else:
            out.stripped.add(ref)
            users = _users(bundle, requirement.kind, requirement.ref)
            dropped = f"dropped from {', '.join(users)}" if users else "nothing in the bundle refers to it"
            if requirement.kind == "model" and users:
                dropped += ", which run on the platform's default model"
            out.issues.append(
                warning(
                    Code.REQUIREMENT_STRIPPED,
                    f"requirement {shown(ref)} is missing on the platform; it is {dropped}",
                    pointer,
                )
            )
    out.issues = [i.with_line(parsed.source_map.line_of(i.path)) for i in out.issues]
    return out


def _users(bundle: Bundle, kind: str, ref: str) -> list[str]:
    """The entities that refer to a requirement (a model by name, a tool by MCP key)."""
    if kind == "model":
        return [f"agent:{a.key}" for a in bundle.agents if a.model == ref]
    if kind == "tool":
        users = [f"agent:{a.key}" for a in bundle.agents if ref in a.mcps]
        if bundle.gateway is not None and ref in bundle.gateway.members:
            users.append(GATEWAY_ENTITY)
        return users
    if kind == "knowledge_source":
        return [
            f"knowledge_set:{k.key} (source {key})"
            for k in bundle.knowledge_sets
            for key, source in k.sources.items()
            if (address := tenant_address(source.model_dump())) is not None
            and requirement_ref(source.type, address[1]) == ref
        ]
    return []


async def _substitute_tool(
    ref: str, mapped: str, own_mcps: set[str], skipped: set[str], catalog: _Catalog, out: Requirements
) -> str | None:
    """Make ``tool:ref=mapped`` take effect, or say why it cannot (the rest of the message)."""
    if mapped == ref and ref in own_mcps:
        return None
    if mapped in own_mcps:
        target = f"the bundle's MCP '{shown(mapped)}'"
        out.aliases[f"mcp:{ref}"] = f"mcp:{mapped}"
    else:
        found = await catalog.instances(mapped)
        if not found:
            return (
                f"names '{shown(mapped)}', which is neither an MCP of the bundle nor an MCP instance "
                "(by name or id) in the workspace"
            )
        if len(found) > 1:
            return (
                f"names '{shown(mapped)}', which several MCP instances in the workspace are called; "
                "give the id of the one to use"
            )
        target = f"the workspace's MCP instance {found[0]}"
        out.bound[f"mcp:{ref}"] = found[0]
    if f"mcp:{ref}" in skipped or ref in own_mcps:
        out.replaced[f"mcp:{ref}"] = f"replaced by {target} (substitution tool:{shown(ref)})"
    return None


async def apply(
    platform: PlatformAPI,
    workspace: str,
    parsed: ParsedBundle,
    setup: Mapping[str, object],
    record: Record,
    persist: Persist,
    options: Options | None = None,
    planned: Plan | None = None,
) -> ApplyResult:
    """Install or update to the bundle; raises Blocked (nothing written) or InstallFailed (rolled back).

    ``planned`` is a plan the caller just made with the same arguments; without one, apply plans.
    """
    options = options or Options()
    persist_locked = GroupCommit(persist)

    first = planned or await plan(platform, workspace, parsed, setup, record, options)
    if first.inputs is None or first.preview.blocking:
        raise Blocked(first.preview)
    nothing_to_do = (
        not record.journal
        and not record.leftovers
        and not record.unresolved
        and not first.removals
        and record.digest == parsed.digest
        and all(item.action == "REUSE" for item in first.items)
    )
    if nothing_to_do:
        # A re-run with nothing to write writes nothing, not even the record.
        result = ApplyResult(first.preview, reused=[i.desired.entity for i in first.items])
        result.calls = first.snapshot.calls
        result.snapshot = first.snapshot
        return result
    if record.journal and record.inflight_fingerprint != first.fingerprint:
        # A run was interrupted with other inputs: its creates cannot be replayed, so undo them.
        writer = writer_for(platform, workspace, record, persist_locked, first, record.inflight_attempt or 0)
        await roll_back_journal(writer)
    starting = record.inflight_fingerprint != first.fingerprint
    if starting:
        record.attempt += 1
        record.inflight_fingerprint = first.fingerprint
        record.inflight_attempt = record.attempt
    writer = writer_for(
        platform, workspace, record, persist_locked, first, record.inflight_attempt or record.attempt
    )
    # Every create of the run is journaled in the same write that starts it.
    ahead = [item.desired for item in first.items if item.action == "CREATE"]
    if writer.journal_ahead(ahead) or starting:
        await persist_locked(record)
    result = ApplyResult(first.preview)
    result.calls = first.snapshot.calls
    await delete_leftovers(writer)
    ids: dict[str, str] = dict(first.bound)
    before = list(record.entities)
    entities: dict[str, RecordedEntity] = {r.entity: r for r in record.entities}
    superseded: list[Planned] = []
    updates: list[Planned] = []
    undo: list[tuple[dict[str, Any], RecordedEntity, dict[str, Any]]] = []
    failing: str | None = None  # the bundle entity whose write failed
    try:
        # Creates first, level by level: until every create has worked, nothing that already
        # existed has been touched, so a rollback only has to delete.
        for level in LEVELS:
            _alias(ids, first.aliases)
            decided = [
                _decide(d, record, first.snapshot, options)
                for d in desired_level(level, first.inputs, ids, first.skipped)
            ]
            creates = [item for item in decided if item.action == "CREATE"]
            outcomes = await asyncio.gather(
                *(writer.create_entity(i.desired) for i in creates), return_exceptions=True
            )
            failed = _first_failure(creates, outcomes)
            if failed is not None:
                failing = failed[0].desired.entity
                raise failed[1]
            for item, outcome in zip(creates, outcomes, strict=True):
                assert isinstance(outcome, RecordedEntity)
                entities[item.desired.entity] = outcome
                result.created.append(item.desired.entity)
                if item.recorded is not None:
                    superseded.append(item)  # what is left of the old one goes once the run succeeds
            for item in decided:
                entity = item.desired.entity
                ids[entity] = entities[entity].primary_id or ""
                if item.action == "UPDATE":
                    updates.append(item)
                elif item.action == "REUSE":
                    result.reused.append(entity)
        # Then updates, level by level; a failure puts back what was updated before deleting creates.
        for level in LEVELS:
            batch = [item for item in updates if item.desired.kind == level]
            outcomes = await asyncio.gather(
                *(_update(writer, item) for item in batch), return_exceptions=True
            )
            for item, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, RecordedEntity):
                    assert item.recorded is not None and item.live is not None and item.merge is not None
                    undo.append((item.live, outcome, item.merge.merged))
                    entities[item.desired.entity] = outcome
            failed = _first_failure(batch, outcomes)
            if failed is not None:
                failing = failed[0].desired.entity
                raise failed[1]
        for item in updates:
            result.updated.append(item.desired.entity)
            if item.merge is not None and item.merge.conflicts:
                result.conflicts[item.desired.entity] = item.merge.conflicts
    except BaseException as exc:
        if isinstance(exc, PersistFailed):
            raise
        for live, written, merged in reversed(undo):
            await _restore(writer, live, written, merged)
        record.entities = before
        rolled_back: list[str] = []
        failures = await roll_back_journal(writer, rolled_back)
        result.calls += writer.calls
        if isinstance(exc, Exception):
            raise InstallFailed(exc, failures, getattr(exc, "entity", None) or failing, rolled_back) from exc
        raise
    # Removals last. An entity whose delete fails (in use by something kept, or the platform
    # refuses) stays recorded and owned, and the next run tries again.
    for removal in first.removals:
        entity = removal.recorded.entity
        if not removal.delete:
            result.kept.append(entity)
            entities.pop(entity, None)
            continue
        if await writer.delete_entity(removal.recorded):
            result.kept.append(entity)
        else:
            result.deleted.append(entity)
            entities.pop(entity, None)
    # What the run stopped using (the parts of a re-created entity, secrets an update dropped)
    # goes last; a part that will not go stays owned as a leftover.
    retired = [
        (part, item.desired.entity)
        for item in superseded
        if item.recorded is not None
        for part in sorted(item.recorded.parts, key=lambda p: (p.role != "primary", p.role != "server"))
        # A gone primary needs no delete; an archived agent stays archived; a replaced one goes.
        if part.role != "primary" or item.replaces
    ]
    for part, owner in [*retired, *writer.retired]:
        if await writer.failed_to_delete(part, owner):
            record.leftovers.append(part)
    await writer.delete_retired_sources()
    for item in superseded:
        # An app archived on the platform and installed again stays the installation's own.
        archived = item.recorded.primary if item.desired.kind == "app" and item.recorded else None
        if archived is not None and first.snapshot.get(archived.path, archived.id) is not None:
            record.keep_archived(archived)
    record.entities = sorted(entities.values(), key=lambda e: e.seq)
    record.journal = []
    record.inflight_fingerprint = None
    record.inflight_attempt = None
    assert parsed.bundle is not None and parsed.digest is not None
    record.bundle_name = parsed.bundle.name
    record.bundle_version = parsed.bundle.version
    record.digest = parsed.digest
    await persist_locked(record)
    result.calls += writer.calls
    result.snapshot = _after(first.snapshot, writer)
    result.preview = Preview(
        first.preview.bundle,
        [
            EntityPlan(p.kind, p.key, p.action, p.reason, ids.get(p.entity) or p.id)
            for p in first.preview.entities
        ],
        first.preview.issues,
    )
    return result


class GroupCommit:
    """Persists one record for concurrent writers, one write at a time; a caller whose change a
    write that started after it already carried does not write again (the record is one object,
    serialized as each write starts)."""

    def __init__(self, persist: Persist) -> None:
        self._persist = persist
        self._lock = asyncio.Lock()
        self._changes = 0
        self._stored = 0

    async def __call__(self, record: Record) -> None:
        self._changes += 1
        mine = self._changes
        async with self._lock:
            if self._stored >= mine:
                return
            upto = self._changes
            try:
                await self._persist(record)
            except Exception as exc:
                raise PersistFailed(exc) from exc
            self._stored = upto


def _after(before: Snapshot, writer: Writer) -> Snapshot:
    """The plan's snapshot with the run's writes and deletes applied (the gateway's contents left out)."""
    entities = {path: dict(items) for path, items in before.entities.items()}
    for path, written in writer.written.items():
        entities.setdefault(path, {}).update(written)
    for path, entity_id in writer.gone:
        entities.get(path, {}).pop(entity_id, None)
    return Snapshot(entities=entities)


def _first_failure(items: list[Planned], outcomes: list[Any]) -> tuple[Planned, BaseException] | None:
    """The first item of a concurrent batch whose write raised, with what it raised."""
    for item, outcome in zip(items, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            return item, outcome
    return None


async def _update(writer: Writer, item: Planned) -> RecordedEntity:
    assert item.recorded is not None and item.merge is not None and item.live is not None
    return await writer.update_entity(item.recorded, item.desired, item.merge.merged, item.live)


async def _restore(
    writer: Writer, live: dict[str, Any], written: RecordedEntity, merged: dict[str, Any]
) -> None:
    """Put an updated entity back as it was live before the run (secret values cannot be put back)."""
    try:
        await writer.restore_entity(written, live, merged)
    except Exception as exc:  # a rollback keeps going whatever one restore does
        log.warning("rollback: could not restore %s: %s", written.entity, type(exc).__name__)


async def resolve_unconfirmed(writer: Writer) -> None:
    """Look up the creates a rolled-back run could not confirm, and delete those that landed."""
    record = writer.record
    still: list[JournalEntry] = []
    for entry in record.unresolved:
        try:
            found = await writer.platform.find_by_idempotency_key(writer.workspace, entry.idempotency_key)
        except PlatformError:
            still.append(entry)
            continue
        if found is None or not found.exists:
            continue
        if await writer.failed_to_delete(Part(role=entry.role, path=entry.path, id=found.id), entry.entity):
            still.append(entry)
    if still != record.unresolved:
        record.unresolved = still
        await writer.persist(record)


async def delete_leftovers(writer: Writer) -> None:
    """Retry deleting parts an earlier run could not delete, and resolve unconfirmed creates."""
    record = writer.record
    if record.unresolved:
        await resolve_unconfirmed(writer)
    remaining = []
    for part in record.leftovers:
        if await writer.failed_to_delete(part, "an earlier run"):
            remaining.append(part)
    if remaining != record.leftovers:
        record.leftovers = remaining
        await writer.persist(record)


def writer_for(
    platform: PlatformAPI, workspace: str, record: Record, persist: Persist, planned: Plan, attempt: int
) -> Writer:
    """A writer for a planned run, at the revisions the plan read."""
    assert planned.inputs is not None
    writer = Writer(
        platform, workspace, record, persist, planned.fingerprint, attempt, planned.inputs.bundle.name
    )
    writer.revisions = {
        i: e.revision for items in planned.snapshot.entities.values() for i, e in items.items()
    }
    writer.source_revisions = {
        (entity.id, source.key): source.revision
        for entity in planned.snapshot.entities.get(kinds.KNOWLEDGE_SETS.path, {}).values()
        if isinstance(entity, KnowledgeSet)
        for source in entity.sources
        if source.key is not None
    }
    return writer


async def roll_back_journal(writer: Writer, deleted: list[str] | None = None) -> list[str]:
    """Delete everything the journal says this run created, newest first; replay pending creates
    first so an entity created behind a lost response is found and deleted too.

    Returns what could not be deleted (``collection/id``); ``deleted``, when given, is extended
    with what was (``kind:key (collection/id)``)."""
    record = writer.record
    for entry in list(record.journal):
        if entry.state != "pending":
            continue
        if entry.idempotency_key in writer.ahead and entry.idempotency_key not in writer.sent:
            entry.state = "deleted"  # journaled ahead by this run and never sent: nothing to undo
            continue
        # Did the create land? Ask the platform by idempotency key: that works after a crash too,
        # when the request body is gone with the process that built it.
        try:
            found = await writer.platform.find_by_idempotency_key(writer.workspace, entry.idempotency_key)
        except PlatformError:
            found = None
            if entry.idempotency_key in writer.pending_bodies:
                # Cannot ask: replay the create itself, which returns the entity if it landed.
                kind, body = writer.pending_bodies[entry.idempotency_key]
                try:
                    entity = await writer.platform.create(
                        writer.workspace, kind, body, idempotency_key=entry.idempotency_key
                    )
                    entry.id, entry.state = entity.id, "created"
                    entry.seq = record.next_seq()
                except PlatformError:
                    pass
            continue
        if found is not None and found.exists:
            entry.id, entry.state = found.id, "created"
            entry.seq = record.next_seq()
        else:
            entry.state = "deleted"  # never created, or already gone: nothing to undo
    failures: list[str] = []
    for entry in sorted(record.journal, key=lambda e: -e.seq):
        if entry.state != "created" or entry.id is None:
            if entry.state == "pending":
                log.warning(
                    "rollback: %s %s of %s was never confirmed created; the next run looks it up",
                    entry.path,
                    entry.role,
                    entry.entity,
                )
                record.unresolved.append(entry)
            continue
        try:
            failed = await writer.failed_to_delete(
                Part(role=entry.role, path=entry.path, id=entry.id), entry.entity
            )
        except Exception as exc:  # a rollback keeps going whatever one delete does
            log.warning("rollback: could not delete %s %s of %s: %r", entry.path, entry.id, entry.entity, exc)
            failed = True
        if failed:
            # Still ours: kept as a leftover, so the next run (or uninstall) deletes it.
            failures.append(f"{entry.path}/{entry.id}")
            record.leftovers.append(Part(role=entry.role, path=entry.path, id=entry.id))
        else:
            entry.state = "deleted"
            if deleted is not None:
                deleted.append(f"{entry.entity} ({entry.path}/{entry.id})")
    record.journal = []
    record.inflight_fingerprint = None
    record.inflight_attempt = None
    await writer.persist(record)
    return failures
