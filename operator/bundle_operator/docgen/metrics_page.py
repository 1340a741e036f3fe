"""reference/metrics.md: every Prometheus metric of the operator and of the reference platform."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

import bundle_operator
from bundle_operator.docgen import PageSet
from bundle_operator.docgen._cells import cell, code
from bundle_operator.k8s.process.metrics import Metrics, OptionalGauge, PlatformLoad

if TYPE_CHECKING:
    from bundle_operator.k8s.platforms import PlatformPool

# The reference platform is a separate program the operator's code never loads (see
# docs/architecture.md), so its collectors are read from their source rather than imported.
GATEWAY_METRICS = Path(bundle_operator.__file__).parent / "reference_platform" / "gateway_metrics.py"
_MAKERS = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary"}


@dataclass(frozen=True)
class MetricDoc:
    """One metric as a scrape shows it: its family name, type, labels and help."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str
    # prometheus_client's own counters and histograms also show when each series began.
    created: bool = True

    def series(self) -> list[str]:
        """The sample names a scrape shows for this family."""
        created = [f"{self.name}_created"] if self.created else []
        if self.type == "counter":
            return [f"{self.name}_total", *created]
        if self.type == "histogram":
            return [f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count", *created]
        return [self.name]


def operator_metrics() -> list[MetricDoc]:
    """The operator's metrics: the ``Metrics`` collectors and the platforms' load, read at scrape."""
    metrics = Metrics(CollectorRegistry())
    found = [
        MetricDoc(c._name, str(c._type), tuple(c._labelnames), c._documentation)
        for c in vars(metrics).values()
        if isinstance(c, MetricWrapperBase)
    ]
    found += [
        MetricDoc(c.name, "gauge", (), c.documentation, created=False)
        for c in vars(metrics).values()
        if isinstance(c, OptionalGauge)
    ]
    empty = cast("PlatformPool", SimpleNamespace(gates={}, shared={}))
    for family in PlatformLoad(empty).collect():
        labels = sorted({k for s in family.samples for k in s.labels})
        found.append(MetricDoc(family.name, family.type, tuple(labels), family.documentation, created=False))
    return sorted(found, key=lambda m: m.name)


def platform_metrics(source: Path = GATEWAY_METRICS) -> list[MetricDoc]:
    """The reference platform's metrics: each collector made in ``source`` with literal arguments."""
    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _MAKERS):
            continue
        name, help_, labels = (ast.literal_eval(arg) for arg in node.args[:3])
        # prometheus_client drops a counter's _total from the family name and adds it to the sample.
        if node.func.id == "Counter" and name.endswith("_total"):
            name = name[: -len("_total")]
        found.append(MetricDoc(name, _MAKERS[node.func.id], tuple(labels), help_))
    return sorted(found, key=lambda m: m.name)


def pages() -> PageSet:
    """The metrics reference page."""
    return {"reference/metrics.md": render(operator_metrics(), platform_metrics())}


def render(operator: list[MetricDoc], platform: list[MetricDoc]) -> str:
    """The page's Markdown."""
    lines = [
        "# Metrics",
        "",
        "<!-- Generated from the collectors (bundle_operator/k8s/process/metrics.py and the reference "
        "platform's gateway_metrics.py) by `make docs-reference`; do not edit. -->",
        "",
        "## The operator",
        "",
        "The operator serves these at `GET /metrics` on its metrics port (`bundlectl operator run "
        "--metrics-port`, see [bundlectl operator run](cli.md#bundlectl-operator-run)). Platform calls "
        "are labelled with the route template (`/v1/workspaces/{ws}/agents/{id}`), never the concrete "
        "path, so ids and workspace names never become series. Each attempt of a retried call counts "
        "once. A `_created` series beside a counter or histogram holds the Unix time its series began.",
        "",
        *_table(operator),
        "",
        "## The reference platform",
        "",
        "The reference platform (`bundlectl platform serve`) serves these at `GET /metrics` on its "
        "own listener. Labels are bounded by what the platform stores: a call of a tool the bundle "
        "does not have counts under the tool `(unknown)`.",
        "",
        *_table(platform),
    ]
    return "\n".join(lines) + "\n"


def _table(metrics: list[MetricDoc]) -> list[str]:
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for m in metrics:
        series = "<br>".join(code(s) for s in m.series())
        labels = ", ".join(code(label) for label in m.labels)
        rows.append(f"| {series} | {m.type} | {labels} | {cell(m.help)} |")
    return rows
