"""Series fed by status writes, as a scrape of /metrics shows them: since when each condition of an
installation has held its status and reason, and the health of each member of an Endpoint. Old
series go when a condition changes, a member leaves or the object is deleted."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.endpoint.status import EndpointStatus
from bundle_operator.k8s.installation.status import InstallationStatus
from bundle_operator.k8s.process.metrics import EndpointGauges, InstallationGauges, Metrics

SINCE = "bundle_operator_installation_condition_since_timestamp_seconds"
MEMBER_UP = "bundle_operator_endpoint_member_up"
BEFORE_RESTART = "2026-03-01T08:00:00Z"


class RecordingKube:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch_status(self, plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.patches.append(status)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry())


def scraped(metrics: Metrics, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of ``family`` in the /metrics text: sorted labels -> value."""
    text = generate_latest(metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        if f.name == family
        for s in f.samples
    }


def since(namespace: str, name: str, condition: str, status: str, reason: str) -> tuple[tuple[str, str], ...]:
    labels = {
        "namespace": namespace,
        "name": name,
        "condition": condition,
        "status": status,
        "reason": reason,
    }
    return tuple(sorted(labels.items()))


def unix(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Installation:
    """One installation whose status is written through the operator's InstallationStatus."""

    def __init__(self, gauges: InstallationGauges, status: dict[str, Any], name: str = "helper") -> None:
        self.gauges = gauges
        self.kube = RecordingKube()
        self.name = name
        self.status = status

    def write(self, *updates: cond.Cond) -> dict[str, dict[str, Any]]:
        body = {
            "metadata": {"namespace": "team-a", "name": self.name, "generation": 2},
            "status": self.status,
        }
        draft = InstallationStatus(self.kube, body, on_status=self.gauges.set)  # type: ignore[arg-type]
        draft.conditions(list(updates))
        asyncio.run(draft.write())
        self.status = {**self.status, **draft.patch}
        return {c["type"]: c for c in self.status["conditions"]}


def stored(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    """A status as an operator before a restart left it."""
    return {
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": "", "lastTransitionTime": BEFORE_RESTART}
            for t, s, r in conditions
        ]
    }


def test_each_condition_shows_since_when_it_holds_its_status_and_reason(metrics: Metrics) -> None:
    clock = Clock()
    gauges = InstallationGauges(metrics, clock=clock)
    bi = Installation(gauges, stored(("Ready", "False", "AwaitingApproval"), ("Stalled", "False", "Waiting")))

    # First seen after a restart: the lastTransitionTime the status holds.
    bi.write(cond.false("Ready", "AwaitingApproval", "approve it"), cond.false("Stalled", "AwaitingApproval"))
    assert scraped(metrics, SINCE) == {
        since("team-a", "helper", "Ready", "False", "AwaitingApproval"): unix(BEFORE_RESTART),
        since("team-a", "helper", "Stalled", "False", "AwaitingApproval"): unix(BEFORE_RESTART),
    }

    # Only the reason changes: the time of the write, and the old reason's series is gone.
    clock.now += 600
    bi.write(cond.false("Ready", "Installing", "installing"))
    assert scraped(metrics, SINCE) == {
        since("team-a", "helper", "Ready", "False", "Installing"): clock.now,
        since("team-a", "helper", "Stalled", "False", "AwaitingApproval"): unix(BEFORE_RESTART),
    }

    # The status changes: the new lastTransitionTime, one series per condition.
    clock.now += 600
    written = bi.write(
        cond.true("Ready", "Installed"),
        cond.true("Stalled", "Blocked", "a blocking issue"),
        cond.true("Drifted", "Drift"),
    )
    assert scraped(metrics, SINCE) == {
        since("team-a", "helper", "Ready", "True", "Installed"): unix(written["Ready"]["lastTransitionTime"]),
        since("team-a", "helper", "Stalled", "True", "Blocked"): unix(
            written["Stalled"]["lastTransitionTime"]
        ),
        since("team-a", "helper", "Drifted", "True", "Drift"): unix(written["Drifted"]["lastTransitionTime"]),
    }

    # A write that changes nothing keeps every series and its value.
    before = scraped(metrics, SINCE)
    clock.now += 600
    bi.write(cond.true("Ready", "Installed"))
    assert scraped(metrics, SINCE) == before


def test_a_deleted_installation_loses_its_condition_series_and_others_keep_theirs(metrics: Metrics) -> None:
    gauges = InstallationGauges(metrics, clock=Clock())
    helper = Installation(gauges, stored(("Ready", "True", "Installed")), name="helper")
    reviewer = Installation(gauges, stored(("Ready", "False", "AwaitingApproval")), name="reviewer")
    helper.write(cond.true("Ready", "Installed"), cond.true("Drifted", "Drift"))
    reviewer.write(cond.false("Ready", "AwaitingApproval"))
    assert len(scraped(metrics, SINCE)) == 3

    gauges.forget("team-a", "helper")
    assert scraped(metrics, SINCE) == {
        since("team-a", "reviewer", "Ready", "False", "AwaitingApproval"): unix(BEFORE_RESTART)
    }
    # The installation counts and drift series behave as before.
    assert scraped(metrics, "bundle_operator_installations")[(("ready", "False"),)] == 1
    assert scraped(metrics, "bundle_operator_installations")[(("ready", "True"),)] == 0


def member(name: str, healthy: bool) -> dict[str, Any]:
    return {"name": name, "healthy": healthy, "message": "" if healthy else "connection refused"}


def write_endpoint(
    gauges: EndpointGauges, kube: RecordingKube, status: dict[str, Any], members: list[Any]
) -> dict[str, Any]:
    body = {"metadata": {"namespace": "team-a", "name": "tools", "generation": 1}, "status": status}
    draft = EndpointStatus(kube, body, on_members=gauges.set)  # type: ignore[arg-type]
    draft.served(
        {"url": "https://gw.test/tools", "presentedTools": [], "withheldTools": [], "members": members}
    )
    asyncio.run(draft.write())
    return dict(draft.body["status"])


def up(member_name: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"namespace": "team-a", "name": "tools", "member": member_name}.items()))


def test_endpoint_members_are_up_or_down_and_go_when_unlisted_or_deleted(metrics: Metrics) -> None:
    gauges, kube = EndpointGauges(metrics), RecordingKube()
    status = write_endpoint(gauges, kube, {}, [member("github", True), member("jira", False)])
    assert scraped(metrics, MEMBER_UP) == {up("github"): 1, up("jira"): 0}

    status = write_endpoint(gauges, kube, status, [member("github", False)])
    assert scraped(metrics, MEMBER_UP) == {up("github"): 0}

    gauges.forget("team-a", "tools")
    assert scraped(metrics, MEMBER_UP) == {}


def test_endpoint_members_show_after_a_restart_though_nothing_is_written(metrics: Metrics) -> None:
    kube = RecordingKube()
    status = write_endpoint(EndpointGauges(Metrics(CollectorRegistry())), kube, {}, [member("github", True)])
    status["observedGeneration"] = 1
    written = len(kube.patches)

    write_endpoint(EndpointGauges(metrics), kube, status, [member("github", True)])
    assert len(kube.patches) == written  # the same status is not sent again
    assert scraped(metrics, MEMBER_UP) == {up("github"): 1}
