"""The chart's PrometheusRule, checked by the real promtool (`make gitops-tools` builds it): the rendered
rules pass `promtool check rules`, and the unit tests in tests/alerts/ (`promtool test rules`) show
each alert firing on the series that should fire it, with its labels and annotations, and silent on
the series that should not, for two releases of different names and namespaces.

The unit tests name the release's series through placeholders ($JOB, $NS, $OTHER_JOB, $PLATFORM_JOB,
$RUNBOOK) filled in from the rendered release, so a selector that missed another release's name or
namespace would fail them."""

from __future__ import annotations

import os
import string
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown.extensions.toc import slugify

from tests.gitops.tools import GitopsToolError, helm_binary, promtool_binary

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "bundle-operator"
UNIT_TESTS = REPO / "tests" / "alerts"
ALERTS_PAGE = REPO / "docs" / "reference" / "alerts.md"
SOURCE_PAGE = "https://github.com/bundle-operator/bundle-operator/blob/main/docs/reference/alerts.md"

ALERTS = {
    "BundleOperatorDown": "critical",
    "BundleOperatorNoLeader": "critical",
    "BundleOperatorReconcileErrors": "warning",
    "BundleOperatorPlatformUnreachable": "warning",
    "BundleInstallationStalled": "warning",
    "BundleInstallationBlocked": "warning",
    "BundleInstallationDrifted": "info",
    "BundleInstallationAwaitingApproval": "info",
    "BundleOperatorWebhookCertificateExpiring": "critical",
    "BundleOperatorWebhookDenials": "info",
    "BundleOperatorWebhookErrors": "warning",
    "BundleEndpointMemberUnavailable": "warning",
    "BundleGatewayRateLimited": "info",
}


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    fullname: str
    runbook_base: str = ""

    @property
    def runbook(self) -> str:
        """The alerts page the release's runbook_url annotations point into."""
        return f"{self.runbook_base.rstrip('/')}/reference/alerts/" if self.runbook_base else SOURCE_PAGE

    def placeholders(self) -> dict[str, str]:
        return {
            "JOB": f"{self.fullname}-metrics",
            "NS": self.namespace,
            "OTHER_JOB": "other-bundle-operator-metrics",
            "PLATFORM_JOB": f"{self.fullname}-platform",
            "RUNBOOK": self.runbook,
        }


RELEASES = [
    Release("bo", "ops", "bo-bundle-operator"),
    Release(
        "acme-prod", "platform-team", "acme-prod-bundle-operator", "https://docs.example.com/bundle-operator/"
    ),
]


@pytest.fixture(scope="module")
def helm() -> Path:
    """helm from `make gitops-tools`; the tests fail (never skip) without it."""
    try:
        return helm_binary()
    except GitopsToolError as error:
        pytest.fail(f"the alert tests need helm: {error}")


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool from `make gitops-tools`; the tests fail (never skip) without it."""
    try:
        return promtool_binary()
    except GitopsToolError as error:
        pytest.fail(f"the alert tests need promtool: {error}")


def template(
    helm: Path, tmp: Path, values: dict[str, Any], release: Release = RELEASES[0]
) -> list[dict[str, Any]]:
    """`helm template` of the chart with `values`; the documents."""
    overrides = tmp / "values.yaml"
    overrides.write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [str(helm), "template", release.name, str(CHART), "-n", release.namespace, "-f", str(overrides)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp)},
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def rule_values(release: Release, **settings: Any) -> dict[str, Any]:
    rule = {"enabled": True, "runbookBaseURL": release.runbook_base, **settings}
    return {"metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": rule}}


def prometheus_rule(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    return rule


def rules(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def write_rules(rule: dict[str, Any], folder: Path) -> Path:
    """The PrometheusRule's groups as the rule file the Prometheus Operator hands to Prometheus."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def unit_tests(sources: list[Path], folder: Path, release: Release) -> list[Path]:
    """The unit test files with the release's placeholders filled in, beside rules.yaml."""
    written = []
    for source in sources:
        path = folder / source.name
        path.write_text(string.Template(source.read_text()).substitute(release.placeholders()))
        written.append(path)
    return written


