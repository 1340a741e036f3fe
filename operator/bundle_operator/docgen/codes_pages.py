"""reference/issue-codes.md and reference/conditions.md: every issue code and condition reason,
with what it means and what to do (from remedies.py)."""

from __future__ import annotations

from bundle_operator.docgen import PageSet
from bundle_operator.docgen._cells import cell, code
from bundle_operator.docgen.remedies import CONDITION_TYPES, ISSUES, REASONS, ReasonRemedy, State
from bundle_operator.document.issues import Code

_STATES: tuple[tuple[State, str, str], ...] = (
    ("ready", "Ready", "Ready is True: the resource is what its spec asks for."),
    (
        "held",
        "Held on purpose",
        "Ready, Reconciling and Stalled are False (or Ready True when nothing would be written): the "
        "operator writes nothing until someone lets it.",
    ),
    ("progressing", "Reconciling", "Reconciling is True: the operator retries or goes on by itself."),
    ("stalled", "Stalled", "Stalled is True: nothing changes until someone acts."),
    (
        "not running",
        "Installed, not running",
        "Ready is False while the platform cannot run part of the bundle.",
    ),
    (
        "condition",
        "Reasons of the other conditions",
        "The reasons of Analyzed, Installed, Conflict, Activated, Drifted and Degraded.",
    ),
)


def code_anchor(issue: Code) -> str:
    """The stable anchor of an issue code: ``code-invalid_artifact``."""
    return f"code-{issue.value}"


def reason_anchor(reason: ReasonRemedy) -> str:
    """The stable anchor of a reason of a condition: ``stalled-blocked``."""
    return f"{reason.condition.lower()}-{reason.reason.lower()}"


def pages() -> PageSet:
    """The issue-codes and conditions reference pages."""
    return {"reference/issue-codes.md": issue_codes(), "reference/conditions.md": conditions()}


def issue_codes() -> str:
    """issue-codes.md."""
    lines = [
        "# Issue codes",
        "",
        "<!-- Generated from bundle_operator/document/issues.py (the codes) and "
        "bundle_operator/docgen/remedies.py (the text) by `make docs-reference`; do not edit. -->",
        "",
        "Analyze and plan report what they find as issues, each with a stable code that scripts can "
        "match on, a severity, a JSON Pointer into the document and a message. You see them in "
        "`bundlectl analyze` and `bundlectl plan` (`-o json` gives `code`, `severity`, `path`, "
        "`entity`, `line` and `message`), in a Bundle's `status.issues`, in a BundleInstallation's "
        "`status.preview.issues`, and in the validating webhook's refusal of a Bundle.",
        "",
        "A **blocking** issue stops an install: `bundlectl` exits 1, a Bundle is Stalled with reason "
        "[InvalidDocument](conditions.md#stalled-invaliddocument), a BundleInstallation with reason "
        "[Blocked](conditions.md#stalled-blocked). A **warning** is reported and never stops one.",
        "",
        "| code | severity | what it means | what to do |",
        "|---|---|---|---|",
    ]
    for issue in Code:
        remedy = ISSUES[issue]
        label = f'<span id="{code_anchor(issue)}"></span>{code(issue.value)}'
        lines.append(f"| {label} | {remedy.severity} | {cell(remedy.means)} | {cell(remedy.do)} |")
    return "\n".join(lines) + "\n"


def conditions() -> str:
    """conditions.md."""
    lines = [
        "# Conditions and reasons",
        "",
        "<!-- Generated from bundle_operator/docgen/remedies.py, whose reasons a test checks against "
        "the reconcilers, by `make docs-reference`; do not edit. -->",
        "",
        "Every resource reports kstatus "
        "conditions in `status.conditions`: Ready, Reconciling and Stalled, always written together "
        "with one reason, so tools such as Argo CD, Flux and `kubectl wait --for=condition=Ready` "
        "can tell done from in progress from stuck. A BundleInstallation and an Endpoint add "
        "conditions of their own. `lastTransitionTime` moves only when a condition's status "
        "changes; `observedGeneration` says which spec it describes. The message says what is "
        "wrong and usually what to change.",
        "",
        "## Condition types",
        "",
        "| type | on | meaning |",
        "|---|---|---|",
    ]
    for kind in CONDITION_TYPES:
        lines.append(f"| {code(kind.type)} | {', '.join(kind.kinds)} | {cell(kind.means)} |")
    for state, title, intro in _STATES:
        lines += ["", f"## {title}", "", intro, ""]
        lines += ["| reason | condition | on | what it means | what to do |", "|---|---|---|---|---|"]
        for reason in (r for r in REASONS if r.state == state):
            label = f'<span id="{reason_anchor(reason)}"></span>{code(reason.reason)}'
            lines.append(
                f"| {label} | {reason.condition} | {', '.join(reason.kinds)} | {cell(reason.means)} | "
                f"{cell(reason.do)} |"
            )
    return "\n".join(lines) + "\n"
