"""The preview analyze returns: every entity with the action install would take, and the issues."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bundle_operator.document.issues import Issue

Action = Literal["CREATE", "REUSE", "UPDATE", "SKIPPED"]


@dataclass(frozen=True)
class BundleSummary:
    """Which bundle a preview is about."""

    name: str
    version: str | None
    digest: str


@dataclass(frozen=True)
class EntityPlan:
    """What install would do with one entity; ``id`` is its platform id once one exists."""

    kind: str
    key: str
    action: Action
    reason: str | None = None
    id: str | None = None

    @property
    def entity(self) -> str:
        """``kind:key``."""
        return f"{self.kind}:{self.key}"

    def to_json(self) -> dict[str, object]:
        """The entity as the CLI JSON contract spells it."""
        out: dict[str, object] = {
            "kind": self.kind,
            "key": self.key,
            "action": self.action,
            "reason": self.reason,
        }
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True)
class Preview:
    """The result of analyze: the contract of ``bundlectl analyze -o json``."""

    bundle: BundleSummary | None
    entities: list[EntityPlan] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)

    @property
    def blocking(self) -> bool:
        """Whether anything stops the install."""
        return any(issue.blocking for issue in self.issues)

    def to_json(self) -> dict[str, object]:
        """The preview as JSON data."""
        bundle = (
            None
            if self.bundle is None
            else {"name": self.bundle.name, "version": self.bundle.version, "digest": self.bundle.digest}
        )
        return {
            "bundle": bundle,
            "entities": [entity.to_json() for entity in self.entities],
            "issues": [issue.to_json() for issue in self.issues],
            "blocking": self.blocking,
        }
