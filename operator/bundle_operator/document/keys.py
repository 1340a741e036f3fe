"""Keys and references: the only way entities of a bundle point at each other."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bundle_operator.document.issues import Code, Issue, blocking, blocking_for, shown
from bundle_operator.document.models import Bundle, UrlMcp
from bundle_operator.document.names import display_name_problem, env_name_problem
from bundle_operator.document.pointer import join_pointer

KEY_PATTERN = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*\Z")
MAX_KEY_LENGTH = 128
# The bundle name is the natural key on the platform (gateway bundle, trigger names) and in
# Kubernetes labels, so it keeps to a label-safe alphabet.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9._-]{0,61}[a-zA-Z0-9])?\Z")
SEMVER_PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?\Z"
)

# Section name -> entity kind, in install (dependency) order.
ENTITY_SECTIONS: tuple[tuple[str, str], ...] = (
    ("mcps", "mcp"),
    ("skills", "skill"),
    ("knowledge_sets", "knowledge_set"),
    ("agents", "agent"),
    ("apps", "app"),
    ("channels", "channel"),
    ("automations", "automation"),
    ("policies", "policy"),
)


@dataclass(frozen=True)
class Keyed:
    """One keyed entity of the document and where it stands."""

    kind: str
    key: str
    pointer: str

    @property
    def entity(self) -> str:
        """``kind:key``, the identity used in issues and status."""
        return f"{self.kind}:{self.key}"


def keyed_entities(bundle: Bundle) -> Iterator[Keyed]:
    """Every keyed entity in document order, section by section."""
    for section, kind in ENTITY_SECTIONS:
        items: Sequence[object] = getattr(bundle, section)
        for index, item in enumerate(items):
            yield Keyed(kind, str(getattr(item, "key")), join_pointer(f"/{section}", index, "key"))  # noqa: B009


def check_identity(bundle: Bundle) -> list[Issue]:
    """The bundle's name and version."""
    issues: list[Issue] = []
    if not NAME_PATTERN.match(bundle.name):
        issues.append(
            blocking(
                Code.INVALID_NAME,
                "name must be 1 to 63 letters, digits, '.', '_' or '-', starting and ending with a "
                "letter or digit",
                "/name",
            )
        )
    if bundle.version is not None and not SEMVER_PATTERN.match(bundle.version):
        issues.append(
            blocking(Code.INVALID_VERSION, "version must be a semantic version such as 1.4.0", "/version")
        )
    return issues


def check_platform_names(bundle: Bundle) -> list[Issue]:
    """Names the platform stores as given: MCP and agent names, env and header names. They are
    checked with the platform's own rules (``names``), so analyze passes only what install can."""
    issues: list[Issue] = []
    for index, mcp in enumerate(bundle.mcps):
        issues += _display_name_issues("mcps", "mcp", "MCP", index, mcp)
        section, label = ("headers", "header") if isinstance(mcp, UrlMcp) else ("env", "environment variable")
        for name in mcp.headers if isinstance(mcp, UrlMcp) else mcp.env:
            issues += blocking_for(
                env_name_problem(name),
                Code.INVALID_NAME,
                f"{label} name '{shown(name)}' of MCP '{mcp.key}'",
                join_pointer("/mcps", index, section, name),
                f"mcp:{mcp.key}",
            )
    for section, kind, label in (
        ("agents", "agent", "agent"),
        ("knowledge_sets", "knowledge_set", "knowledge set"),
        ("apps", "app", "app"),
    ):
        for index, item in enumerate(getattr(bundle, section)):
            issues += _display_name_issues(section, kind, label, index, item)
    return issues


def _display_name_issues(section: str, kind: str, label: str, index: int, item: Any) -> list[Issue]:
    """The issue when the name of the entity at ``/<section>/<index>`` is not one the platform stores."""
    problem = display_name_problem(item.name)
    subject, where = f"name of {label} '{item.key}'", join_pointer(f"/{section}", index, "name")
    return blocking_for(problem, Code.INVALID_NAME, subject, where, f"{kind}:{item.key}")


