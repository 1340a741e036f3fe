"""Analyze without a platform: what an install would create or skip, and what blocks it."""

from __future__ import annotations

from collections.abc import Mapping

from bundle_operator.document import credential_rules, mcp_rules, setup
from bundle_operator.document.gateway_rules import GATEWAY_ENTITY
from bundle_operator.document.issues import Code, Issue, blocking, shown, warning
from bundle_operator.document.keys import keyed_entities
from bundle_operator.document.models import Bundle, Requirement
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.kinds import ALL
from bundle_operator.engine.preview import BundleSummary, EntityPlan, Preview


def analyze_offline(
    parsed: ParsedBundle,
    supplied_setup: Mapping[str, object] | None = None,
    substitutions: Mapping[str, str] | None = None,
) -> Preview:
    """Preview an install of a parsed bundle with the given setup values and requirement
    substitutions (``kind:ref`` -> value); writes nothing."""
    return analyze_with_values(parsed, supplied_setup, substitutions)[0]


def analyze_with_values(
    parsed: ParsedBundle,
    supplied_setup: Mapping[str, object] | None = None,
    substitutions: Mapping[str, str] | None = None,
) -> tuple[Preview, dict[str, str]]:
    """The offline preview and the setup values as resolved for it (defaults filled in)."""
    bundle = parsed.bundle
    if bundle is None or parsed.digest is None:
        return Preview(None, [], list(parsed.issues)), {}
    resolved = setup.resolve(bundle, supplied_setup or {})
    issues: list[Issue] = [*parsed.issues, *_placed(resolved.issues, parsed)]
    issues += _placed(mcp_rules.check_context_secret_values(bundle, resolved.values), parsed)
    issues += _placed(mcp_rules.check_endpoint_values(bundle, resolved.values), parsed)
    issues += _placed(credential_rules.check_credential_values(bundle, resolved.values), parsed)
    issues += _placed(mcp_rules.check_channel_token_values(bundle, resolved.values), parsed)
    issues += _placed(requirement_issues(bundle, substitutions or {}), parsed)
    entities, dependency_issues = plan_entities(bundle, parsed.skipped)
    summary = BundleSummary(bundle.name, bundle.version, parsed.digest)
    return Preview(summary, entities, issues + dependency_issues), resolved.values


def requirement_key(requirement: Requirement) -> str:
    """How a substitution names a requirement: ``kind:ref``."""
    return f"{requirement.kind}:{requirement.ref}"


def requirement_issues(bundle: Bundle, substitutions: Mapping[str, str]) -> list[Issue]:
    """What can be told about the requirements without a platform.

    A ``substitute`` requirement without a mapping blocks (only the installer can name the local
    equivalent, platform or not); a knowledge source mapping must keep the source's type and name
    an address; a substitution that maps no requirement of the bundle is reported, never silently
    taken. Whether the platform has what ``block`` and ``strip`` requirements and the mapped
    models and tools name is checked only against a platform.
    """
    issues: list[Issue] = []
    named = {requirement_key(r) for r in bundle.requires}
    for index, requirement in enumerate(bundle.requires):
        ref = requirement_key(requirement)
        pointer = f"/requires/{index}"
        mapped = substitutions.get(ref)
        if mapped is None and requirement.policy == "substitute":
            issues.append(
                blocking(
                    Code.SUBSTITUTION_REQUIRED,
                    f"requirement {shown(ref)} must be substituted: give a substitution for '{shown(ref)}' "
                    f"(--substitute {shown(ref)}=VALUE, or spec.substitutions)",
                    pointer,
                )
            )
            continue
        if mapped is not None and requirement.kind == "knowledge_source":
            problem = _knowledge_source_mapping_problem(requirement.ref, mapped)
            if problem is not None:
                message = f"the substitution for {shown(ref)} {problem}"
                issues.append(blocking(Code.SUBSTITUTION_INVALID, message, pointer))
            continue
        what = "its substitute is" if mapped is not None else "it is"
        issues.append(
            warning(
                Code.REQUIREMENT_NOT_CHECKED,
                f"requirement {requirement.kind} '{shown(requirement.ref)}' ({requirement.policy}): "
                f"{what} checked only against a platform",
                pointer,
            )
        )
    for ref in substitutions:
        if ref not in named:
            issues.append(
                warning(
                    Code.SUBSTITUTION_UNUSED,
                    f"the substitution for '{shown(ref)}' maps no requirement of the bundle; it has no "
                    "effect (a substitution names a requirement as kind:ref)",
                    entity=f"substitution:{shown(ref)}",
                )
            )
    return issues


def _knowledge_source_mapping_problem(ref: str, mapped: str) -> str | None:
    # Only the shape is checked (seed 004): the same source type, and an address. Whether the
    # bucket or host is reachable is answered by the first sync, not here.
    kind, sep, _ = ref.partition(":")
    new_kind, new_sep, new_address = mapped.partition(":")
    if not sep or not new_sep or not new_address.strip():
        return "must be <type>:<address> with an address"
    if new_kind != kind:
        return f"must keep the source type '{shown(kind)}'"
    return None


def plan_entities(bundle: Bundle, skipped: Mapping[str, str]) -> tuple[list[EntityPlan], list[Issue]]:
    """CREATE every entity in install order, except those skipped and those that depend on them."""
    reasons: dict[str, str] = dict(skipped)
    issues: list[Issue] = []
    users = [
        (kind.name, item.key, item.mcps)
        for kind in ALL
        if kind.uses_mcps
        for item in getattr(bundle, kind.section)
    ]
    for kind_name, key, mcps in users:
        for mcp in mcps:
            if f"mcp:{mcp}" in reasons:
                issues.append(
                    warning(
                        Code.DEPENDENCY_SKIPPED,
                        f"{kind_name} '{key}' is created without MCP '{mcp}', which is skipped",
                        entity=f"{kind_name}:{key}",
                    )
                )
    for kind in ALL:
        for item in getattr(bundle, kind.section) if kind.runs_agent else ():
            if f"agent:{item.agent}" in reasons:
                reasons[f"{kind.name}:{item.key}"] = f"its agent '{item.agent}' is not created"
    plans = [
        EntityPlan(item.kind, item.key, "SKIPPED", reasons[item.entity])
        if item.entity in reasons
        else EntityPlan(item.kind, item.key, "CREATE")
        for item in keyed_entities(bundle)
    ]
    if bundle.gateway is not None:
        for member in bundle.gateway.members:
            if f"mcp:{member}" in reasons:
                issues.append(
                    warning(
                        Code.DEPENDENCY_SKIPPED,
                        f"the gateway is created without member '{member}', which is skipped",
                        entity=GATEWAY_ENTITY,
                    )
                )
        plans.append(EntityPlan("gateway", "gateway", "CREATE"))
    return plans, issues


def _placed(issues: list[Issue], parsed: ParsedBundle) -> list[Issue]:
    return [issue.with_line(parsed.source_map.line_of(issue.path)) for issue in issues]