def promtool_run(promtool: Path, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, timeout=120, check=False, cwd=folder
    )


def test_the_chart_renders_no_rule_by_default(helm: Path, tmp_path: Path) -> None:
    assert not [d for d in template(helm, tmp_path, {}) if d["kind"] == "PrometheusRule"]


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.name)
def test_promtool_accepts_the_rendered_rules(
    helm: Path, promtool: Path, release: Release, tmp_path: Path
) -> None:
    rule = prometheus_rule(template(helm, tmp_path, rule_values(release), release))
    assert rule["metadata"]["namespace"] == release.namespace
    write_rules(rule, tmp_path)
    done = promtool_run(promtool, tmp_path, "check", "rules", "rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["Checking rules.yaml", f"  SUCCESS: {len(ALERTS)} rules found", ""]
    assert {r["alert"]: r["labels"]["severity"] for r in rules(rule)} == ALERTS


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.name)
def test_each_alert_fires_on_its_series_and_only_on_them(
    helm: Path, promtool: Path, release: Release, tmp_path: Path
) -> None:
    write_rules(prometheus_rule(template(helm, tmp_path, rule_values(release), release)), tmp_path)
    files = unit_tests(sorted(UNIT_TESTS.glob("*.yaml")), tmp_path, release)
    done = promtool_run(promtool, tmp_path, "test", "rules", *(f.name for f in files))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("  SUCCESS") == len(files), done.stdout
    # Every alert has a case where it fires and one where it stays silent.
    firing: set[str] = set()
    silent: set[str] = set()
    for path in files:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case["alert_rule_test"]:
                (firing if check["exp_alerts"] else silent).add(check["alertname"])
    assert firing == set(ALERTS)
    assert silent == set(ALERTS)


def test_changed_durations_change_what_fires(helm: Path, promtool: Path, tmp_path: Path) -> None:
    release = RELEASES[0]
    custom = rule_values(release, stalledFor="10m", certificateExpiresWithin="30d", memberUnavailableFor="2m")
    sources = sorted((UNIT_TESTS / "custom").glob("*.yaml"))
    outcomes = {}
    for name, values in (("custom", custom), ("defaults", rule_values(release))):
        folder = tmp_path / name
        write_rules(prometheus_rule(template(helm, tmp_path, values, release)), folder)
        files = unit_tests(sources, folder, release)
        outcomes[name] = promtool_run(promtool, folder, "test", "rules", *(f.name for f in files))
    assert outcomes["custom"].returncode == 0, outcomes["custom"].stdout + outcomes["custom"].stderr
    # The default rules leave the same series silent: promtool reports each expectation unmet.
    assert outcomes["defaults"].returncode == 1
    failures = outcomes["defaults"].stderr
    for alert in ("BundleInstallationStalled", "BundleOperatorWebhookCertificateExpiring"):
        assert f"alertname: {alert}, time: 15m" in failures
    assert "alertname: BundleEndpointMemberUnavailable, time: 5m" in failures


def test_alerts_can_be_left_out(helm: Path, promtool: Path, tmp_path: Path) -> None:
    values = rule_values(
        RELEASES[0],
        disabled=["BundleInstallationDrifted", *[a for a in ALERTS if "Gateway" in a or "Endpoint" in a]],
    )
    values["webhook"] = {"enabled": False}
    # Without the embedded platform the rate-limit alert would match any platform's series.
    values["platform"] = {"url": "https://platform.example.com"}
    rule = prometheus_rule(template(helm, tmp_path, values))
    left = {
        a
        for a in ALERTS
        if "Drifted" not in a and "Webhook" not in a and "Gateway" not in a and "Endpoint" not in a
    }
    assert {r["alert"] for r in rules(rule)} == left
    # A group with nothing left in it is not rendered at all.
    assert [g["name"] for g in rule["spec"]["groups"]] == [
        "bundle-operator.operator",
        "bundle-operator.installations",
    ]
    write_rules(rule, tmp_path)
    done = promtool_run(promtool, tmp_path, "check", "rules", "rules.yaml")
    assert f"SUCCESS: {len(left)} rules found" in done.stdout, done.stdout + done.stderr


