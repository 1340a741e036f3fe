"""A Bundle's status fields from its resolved source: counts, setup fields, signature, issues."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bundle_operator.document.issues import Issue
from bundle_operator.document.models import SCHEMA_VERSION
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.k8s.resources import BundleStatus, EntityCounts, SetupFieldStatus, StatusIssue
from bundle_operator.sources.resolution import Resolved

# A status object must stay far below etcd's 1.5 MiB: a hostile document can produce an issue per
# line, so status shows the first ones (blocking first) and the condition message gives the count.
MAX_STATUS_ISSUES = 100


def bundle_status_fields(resolved: Resolved) -> dict[str, Any]:
    """The Bundle's status fields (camelCase, JSON-ready) but conditions and observedGeneration.

    Every field is present, null or empty when unknown, so a merge patch also clears what an earlier
    source left (a signature, once the source is no longer an archive).
    """
    parsed = resolved.parsed
    bundle = parsed.bundle
    status = BundleStatus(
        digest=parsed.digest if bundle is not None else None,
        bundle_name=bundle.name if bundle is not None else None,
        version=bundle.version if bundle is not None else None,
        entities=_entity_counts(parsed),
        setup_fields=[
            SetupFieldStatus(
                key=f.key, label=f.label, type=f.type, required=f.required, description=f.description
            )
            for f in (bundle.setup if bundle is not None else [])
        ],
        source=resolved.source,
        signature=resolved.signature,
        issues=[_status_issue(issue) for issue in _kept(parsed.issues, MAX_STATUS_ISSUES)],
    )
    fields: dict[str, Any] = status.model_dump(
        mode="json", by_alias=True, exclude={"conditions", "observed_generation"}
    )
    if fields["entities"] is not None:  # the 0.2.0 counts only where they apply
        fields["entities"] = {kind: n for kind, n in fields["entities"].items() if n is not None}
    return fields


def _entity_counts(parsed: ParsedBundle) -> EntityCounts | None:
    bundle = parsed.bundle
    if bundle is None:
        return None
    return EntityCounts(
        mcps=len(bundle.mcps),
        skills=len(bundle.skills),
        agents=len(bundle.agents),
        channels=len(bundle.channels),
        automations=len(bundle.automations),
        policies=len(bundle.policies),
        knowledge_sets=len(bundle.knowledge_sets) if bundle.schema_version != SCHEMA_VERSION else None,
        apps=len(bundle.apps) if bundle.schema_version != SCHEMA_VERSION else None,
    )


def status_issues(issues: Iterable[Issue], limit: int = MAX_STATUS_ISSUES) -> list[dict[str, Any]]:
    """Document issues as StatusIssue JSON (Kubernetes casing), in document order, at most ``limit``."""
    return [_status_issue(issue).model_dump(mode="json", by_alias=True) for issue in _kept(issues, limit)]


def _kept(issues: Iterable[Issue], limit: int) -> list[Issue]:
    """At most ``limit`` issues in their order; when there are more, the blocking ones are kept first."""
    listed = list(issues)
    if len(listed) <= limit:
        return listed
    kept = sorted(sorted(range(len(listed)), key=lambda i: not listed[i].blocking)[:limit])
    return [listed[i] for i in kept]


def _status_issue(issue: Issue) -> StatusIssue:
    return StatusIssue(
        severity="Blocking" if issue.blocking else "Warning",
        code=str(issue.code),
        path=issue.path,
        entity=issue.entity,
        line=issue.line,
        message=issue.message,
    )
