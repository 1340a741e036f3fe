"""The chart's Grafana dashboard as `helm template` renders it: a ConfigMap the kube-prometheus-stack
sidecar picks up, a dashboard with its three rows laid out without overlap, and every query parsed
by promtool. That every metric it names is exported is checked against a live operator and
platform in tests/e2e/test_dashboard_metrics.py."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tests.grafana_dashboard import (
    concrete,
    dashboard_config_maps,
    label_values_selector,
    metric_names,
    panels,
    promtool_verdicts,
    queries,
    render,
    rendered_dashboard,
)

ENABLED = {"metrics": {"dashboards": {"enabled": True}}}
ROWS = ["Fleet", "Approval and admission", "Gateway"]
GRID_COLUMNS = 24


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _, found = rendered_dashboard(ENABLED, tmp_path_factory.mktemp("helm"))
    return found


def test_no_dashboard_unless_enabled(tmp_path: Path) -> None:
    assert dashboard_config_maps(render({}, tmp_path)) == []


def test_the_configmap_carries_the_sidecars_label_in_the_release_namespace(tmp_path: Path) -> None:
    config_map, _ = rendered_dashboard(ENABLED, tmp_path)
    assert config_map["metadata"]["namespace"] == "ops"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in config_map["metadata"]


def test_label_namespace_folder_and_more_metadata_come_from_values(tmp_path: Path) -> None:
    values = {
        "metrics": {
            "dashboards": {
                "enabled": True,
                "namespace": "monitoring",
                "label": "example.com/dashboard",
                "labelValue": "bundle-operator",
                "folder": "Platform operators",
                "labels": {"team": "platform"},
                "annotations": {"owner": "platform-team"},
            }
        }
    }
    config_map, _ = rendered_dashboard(values, tmp_path)
    metadata = config_map["metadata"]
    assert metadata["namespace"] == "monitoring"
    assert metadata["labels"]["example.com/dashboard"] == "bundle-operator"
    assert metadata["labels"]["team"] == "platform"
    assert "grafana_dashboard" not in metadata["labels"]
    assert metadata["annotations"] == {"grafana_folder": "Platform operators", "owner": "platform-team"}


def test_labels_are_read_where_the_prometheus_operator_puts_them(
    dashboard: dict[str, Any], tmp_path: Path
) -> None:
    # The chart's ServiceMonitor leaves honorLabels off: the target's namespace (the operator's)
    # is `namespace`, an installation's or Endpoint's is `exported_namespace`; the platform's
    # gateway endpoint likewise becomes `exported_endpoint` beside the scraped port's `endpoint`.
    values = {"metrics": {"serviceMonitor": {"enabled": True}}}
    [monitor] = [doc for doc in render(values, tmp_path) if doc["kind"] == "ServiceMonitor"]
    assert not any(endpoint.get("honorLabels") for endpoint in monitor["spec"]["endpoints"])
    for query in queries(dashboard):
        expr = concrete(query.expr)  # the variables' names are no labels
        assert "namespace" not in expr.replace("exported_namespace", ""), query
        if "bundle_platform_gateway_" in expr:
            assert "endpoint" not in expr.replace("exported_endpoint", ""), query


def test_the_dashboard_is_identified_and_current(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "bundle-operator"
    assert dashboard["title"] == "bundle-operator"
    assert "bundle-operator" in dashboard["tags"]
    assert dashboard["schemaVersion"] >= 39


def test_the_variables_pick_a_prometheus_and_what_to_show(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert list(variables) == ["datasource", "job", "namespace", "installation", "endpoint"]
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    for name in ("job", "namespace", "installation", "endpoint"):
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert variables[name]["includeAll"] and variables[name]["multi"]
        # What Grafana runs and what its editor shows are the same query.
        assert variables[name]["query"] == variables[name]["definition"]


def test_three_rows_in_order_each_with_panels_below_it(dashboard: dict[str, Any]) -> None:
    top = sorted(dashboard["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    rows = [p for p in top if p["type"] == "row"]
    assert [row["title"] for row in rows] == ROWS
    below: dict[str, list[str]] = {}
    current = None
    for panel in top:
        if panel["type"] == "row":
            current = panel["title"]
            below[current] = []
        else:
            assert current is not None, f"{panel['title']!r} is above the first row"
            below[current].append(panel["title"])
    assert all(len(titles) >= 3 for titles in below.values()), below
    assert "Awaiting approval" in below["Approval and admission"]
    assert "Members' health" in below["Gateway"]


def test_every_panel_is_of_a_type_grafana_ships(dashboard: dict[str, Any]) -> None:
    # Core panel types only: a plugin's panel would show as an error where it is not installed.
    core = {"row", "stat", "timeseries", "table", "state-timeline"}
    assert {panel["type"] for panel in dashboard["panels"]} <= core


def test_every_panel_queries_the_chosen_datasource(dashboard: dict[str, Any]) -> None:
    chosen = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels(dashboard):
        assert panel["datasource"] == chosen, panel["title"]
        assert panel["targets"], f"{panel['title']!r} has no target"
        for target in panel["targets"]:
            assert target["datasource"] == chosen, panel["title"]
            assert target["expr"].strip(), panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids), panel["title"]


def test_panel_ids_are_unique(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(isinstance(i, int) and i > 0 for i in ids)


def test_panels_stay_on_the_grid_and_never_overlap(dashboard: dict[str, Any]) -> None:
    boxes = {p["title"]: p["gridPos"] for p in dashboard["panels"]}
    assert len(boxes) == len(dashboard["panels"]), "two panels share a title"
    for title, box in boxes.items():
        assert box["x"] >= 0 and box["w"] > 0 and box["h"] > 0 and box["x"] + box["w"] <= GRID_COLUMNS, title
    for (one, a), (other, b) in combinations(boxes.items(), 2):
        apart = (
            a["x"] + a["w"] <= b["x"]
            or b["x"] + b["w"] <= a["x"]
            or a["y"] + a["h"] <= b["y"]
            or b["y"] + b["h"] <= a["y"]
        )
        assert apart, f"{one!r} overlaps {other!r}"


def test_rates_follow_grafanas_rate_interval(dashboard: dict[str, Any]) -> None:
    for query in queries(dashboard):
        assert query.expr.count("[") == query.expr.count("[$__rate_interval]"), query


def test_latency_panels_show_p50_and_p99(dashboard: dict[str, Any]) -> None:
    quantile_panels = {
        panel["title"]: sorted(
            target["expr"].split(",", 1)[0].removeprefix("histogram_quantile(") for target in panel["targets"]
        )
        for panel in panels(dashboard)
        if any("histogram_quantile" in target["expr"] for target in panel["targets"])
    }
    assert quantile_panels == {
        title: ["0.5", "0.99"]
        for title in ("Reconcile duration", "Platform call latency", "Admission latency", "Tool call latency")
    }


def test_every_query_parses_with_promtool(dashboard: dict[str, Any], tmp_path: Path) -> None:
    found = queries(dashboard)
    assert len(found) > 25
    verdicts = promtool_verdicts([concrete(q.expr) for q in found], tmp_path)
    refused = {q.where: verdicts[concrete(q.expr)] for q in found if verdicts[concrete(q.expr)]}
    assert refused == {}


def test_promtool_refuses_what_does_not_parse(tmp_path: Path) -> None:
    broken = "sum by (le (rate(bundle_operator_reconciles_total[2m]))"
    fine = "sum(rate(bundle_operator_reconciles_total[2m]))"
    verdicts = promtool_verdicts([broken, fine, concrete("rate(x[$__rate_interval]) $namespace")], tmp_path)
    assert "could not parse expression" in verdicts[broken]
    assert verdicts[fine] == ""
    assert verdicts["rate(x[2m]) .*"] != ""


def test_grafana_variables_become_values_promql_takes() -> None:
    expr = 'rate(a_total{namespace=~"$namespace", name=~"${installation:regex}"}[$__rate_interval])'
    assert concrete(expr) == 'rate(a_total{namespace=~".*", name=~".*"}[2m])'


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'histogram_quantile(0.99, sum by (le, kind) (rate(a_seconds_bucket{kind=~"x}y"}[5m])))',
            {"a_seconds_bucket"},
        ),
        (
            "sum(rate(a_total[5m])) by (job) / on (job) group_left(reason) b_total offset 5m > bool 0",
            {"a_total", "b_total"},
        ),
        ("count(c == 0) or vector(0) unless d and time() - e", {"c", "d", "e"}),
        ('min(f{reason="by (x) g"}) - time() # h', {"f"}),
        ("sum without (le) (ns:recorded:rate5m) * 1e3", {"ns:recorded:rate5m"}),
    ],
)
def test_metric_names_are_the_selectors_only(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_variables_select_series_by_a_metric_name(dashboard: dict[str, Any]) -> None:
    selectors = [q.expr for q in queries(dashboard) if q.where.startswith("variable ")]
    assert len(selectors) == 4
    assert all(len(metric_names(concrete(selector))) == 1 for selector in selectors)
    with pytest.raises(ValueError, match="not a label_values query"):
        label_values_selector("query_result(up)")
