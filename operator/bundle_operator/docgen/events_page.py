"""reference/events.md: every Kubernetes Event reason the operator posts, from k8s/event_reasons.py."""

from __future__ import annotations

from bundle_operator.docgen import PageSet
from bundle_operator.docgen._cells import cell, code
from bundle_operator.k8s.event_reasons import ALL, EventReason

KINDS = ("BundleInstallation", "Endpoint", "Bundle")


def anchor(event: EventReason) -> str:
    """The stable anchor of a reason on a kind: ``endpoint-created``."""
    return f"{event.kind.lower()}-{event.reason.lower()}"


def pages() -> PageSet:
    """The events reference page."""
    return {"reference/events.md": render(ALL)}


def render(events: tuple[EventReason, ...]) -> str:
    """The page's Markdown."""
    lines = [
        "# Events",
        "",
        "<!-- Generated from bundle_operator/k8s/event_reasons.py by `make docs-reference`; do not edit. -->",
        "",
        "The operator posts Kubernetes Events on the object they are about, with the source component "
        "`bundle-operator`. `kubectl describe` shows an object's recent Events; `kubectl get events "
        "--field-selector involvedObject.name=NAME` lists them. Events expire (an hour by default on "
        "the API server), so the status conditions ([Conditions and reasons](conditions.md)) are "
        "the lasting record; an Event says what happened and when. A failure to post an Event is "
        "logged and never fails a reconcile.",
    ]
    for kind in KINDS:
        lines += ["", f"## {kind}", "", "| reason | type | when |", "|---|---|---|"]
        for event in sorted((e for e in events if e.kind == kind), key=lambda e: e.reason):
            label = f'<span id="{anchor(event)}"></span>{code(event.reason)}'
            lines.append(f"| {label} | {event.type} | {cell(event.when)} |")
    return "\n".join(lines) + "\n"
