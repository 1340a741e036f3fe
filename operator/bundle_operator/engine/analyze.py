"""Analyze without a platform: what an install would create or skip, and what blocks it."""

from __future__ import annotations

from collections.abc import Mapping

from bundle_operator.document import mcp_rules, setup
from bundle_operator.document.gateway_rules import GATEWAY_ENTITY
from bundle_operator.document.issues import Code, Issue, warning
from bundle_operator.document.keys import keyed_entities
from bundle_operator.document.models import Bundle
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.preview import BundleSummary, EntityPlan, Preview


def analyze_offline(parsed: ParsedBundle, supplied_setup: Mapping[str, object] | None = None) -> Preview:
    """Preview an install of a parsed bundle with the given setup values; writes nothing."""
    return analyze_with_values(parsed, supplied_setup)[0]


def analyze_with_values(
    parsed: ParsedBundle, supplied_setup: Mapping[str, object] | None = None
) -> tuple[Preview, dict[str, str]]:
    """The offline preview and the setup values as resolved for it (defaults filled in)."""
    bundle = parsed.bundle
    if bundle is None or parsed.digest is None:
        return Preview(None, [], list(parsed.issues)), {}
    resolved = setup.resolve(bundle, supplied_setup or {})
    issues: list[Issue] = [*parsed.issues, *_placed(resolved.issues, parsed)]
    issues += _placed(mcp_rules.check_context_secret_values(bundle, resolved.values), parsed)
    issues += _placed(mcp_rules.check_endpoint_values(bundle, resolved.values), parsed)
    issues += _placed(mcp_rules.check_channel_token_values(bundle, resolved.values), parsed)
    for requirement_index, requirement in enumerate(bundle.requires):
        issues.append(
            warning(
                Code.REQUIREMENT_NOT_CHECKED,
                f"requirement {requirement.kind} '{requirement.ref}' ({requirement.policy}) is checked "
                "only against a platform",
                f"/requires/{requirement_index}",
            ).with_line(parsed.source_map.line_of(f"/requires/{requirement_index}"))
        )
    entities, dependency_issues = plan_entities(bundle, parsed.skipped)
    summary = BundleSummary(bundle.name, bundle.version, parsed.digest)
    return Preview(summary, entities, issues + dependency_issues), resolved.values


def plan_entities(bundle: Bundle, skipped: Mapping[str, str]) -> tuple[list[EntityPlan], list[Issue]]:
    """CREATE every entity in install order, except those skipped and those that depend on them."""
    reasons: dict[str, str] = dict(skipped)
    issues: list[Issue] = []
    for agent in bundle.agents:
        for mcp in agent.mcps:
            if f"mcp:{mcp}" in reasons:
                issues.append(
                    warning(
                        Code.DEPENDENCY_SKIPPED,
                        f"agent '{agent.key}' is created without MCP '{mcp}', which is skipped",
                        entity=f"agent:{agent.key}",
                    )
                )
    for section, kind in (("channels", "channel"), ("automations", "automation"), ("policies", "policy")):
        for item in getattr(bundle, section):
            if f"agent:{item.agent}" in reasons:
                reasons[f"{kind}:{item.key}"] = f"its agent '{item.agent}' is not created"
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
