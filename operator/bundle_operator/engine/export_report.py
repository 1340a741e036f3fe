"""What an export writes besides the entities: setup fields for the values it never writes, the
report of what it replaced and dropped (by path, never by value), and the keys it hands out."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bundle_operator.document.keys import KEY_PATTERN, MAX_KEY_LENGTH


class ExportRefused(Exception):
    """The workspace holds something the export cannot represent; ``entity`` names it."""

    def __init__(self, entity: str, message: str) -> None:
        super().__init__(f"{entity}: {message}")
        self.entity = entity
        self.message = message


class Replaced(NamedTuple):
    """A value the export did not write: ``path`` (a JSON Pointer into the document) now holds a
    reference to the secret setup field ``setup``; ``reason`` says why, never what it was."""

    path: str
    setup: str
    reason: str


class Dropped(NamedTuple):
    """Something of the workspace the document leaves out: ``path`` is the platform collection and
    id (``agents/agt_…``), or a JSON Pointer into the document for a field that was dropped."""

    path: str
    reason: str


@dataclass
class ExportReport:
    """Every value replaced with a setup reference and everything dropped, by path, never by value."""

    replaced: list[Replaced] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The report as JSON data."""
        return {
            "replaced": [r._asdict() for r in self.replaced],
            "dropped": [d._asdict() for d in self.dropped],
        }

    def lines(self) -> list[str]:
        """The report for a person, a line per item."""
        out = [f"replaced {r.path} with ${{setup.{r.setup}}} ({r.reason})" for r in self.replaced]
        out += [f"dropped {d.path}: {d.reason}" for d in self.dropped]
        return out


# Why a value was replaced or dropped (the wording of the report).
SECRET_BACKED = "secret-backed value, never read"
CREDENTIALED_URL = "credentialed URL"
UNBOUND = "bound to an agent the export does not write (archived or gone)"
ENABLED = "was enabled; the bundle installs it disabled until the installation is activated"


@dataclass
class ExportOut:
    """The document an export is building: sections, setup fields, keys handed out, the report."""

    report: ExportReport = field(default_factory=ExportReport)
    sections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    setup: list[dict[str, Any]] = field(default_factory=list)
    # Per bundle entity kind, the document key of each platform id it exported.
    keys: dict[str, dict[str, str]] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)
    # ``knowledge_source`` requirements (tenant addresses), in the order they were met.
    tenant_refs: list[str] = field(default_factory=list)
    # The exported document's name (a gateway bundle is exported when it carries that name).
    name: str = ""
    # What a collection's list does not show, per platform id (a gateway bundle's members).
    contents: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Sections that are one object rather than a list (``gateway``).
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Keys claimed before any kind exported, per platform id: the key that entity must get because
    # something else knows it by that name (an MCP instance a gateway member presents as its name).
    claimed: dict[str, str] = field(default_factory=dict)

    def section(self, name: str) -> list[dict[str, Any]]:
        """The items of one document section (made empty on first use)."""
        return self.sections.setdefault(name, [])

    def drop(self, path: str, reason: str) -> None:
        """Report something the document leaves out."""
        self.report.dropped.append(Dropped(path, reason))

    def key(self, name: str) -> str:
        """A new entity key from a display name (see ``make_key``)."""
        return make_key(name, self.taken)

    def claim(self, entity_id: str, name: str) -> str:
        """Claim the key ``name`` for ``entity_id`` when it is a free valid key, else one made from
        it; returns the key."""
        key = name if is_key(name) and name not in self.taken else make_key(name, self.taken)
        self.taken.add(key)
        self.claimed[entity_id] = key
        return key

    def secret(self, key: str, label: str, path: str = "", reason: str = "") -> str:
        """A new secret setup field (its key made unique) and the reference to it; ``path`` is
        reported as replaced."""
        taken = {f["key"] for f in self.setup}
        unique, n = bounded_key(key), 2
        while unique in taken:  # two places whose derived keys meet: never one field for both
            unique, n = bounded_key(f"{key}_{n}"), n + 1
        self.setup.append({"key": unique, "label": label, "type": "secret"})
        if path:
            self.report.replaced.append(Replaced(path, unique, reason))
        return f"${{setup.{unique}}}"

    def with_agents(self, items: list[Any], path: str) -> Iterator[tuple[Any, str]]:
        """Each of ``items`` (entities of the collection ``path`` that run an agent) with the key of
        its exported agent; one whose agent the export does not write (archived or gone) is
        reported as dropped instead."""
        agents = self.keys.get("agent", {})
        for item in items:
            agent = agents.get(item.agent_id)
            if agent is None:
                self.drop(f"{path}/{item.id}", UNBOUND)
            else:
                yield item, agent

    def keys_of(self, entity: str, ids: list[str], kind: str, what: str) -> list[str]:
        """The document keys of the entities of ``kind`` that ``ids`` name; ExportRefused names one
        the export does not write."""
        keys = self.keys.get(kind, {})
        for entity_id in ids:
            if entity_id not in keys:
                raise ExportRefused(
                    entity, f"refers to {what} {entity_id}, which the export cannot represent"
                )
        return [keys[i] for i in ids]


def is_key(name: str) -> bool:
    """Whether ``name`` is a valid document key as it stands."""
    return bool(KEY_PATTERN.match(name)) and len(name) <= MAX_KEY_LENGTH


def make_key(name: str, taken: set[str]) -> str:
    """A key from a display name: letters, digits and '_', starting with a letter, unique."""
    base = re.sub(r"[^a-zA-Z0-9]+", "_", name).strip("_").lower() or "item"
    if not base[0].isalpha():
        base = f"x_{base}"
    base = base[:60]
    key, n = base, 2
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    taken.add(key)
    return key


def bounded_key(key: str) -> str:
    """A setup key within the document's key length: a long one keeps its start and a hash of it all."""
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return f"{key[: MAX_KEY_LENGTH - 9]}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"
