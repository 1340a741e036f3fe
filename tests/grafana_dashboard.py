"""The chart's Grafana dashboard as a user gets it, and the checks on its queries.

render(values, home)              the documents `helm template` renders with `values`
rendered_dashboard(values, home)  the dashboard ConfigMap of those, and its dashboard JSON
queries(dashboard)                every PromQL the dashboard runs: panel targets and variable queries
concrete(expr)                    the expression with Grafana's variables replaced by values
promtool_verdicts(exprs)          promtool's parse error of each expression ("" when it parses)
metric_names(expr)                the metric names an expression selects
exported_names(text)              the names a /metrics text exposes (families without series too)
unknown_names(dashboard, names)   the metric names the dashboard selects that `names` lacks
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.gitops.tools import helm_binary, promtool_binary

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "bundle-operator"
DATA_KEY = "bundle-operator.json"

# Concrete stand-ins for Grafana's variables; every other variable is a regex matcher's value.
_BUILT_IN = {"__rate_interval": "2m", "__interval": "30s", "__range": "1h", "__range_s": "3600"}
_ANY = ".*"

# Words that are PromQL syntax, not metric names, where a name could stand; the aggregation
# operators are keywords too (`sum by (le) (...)` puts no "(" right after `sum`).
_AGGREGATIONS = frozenset(
    {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk"}
    | {"quantile", "limitk", "limit_ratio"}
)
_KEYWORDS = frozenset({"and", "or", "unless", "atan2", "bool", "offset", "inf", "nan"}) | _AGGREGATIONS
# Keywords followed by a parenthesised list of label names, not an expression.
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_CLOSING = {"{": "}", "[": "]"}
_QUOTES = frozenset("\"'`")


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard and where it is (a panel's title or a variable)."""

    where: str
    expr: str