def test_an_external_platform_is_matched_by_its_own_selector(
    helm: Path, promtool: Path, tmp_path: Path
) -> None:
    values = rule_values(RELEASES[0], platformSelector='job="agent-platform"')
    values["platform"] = {"url": "https://platform.example.com"}
    [limited] = [
        r
        for r in rules(prometheus_rule(template(helm, tmp_path, values)))
        if r["alert"] == "BundleGatewayRateLimited"
    ]
    assert 'bundle_platform_gateway_rate_limited_requests_total{job="agent-platform"}' in limited["expr"]
    values["metrics"]["prometheusRule"]["platformSelector"] = ""
    rule = prometheus_rule(template(helm, tmp_path, values))
    [limited] = [r for r in rules(rule) if r["alert"] == "BundleGatewayRateLimited"]
    assert "bundle_platform_gateway_rate_limited_requests_total{}" in limited["expr"]
    write_rules(rule, tmp_path)
    assert promtool_run(promtool, tmp_path, "check", "rules", "rules.yaml").returncode == 0


def test_labels_namespace_and_alert_labels(helm: Path, tmp_path: Path) -> None:
    values = rule_values(
        RELEASES[0],
        namespace="monitoring",
        labels={"release": "kube-prometheus-stack"},
        alertLabels={"team": "platform", "severity": "none"},
    )
    rule = prometheus_rule(template(helm, tmp_path, values))
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for found in rules(rule):
        # The chart's severity wins over alertLabels: paging depends on it.
        assert found["labels"]["team"] == "platform"
        assert found["labels"]["severity"] == ALERTS[found["alert"]]


def refusal(helm: Path, tmp: Path, values: dict[str, Any]) -> str:
    """helm template's error for `values`, which must fail."""
    overrides = tmp / "values.yaml"
    overrides.write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [str(helm), "template", "bo", str(CHART), "-f", str(overrides)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp)},
    )
    assert done.returncode == 1, done.stdout
    return done.stderr


def test_a_misspelled_alert_name_or_duration_is_refused(helm: Path, tmp_path: Path) -> None:
    misspelled = rule_values(RELEASES[0], disabled=["BundleInstallationDrift"])
    assert "at '/metrics/prometheusRule/disabled/0'" in refusal(helm, tmp_path, misspelled)
    in_words = rule_values(RELEASES[0], stalledFor="30 minutes")
    assert "at '/metrics/prometheusRule/stalledFor'" in refusal(helm, tmp_path, in_words)


def test_rules_without_the_service_monitor_need_a_selector(helm: Path, tmp_path: Path) -> None:
    # Without a scrape of the operator, BundleOperatorDown would page from the first minute.
    values = rule_values(RELEASES[0])
    values["metrics"]["serviceMonitor"]["enabled"] = False
    assert "enable metrics.serviceMonitor" in refusal(helm, tmp_path, values)
    values["metrics"]["prometheusRule"]["operatorSelector"] = 'job="bundle-operator"'
    [down, *_] = rules(prometheus_rule(template(helm, tmp_path, values)))
    assert down["expr"] == 'absent(up{job="bundle-operator"} == 1)'


def test_every_runbook_url_names_a_section_of_the_alerts_page(helm: Path, tmp_path: Path) -> None:
    page = ALERTS_PAGE.read_text()
    headings = {line.removeprefix("## ") for line in page.splitlines() if line.startswith("## ")}
    for release in RELEASES:
        for found in rules(prometheus_rule(template(helm, tmp_path, rule_values(release), release))):
            alert = found["alert"]
            assert alert in headings
            # mkdocs' anchor of the heading, and GitHub's, is the lower-cased name.
            assert slugify(alert, "-") == alert.lower()
            assert found["annotations"]["runbook_url"] == f"{release.runbook}#{alert.lower()}"
