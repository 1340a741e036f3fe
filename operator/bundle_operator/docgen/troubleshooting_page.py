"""troubleshooting.md: how to see what is wrong (troubleshooting_head.md, by hand), then every reason a
resource can be stuck with and every issue code, made from remedies.py so none is left out."""

from __future__ import annotations

from pathlib import Path

from bundle_operator.docgen import PageSet
from bundle_operator.docgen._cells import cell
from bundle_operator.docgen.codes_pages import code_anchor, reason_anchor
from bundle_operator.docgen.remedies import ISSUES, REASONS, ReasonRemedy, State
from bundle_operator.document.issues import Code

# The hand-written first part: Markdown with shell blocks is easier to read and edit as a file.
HEAD = Path(__file__).with_name("troubleshooting_head.md")

_GROUPS: tuple[tuple[str, tuple[State, ...], str], ...] = (
    (
        "Stalled",
        ("stalled",),
        "READY is False and Stalled is True with this reason: nothing changes until you act.",
    ),
    (
        "Held on purpose",
        ("held",),
        "READY shows this reason (False while something waits to be written); Stalled is False.",
    ),
    (
        "Retried, or waiting for something else",
        ("progressing",),
        "READY is False and Reconciling is True with this reason: the operator goes on by itself. "
        "Act when it lasts.",
    ),
    (
        "Installed, but not running",
        ("not running",),
        "READY is False with this reason while the entities are installed.",
    ),
)

# Of the other conditions' reasons, the ones that say something is wrong.
_TROUBLE_CONDITIONS = {
    ("Degraded", "MemberUnavailable"),
    ("Drifted", "DriftDetected"),
    ("Conflict", "UpdateConflict"),
}


def troubled(reason: ReasonRemedy) -> bool:
    """Whether ``reason`` says something is wrong or waits, and so has a section on the page."""
    return reason.state != "ready" and (
        reason.state != "condition" or (reason.condition, reason.reason) in _TROUBLE_CONDITIONS
    )


def pages() -> PageSet:
    """The troubleshooting page."""
    return {"troubleshooting.md": render()}


def render() -> str:
    """The page's Markdown."""
    lines = [
        HEAD.read_text(encoding="utf-8").rstrip("\n"),
        "",
        "## Stalled, held and failing resources",
        "",
        "Each reason below links to its row in [Conditions and reasons](reference/conditions.md).",
    ]
    for title, states, seen in _GROUPS:
        lines += ["", f"### {title}", "", seen]
        for reason in (r for r in REASONS if r.state in states):
            lines += _reason(reason)
    lines += ["", "### Other conditions", "", "These conditions say what is wrong beside Ready."]
    for reason in (r for r in REASONS if r.state == "condition" and troubled(r)):
        lines += _reason(reason)
    lines += ["", *_codes()]
    return "\n".join(lines) + "\n"


def _reason(reason: ReasonRemedy) -> list[str]:
    link = f"reference/conditions.md#{reason_anchor(reason)}"
    return [
        "",
        f"#### {reason.reason} ({reason.condition}) {{#{reason_anchor(reason)}}}",
        "",
        f"On {', '.join(reason.kinds)}. {reason.means}",
        "",
        f"**What to do:** {reason.do} ([reference]({link}))",
    ]


def _codes() -> list[str]:
    lines = [
        "## Issue codes",
        "",
        "Analyze reports problems of a document, and plan problems against the platform, as issues "
        "with a code. You see them in `bundlectl analyze` and `bundlectl plan` (see above), in a "
        "Bundle's `status.issues` (its Stalled reason is InvalidDocument) and in a "
        "BundleInstallation's `status.preview.issues` (Stalled with Blocked). Blocking ones stop an "
        "install; warnings do not. Each code links to its row in [Issue codes](reference/issue-codes.md).",
    ]
    for severity, title in (("blocking", "Blocking"), ("warning", "Warnings")):
        lines += ["", f"### {title}", "", "| code | what to do |", "|---|---|"]
        for issue in Code:
            remedy = ISSUES[issue]
            if severity in remedy.severity:
                link = f"[`{issue.value}`](reference/issue-codes.md#{code_anchor(issue)})"
                lines.append(f"| {link} | {cell(remedy.do)} |")
    return lines
