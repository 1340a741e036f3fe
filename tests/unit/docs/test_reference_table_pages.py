"""The reference pages made from the code's tables miss nothing: each test gathers what the code
has (issue codes, condition reasons, Event reasons, metrics, bundlectl commands and flags) on its
own, from the source or the running collectors, and names what a page or remedies.py lacks."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

import bundle_operator
from bundle_operator.cli import build_parser
from bundle_operator.docgen.remedies import CONDITION_TYPES, ISSUES, REASONS
from bundle_operator.document.issues import Code
from bundle_operator.k8s.event_reasons import ALL as EVENT_REASONS
from bundle_operator.k8s.process.metrics import Metrics
from bundle_operator.reference_platform.gateway_metrics import GatewayMetrics

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
PACKAGE = Path(bundle_operator.__file__).parent


def page(path: str) -> str:
    return (DOCS / path).read_text(encoding="utf-8")


def modules(*parts: str) -> Iterator[tuple[Path, ast.Module]]:
    for part in parts:
        for path in sorted((PACKAGE / part).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def callee(call: ast.Call) -> str:
    if isinstance(call.func, ast.Name):
        return call.func.id
    return call.func.attr if isinstance(call.func, ast.Attribute) else ""


def strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


# --- issue codes ------------------------------------------------------------------------------


def used_codes() -> dict[str, set[str]]:
    """Each ``Code.X`` the package uses, with the severities of the calls that make it an issue."""
    found: dict[str, set[str]] = {}
    for _, tree in modules("."):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Code"
            ):
                found.setdefault(node.attr, set())
            if not isinstance(node, ast.Call):
                continue
            for arg in node.args:
                if (
                    isinstance(arg, ast.Attribute)
                    and isinstance(arg.value, ast.Name)
                    and arg.value.id == "Code"
                ):
                    name = callee(node)
                    if name in {"blocking", "blocking_for"}:
                        found[arg.attr].add("blocking")
                    elif name == "warning":
                        found[arg.attr].add("warning")
                    elif name == "Issue" and isinstance(node.args[0], ast.Constant):
                        found[arg.attr].add(str(node.args[0].value))
    return found


def test_every_issue_code_has_a_remedy_and_an_anchor() -> None:
    text = page("reference/issue-codes.md")
    lacking = [c.value for c in Code if c not in ISSUES]
    assert not lacking, f"docgen/remedies.py ISSUES has no entry for: {lacking}"
    unlisted = [c.value for c in Code if f'id="code-{c.value}"' not in text]
    assert not unlisted, f"docs/reference/issue-codes.md has no entry for: {unlisted}"


def test_every_code_the_package_uses_is_a_code_and_its_severity_is_documented() -> None:
    used = used_codes()
    unknown = sorted(name for name in set(used) - {c.name for c in Code} if not name.startswith("_"))
    assert not unknown, f"Code members used but not defined: {unknown}"
    wrong = [
        f"{name.lower()}: made {severity}, documented {ISSUES[Code[name]].severity}"
        for name, severities in used.items()
        if not name.startswith("_")
        for severity in severities
        if severity not in ISSUES[Code[name]].severity
    ]
    assert not wrong, "remedies.py gives a code another severity than the code makes it:\n" + "\n".join(wrong)


# --- condition types and reasons -------------------------------------------------------------

# The reason is the first argument of these, the second of the condition makers (type first).
_REASON_FIRST = {
    "stalled",
    "progressing",
    "ready",
    "not_running",
    "Failing",
    "SourceError",
    "RegistryError",
    "SetupProblem",
    "Waiting",
    "KeyMissing",
    "NotInstallable",
}
_CONDITION = {"true", "false", "Cond"}


def condition_reasons() -> tuple[set[str], set[str]]:
    """The condition types and every reason a condition can carry, gathered from the source."""
    types = {"Ready", "Reconciling", "Stalled"}
    reasons: set[str] = set()
    object_kinds: set[str] = set()
    for _, tree in modules("k8s", "sources", "registry"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = callee(node)
                index = 0 if name in _REASON_FIRST else 1 if name in _CONDITION else None
                if index is not None and len(node.args) > index:
                    arg = node.args[index]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        reasons.add(arg.value)
                    if index == 1 and isinstance(node.args[0], ast.Constant):
                        types.add(str(node.args[0].value))
                if name == "missing" and node.args and isinstance(node.args[0], ast.Constant):
                    object_kinds.add(str(node.args[0].value))  # KeyMissing(f"{kind}NotFound")
                reasons |= {s for k in node.keywords if k.arg == "too_large" for s in strings(k.value)}
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id in {"reason", "hold"} for t in node.targets):
                    reasons |= strings(node.value)
            elif isinstance(node, ast.FunctionDef) and node.name.endswith("reason"):
                for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return)):
                    if isinstance(ret.value, ast.Tuple) and isinstance(ret.value.elts[0], ast.Constant):
                        reasons.add(str(ret.value.elts[0].value))
    for kind in object_kinds:
        reasons |= {f"{kind}NotFound", f"{kind}KeyNotFound"}
    # A function parameter's default (downloads' too_large="FetchFailed") is a reason too.
    for _, tree in modules("sources"):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                names = [a.arg for a in node.args.args + node.args.kwonlyargs]
                defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
                if "too_large" in names:
                    reasons |= {s for d in defaults for s in strings(d)}
    return types, reasons - {"True", "False", "Unknown"}


def test_the_reason_gathering_finds_reasons_made_every_way() -> None:
    _, reasons = condition_reasons()
    # A literal argument, a Failing subclass, an assignment, a returned tuple, an f-string per kind.
    assert {"InvalidSpec", "NoGateway", "Serving", "InstalledWithDrift", "ConfigMapKeyNotFound"} <= reasons


def test_every_condition_reason_has_a_remedy_and_an_anchor() -> None:
    types, reasons = condition_reasons()
    text = page("reference/conditions.md")
    documented = {r.reason for r in REASONS}
    lacking = sorted(reasons - documented)
    assert not lacking, f"docgen/remedies.py REASONS has no entry for: {lacking}"
    stale = sorted(documented - reasons)
    assert not stale, f"docgen/remedies.py documents reasons the code never writes: {stale}"
    missing_types = sorted(types - {t.type for t in CONDITION_TYPES})
    assert not missing_types, f"docgen/remedies.py CONDITION_TYPES lacks: {missing_types}"
    unlisted = [r.reason for r in REASONS if f'id="{r.condition.lower()}-{r.reason.lower()}"' not in text]
    assert not unlisted, f"docs/reference/conditions.md has no entry for: {unlisted}"


def test_reason_anchors_are_unique() -> None:
    anchors = [f"{r.condition}-{r.reason}".lower() for r in REASONS]
    assert len(anchors) == len(set(anchors)), "two reasons of one condition share an anchor"


# --- events ----------------------------------------------------------------------------------


def test_events_are_posted_only_with_reasons_of_the_table() -> None:
    inline = []
    for path, tree in modules("k8s"):
        for node in ast.walk(tree):
            posts = (
                isinstance(node, ast.Call) and callee(node) == "post" and "events" in ast.unparse(node.func)
            )
            if posts and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[1:2]
            ):
                inline.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not inline, f"an Event reason spelled inline instead of from k8s/event_reasons.py: {inline}"


def test_event_reasons_are_made_only_in_the_table() -> None:
    elsewhere = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path, tree in modules(".")
        if path.name != "event_reasons.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and callee(node) == "EventReason"
    ]
    assert not elsewhere, f"an EventReason made outside k8s/event_reasons.py (so not in ALL): {elsewhere}"


def test_every_event_reason_is_on_the_events_page() -> None:
    text = page("reference/events.md")
    unlisted = [e.reason for e in EVENT_REASONS if f'id="{e.kind.lower()}-{e.reason.lower()}"' not in text]
    assert not unlisted, f"docs/reference/events.md has no entry for: {unlisted}"
    assert {e.reason for e in EVENT_REASONS} >= {
        "PlanReady",
        "DriftDetected",
        "KeyIssued",
        "RegistryVersionChanged",
    }


# --- metrics ---------------------------------------------------------------------------------


def scraped(registry: CollectorRegistry) -> dict[str, str]:
    """Metric family -> type, as a Prometheus scrape of ``registry`` says."""
    found = {}
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            found[name] = kind
    return found


def test_every_metric_a_scrape_shows_is_on_the_metrics_page_with_its_type() -> None:
    text = page("reference/metrics.md")
    metrics = scraped(Metrics(CollectorRegistry()).registry) | scraped(GatewayMetrics().registry)
    assert len(metrics) >= 10
    for name, kind in metrics.items():
        # The text format's TYPE line names a counter with its _total already.
        series = f"{name}_bucket" if kind == "histogram" else name
        row = next((line for line in text.splitlines() if f"`{series}`" in line), None)
        assert row is not None, f"docs/reference/metrics.md has no row for {name}"
        # A _created series is a gauge of its counter's or histogram's row.
        assert name.endswith("_created") or f"| {kind} |" in row, (
            f"docs/reference/metrics.md gives {name} another type than {kind}"
        )


def test_the_platform_load_metrics_are_on_the_page() -> None:
    # They are made at scrape time from the platforms' gates, so a scrape without platforms has none.
    text = page("reference/metrics.md")
    for name in ("platform_calls_in_flight", "platform_calls_waiting", "platform_paused"):
        assert f"`bundle_operator_{name}`" in text
    assert "`bundle_operator_platform_shared_lists_total`" in text


def test_every_label_of_every_metric_is_on_its_row() -> None:
    text = page("reference/metrics.md")
    collectors = [*vars(Metrics(CollectorRegistry())).values(), *vars(GatewayMetrics()).values()]
    for collector in collectors:
        labels = getattr(collector, "_labelnames", None)
        if labels is None:
            continue
        row = next(line for line in text.splitlines() if f"`{collector._name}" in line)
        for label in labels:
            assert f"`{label}`" in row, f"{collector._name}: label {label} is not on its row"


# --- bundlectl -------------------------------------------------------------------------------


def commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield f"{path} {name}", child
                yield from commands(child, f"{path} {name}")


def sections(text: str) -> dict[str, str]:
    """Anchor -> the text of that command's section of cli.md."""
    parts = re.split(r"^## .*\{#([a-z0-9-]+)\}$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_command_and_flag_is_in_its_section_of_the_cli_page() -> None:
    found = sections(page("reference/cli.md"))
    for path, parser in commands(build_parser(), "bundlectl"):
        anchor = path.replace(" ", "-")
        assert anchor in found, f"docs/reference/cli.md has no section #{anchor}"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            names = action.option_strings or [str(action.metavar or action.dest)]
            for name in names:
                assert f"`{name}" in found[anchor] or f", {name}" in found[anchor], (
                    f"#{anchor} does not show {name}"
                )
            if action.help and action.help != argparse.SUPPRESS:
                shown = action.help.replace("%(default)s", str(action.default))
                assert " ".join(shown.split()).replace("|", "\\|") in found[anchor], (
                    f"#{anchor} does not show the help of {names[0]}"
                )


def test_the_cli_page_names_every_exit_code() -> None:
    from bundle_operator.commands import exit_codes

    text = page("reference/cli.md")
    for name, value in vars(exit_codes).items():
        if name.startswith("EXIT_"):
            assert f"`{name}`" in text and f"| {value} |" in text


# --- troubleshooting -------------------------------------------------------------------------


def test_troubleshooting_has_a_section_for_every_troubled_reason_and_a_link_for_every_code() -> None:
    text = page("troubleshooting.md")
    troubled = [r for r in REASONS if r.state not in {"ready", "condition"}]
    troubled += [r for r in REASONS if (r.condition, r.reason) == ("Degraded", "MemberUnavailable")]
    lacking = [
        f"{r.condition}/{r.reason}"
        for r in troubled
        if f"{{#{r.condition.lower()}-{r.reason.lower()}}}" not in text
    ]
    assert not lacking, f"docs/troubleshooting.md has no section for: {lacking}"
    unlinked = [c.value for c in Code if f"(reference/issue-codes.md#code-{c.value})" not in text]
    assert not unlinked, f"docs/troubleshooting.md does not link: {unlinked}"