def check_keys(bundle: Bundle) -> list[Issue]:
    """Key syntax, and uniqueness: setup keys among themselves, entity keys across the bundle."""
    issues: list[Issue] = []
    seen_setup: dict[str, int] = {}
    for index, field in enumerate(bundle.setup):
        pointer = join_pointer("/setup", index, "key")
        issues.extend(_key_syntax(field.key, pointer, f"setup:{field.key}", "setup key"))
        if field.key in seen_setup:
            issues.append(
                blocking(
                    Code.DUPLICATE_KEY,
                    f"setup key '{field.key}' is already declared at /setup/{seen_setup[field.key]}",
                    pointer,
                    f"setup:{field.key}",
                )
            )
        else:
            seen_setup[field.key] = index
    owners: dict[str, Keyed] = {}
    for item in keyed_entities(bundle):
        issues.extend(_key_syntax(item.key, item.pointer, item.entity, f"{item.kind} key"))
        holder = owners.get(item.key)
        if holder is not None:
            issues.append(
                blocking(
                    Code.DUPLICATE_KEY,
                    f"key '{item.key}' is already used by {holder.kind} '{holder.key}' "
                    f"({holder.pointer.removesuffix('/key')}); keys are unique within a bundle",
                    item.pointer,
                    item.entity,
                )
            )
        else:
            owners[item.key] = item
    return issues


def _key_syntax(key: str, pointer: str, entity: str, what: str) -> list[Issue]:
    if KEY_PATTERN.match(key) and len(key) <= MAX_KEY_LENGTH:
        return []
    return [
        blocking(
            Code.INVALID_KEY,
            f"{what} '{key[:MAX_KEY_LENGTH]}' must start with a letter and hold only letters, digits "
            f"and '_' (at most {MAX_KEY_LENGTH} characters)",
            pointer,
            entity,
        )
    ]


def check_references(bundle: Bundle) -> list[Issue]:
    """Every key an entity names must exist in the section it points into."""
    mcps = {m.key for m in bundle.mcps}
    skills = {s.key for s in bundle.skills}
    agents = {a.key for a in bundle.agents}
    knowledge_sets = {k.key for k in bundle.knowledge_sets}
    issues: list[Issue] = []

    def need(key: str, pool: set[str], kind: str, pointer: str, entity: str | None) -> None:
        if key not in pool:
            issues.append(
                blocking(
                    Code.UNKNOWN_REFERENCE,
                    f"{pointer} names {kind} '{key}', which the bundle does not declare",
                    pointer,
                    entity,
                )
            )

    for index, agent in enumerate(bundle.agents):
        entity = f"agent:{agent.key}"
        for ref_index, ref in enumerate(agent.mcps):
            need(ref, mcps, "mcp", join_pointer("/agents", index, "mcps", ref_index), entity)
        for ref_index, ref in enumerate(agent.skills):
            need(ref, skills, "skill", join_pointer("/agents", index, "skills", ref_index), entity)
        for ref_index, ref in enumerate(agent.knowledge_sets):
            pointer = join_pointer("/agents", index, "knowledge_sets", ref_index)
            need(ref, knowledge_sets, "knowledge set", pointer, entity)
    for index, app in enumerate(bundle.apps):
        for ref_index, ref in enumerate(app.mcps):
            need(ref, mcps, "mcp", join_pointer("/apps", index, "mcps", ref_index), f"app:{app.key}")
    for section, kind in (("channels", "channel"), ("automations", "automation"), ("policies", "policy")):
        for index, item in enumerate(getattr(bundle, section)):
            pointer = join_pointer(f"/{section}", index, "agent")
            need(item.agent, agents, "agent", pointer, f"{kind}:{item.key}")
    if bundle.gateway is not None:
        for index, member in enumerate(bundle.gateway.members):
            need(member, mcps, "mcp", join_pointer("/gateway/members", index), "gateway:gateway")
    return issues