def render(values: dict[str, Any], home: Path) -> list[dict[str, Any]]:
    """The documents `helm template` renders from the chart with `values` (release bo in ops)."""
    values_file = home / "dashboard-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    rendered = subprocess.run(
        [str(helm_binary()), "template", "bo", str(CHART), "-n", "ops", "-f", str(values_file)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home)},
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def dashboard_config_maps(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ConfigMaps among `docs` that hold the dashboard."""
    return [doc for doc in docs if doc["kind"] == "ConfigMap" and DATA_KEY in doc.get("data", {})]


def rendered_dashboard(values: dict[str, Any], home: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one dashboard ConfigMap of `helm template` with `values`, and the dashboard it holds."""
    [config_map] = dashboard_config_maps(render(values, home))
    dashboard: dict[str, Any] = json.loads(config_map["data"][DATA_KEY])
    return config_map, dashboard


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel but the rows, those inside collapsed rows included."""
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """The PromQL of every panel target and of every query variable (label_values' selector)."""
    found = [
        Query(panel["title"], target["expr"]) for panel in panels(dashboard) for target in panel["targets"]
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append(Query(f"variable {variable['name']}", label_values_selector(variable["query"])))
    return found


def label_values_selector(definition: str) -> str:
    """The series selector of Grafana's `label_values(selector, label)` (which is no PromQL)."""
    opening, closing = "label_values(", ")"
    if not definition.startswith(opening) or not definition.endswith(closing):
        raise ValueError(f"not a label_values query: {definition!r}")
    inner = definition[len(opening) : -len(closing)]
    selector, comma, label = inner.rpartition(",")
    if not comma or not label.strip().isidentifier():
        raise ValueError(f"label_values names no label: {definition!r}")
    return selector.strip()


def concrete(expr: str) -> str:
    """`expr` as Grafana sends it, with its variables ($x, ${x}, ${x:format}) replaced by values."""
    out: list[str] = []
    index = 0
    while index < len(expr):
        if expr[index] != "$":
            out.append(expr[index])
            index += 1
            continue
        if expr.startswith("${", index):
            end = expr.index("}", index)
            name = expr[index + 2 : end].split(":", 1)[0]
            index = end + 1
        else:
            end = index + 1
            while end < len(expr) and (expr[end].isalnum() or expr[end] == "_"):
                end += 1
            name = expr[index + 1 : end]
            index = end
        out.append(_BUILT_IN.get(name, _ANY))
    return "".join(out)


def promtool_verdicts(exprs: list[str], work: Path) -> dict[str, str]:
    """promtool's verdict on each expression as a recording rule: "" if it parses, else its error."""
    verdicts: dict[str, str] = {}
    for number, expr in enumerate(exprs):
        rules = work / f"expr-{number}.rules.yaml"
        group = {"name": "dashboard", "rules": [{"record": f"dashboard:expr_{number}", "expr": expr}]}
        rules.write_text(yaml.safe_dump({"groups": [group]}))
        done = subprocess.run(
            [str(promtool_binary()), "check", "rules", str(rules)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        verdicts[expr] = "" if done.returncode == 0 else (done.stdout + done.stderr).strip()
    return verdicts


def _skip_quoted(expr: str, index: int) -> int:
    """The index past the string literal that opens at `index` (backslash escapes, none in raw `...`)."""
    quote = expr[index]
    index += 1
    while index < len(expr) and expr[index] != quote:
        index += 2 if expr[index] == "\\" and quote != "`" else 1
    return index + 1


def _skip_until(expr: str, index: int, closing: str) -> int:
    """The index past the first `closing` from `index` on that is outside a string literal."""
    while index < len(expr) and expr[index] != closing:
        index = _skip_quoted(expr, index) if expr[index] in _QUOTES else index + 1
    return index + 1


def _next_visible(expr: str, index: int) -> int:
    while index < len(expr) and expr[index].isspace():
        index += 1
    return index


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects: identifiers that are no function, keyword or label.

    Label matchers ({...}), ranges ([...]), strings, comments and the label lists of by, without,
    on, ignoring, group_left and group_right are skipped; a name followed by "(" is a function.
    """
    names: set[str] = set()
    index = 0
    while index < len(expr):
        char = expr[index]
        if char in _QUOTES:
            index = _skip_quoted(expr, index)
        elif char in _CLOSING:
            index = _skip_until(expr, index + 1, _CLOSING[char])
        elif char == "#":
            index = _skip_until(expr, index, "\n")
        elif char.isdigit() or char == ".":
            # A number or a duration (5m, 1e3, 0x1f): no name starts with a digit.
            while index < len(expr) and (expr[index].isalnum() or expr[index] in "._"):
                index += 1
        elif char.isalpha() or char in "_:":
            end = index
            while end < len(expr) and (expr[end].isalnum() or expr[end] in "_:"):
                end += 1
            word, after = expr[index:end], _next_visible(expr, end)
            called = after < len(expr) and expr[after] == "("
            if word.lower() in _LABEL_LISTS and called:
                end = _skip_until(expr, after + 1, ")")
            elif not called and word.lower() not in _KEYWORDS and word.lower() not in _LABEL_LISTS:
                names.add(word)
            index = end
        else:
            index += 1
    return names


def exported_names(text: str) -> set[str]:
    """The series names a Prometheus text exposition offers, from its samples and its TYPE lines
    (a family with labels but no series yet still has HELP and TYPE)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            family, kind = line.split()[2:4]
            names.update(_family_series(family, kind))
        elif line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def _family_series(family: str, kind: str) -> set[str]:
    """The names a family of `kind` gives its series."""
    if kind == "counter":
        base = family.removesuffix("_total")
        return {f"{base}_total", f"{base}_created"}
    if kind == "histogram":
        return {f"{family}_{suffix}" for suffix in ("bucket", "sum", "count", "created")}
    if kind == "summary":
        return {family, *(f"{family}_{suffix}" for suffix in ("sum", "count", "created"))}
    return {family}


def unknown_names(dashboard: dict[str, Any], exported: set[str]) -> dict[str, list[str]]:
    """Each metric name the dashboard selects that `exported` lacks, with where it is used."""
    unknown: dict[str, list[str]] = {}
    for query in queries(dashboard):
        for name in sorted(metric_names(concrete(query.expr)) - exported):
            places = unknown.setdefault(name, [])
            if query.where not in places:
                places.append(query.where)
    return unknown
