"""Metrics as Prometheus sees them: route templates instead of concrete paths, counters that move
on real HTTP calls, the /metrics page over HTTP, and gauges that let go of deleted installations."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from importlib import resources

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from bundle_operator.k8s.process.metrics import (
    InstallationGauges,
    InstrumentedTransport,
    Metrics,
    observe_platform_error,
    platform_event_hooks,
    route_template,
    serve_metrics,
)
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Unavailable
from bundle_operator.platform.kinds import AGENTS
from bundle_operator.platform.retry import RetryPolicy

WS = "/v1/workspaces/{ws}"


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry())


def calls(metrics: Metrics, method: str, route: str, status: str) -> float | None:
    return metrics.registry.get_sample_value(
        "bundle_operator_platform_calls_total", {"method": method, "route": route, "status": status}
    )


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/v1/workspaces/acme/agents/agt_123", f"{WS}/agents/{{id}}"),
        ("/v1/workspaces/acme/agents", f"{WS}/agents"),
        ("/v1/workspaces/acme/agents?limit=500&cursor=c_9", f"{WS}/agents"),
        ("/v1/workspaces/acme/mcp-servers/mcs_1", f"{WS}/mcp-servers/{{id}}"),
        ("/v1/workspaces/acme/skills/sk%2Fwith%2Fslashes", f"{WS}/skills/{{id}}"),
        ("/v1/workspaces/acme/endpoints/ep_1/api-key", f"{WS}/endpoints/{{id}}/api-key"),
        (
            "/v1/workspaces/acme/idempotency-keys/bundle-ns.x%3Aagents%3Ahelper",
            f"{WS}/idempotency-keys/{{id}}",
        ),
        ("/v1/workspaces/acme/gateway-bundles/x/tools/y", f"{WS}/gateway-bundles/{{id}}/tools/{{id}}"),
        (
            "/v1/workspaces/acme/gateway-bundles/gwb_1/members:order",
            f"{WS}/gateway-bundles/{{id}}/members:order",
        ),
        ("/v1/workspaces/acme/gateway-bundles/gwb_1/rename", f"{WS}/gateway-bundles/{{id}}/rename"),
        (
            "/v1/workspaces/acme/gateway-bundles/gwb_1/member-prompts/github__review",
            f"{WS}/gateway-bundles/{{id}}/member-prompts/{{id}}",
        ),
        (
            "/v1/workspaces/acme/gateway-bundles/gwb_1/resources/docs/guides/intro.md",
            f"{WS}/gateway-bundles/{{id}}/resources/{{id}}",
        ),
        ("/platform/v1/workspaces/acme/agents/agt_1", f"{WS}/agents/{{id}}"),
        ("/healthz", "/healthz"),
        ("/v1/workspaces/acme/unknown-things/1", "other"),
        ("/v1/workspaces/acme/agents/agt_1/extra", "other"),
        ("/v1/workspaces/acme/gateway-bundles/gwb_1/tools/t_1/more", "other"),
        ("/v1/workspaces/acme/agents/", "other"),
        ("/v1/workspaces/acme", "other"),
        ("/_admin/faults", "other"),
        ("/", "other"),
    ],
)
def test_route_template_hides_ids_and_workspaces(path: str, route: str) -> None:
    assert route_template(path) == route


def openapi_paths() -> Iterator[str]:
    spec = yaml.safe_load(
        resources.files("bundle_operator.platform").joinpath("openapi.yaml").read_text(encoding="utf-8")
    )
    yield from spec["paths"]


def test_every_route_of_the_platform_api_has_a_template() -> None:
    checked = 0
    for api_path in openapi_paths():
        if not api_path.startswith("/v1/"):
            continue
        concrete = api_path.replace("{workspace}", "team-a")
        concrete = re.sub(r"\{[a-z_]+\}", "id_42", concrete)
        expected = re.sub(r"\{[a-z_]+\}", "{id}", api_path).replace("/workspaces/{id}", "/workspaces/{ws}", 1)
        assert route_template(concrete) == expected, api_path
        checked += 1
    assert checked > 30  # the spec was read, not an empty file


def test_platform_client_calls_are_counted_by_route_and_status(metrics: Metrics) -> None:
    def platform(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(204)
        raise httpx.ConnectError("connection refused", request=request)

    async def scenario() -> None:
        transport = InstrumentedTransport(httpx.MockTransport(platform), metrics)
        async with PlatformClient(
            "http://platform.test", transport=transport, retry=RetryPolicy(attempts=3), sleep=no_sleep
        ) as client:
            await client.delete("acme", AGENTS, "agt_123")
            with pytest.raises(Unavailable):
                await client.get("acme", AGENTS, "agt_456")

    asyncio.run(scenario())

    route = f"{WS}/agents/{{id}}"
    assert calls(metrics, "DELETE", route, "204") == 1
    # Three attempts, none answered: each attempt is visible.
    assert calls(metrics, "GET", route, "error") == 3
    assert (
        metrics.registry.get_sample_value(
            "bundle_operator_platform_call_duration_seconds_count", {"method": "GET", "route": route}
        )
        == 3
    )


async def no_sleep(seconds: float) -> None:
    return None


def test_event_hooks_time_each_answer(metrics: Metrics) -> None:
    ticks = iter([100.0, 100.25])

    def platform(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"code": "not_found"})

    async def scenario() -> None:
        async with httpx.AsyncClient(
            base_url="http://platform.test",
            transport=httpx.MockTransport(platform),
            event_hooks=platform_event_hooks(metrics, clock=lambda: next(ticks)),
        ) as client:
            await client.get("/v1/workspaces/acme/gateway-bundles/gwb_1/tools/github__search")

    asyncio.run(scenario())

    route = f"{WS}/gateway-bundles/{{id}}/tools/{{id}}"
    assert calls(metrics, "GET", route, "404") == 1
    labels = {"method": "GET", "route": route}
    registry = metrics.registry
    assert registry.get_sample_value("bundle_operator_platform_call_duration_seconds_sum", labels) == 0.25


def test_transport_errors_reported_beside_the_hooks(metrics: Metrics) -> None:
    observe_platform_error("post", "/v1/workspaces/acme/agents", 10.0, metrics=metrics)
    assert calls(metrics, "POST", f"{WS}/agents", "error") == 1


def test_metrics_page_over_http_shows_the_operator_metrics(metrics: Metrics) -> None:
    metrics.observe_reconcile("BundleInstallation", "success", 1.5)
    metrics.observe_platform_call("PUT", "/v1/workspaces/acme/gateway-bundles/gwb_1/prompts/p", 200, 0.01)
    InstallationGauges(metrics).set("team-a", "helper", "True", 2)

    async def scrape() -> httpx.Response:
        runner = await serve_metrics("127.0.0.1", 0, metrics.registry)
        try:
            host, port = runner.addresses[0][:2]
            async with httpx.AsyncClient() as client:
                missing = await client.get(f"http://{host}:{port}/nothing")
                assert missing.status_code == 404
                return await client.get(f"http://{host}:{port}/metrics")
        finally:
            await runner.cleanup()

    response = asyncio.run(scrape())

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(response.text)}
    assert set(families) >= {
        "bundle_operator_reconciles",
        "bundle_operator_reconcile_duration_seconds",
        "bundle_operator_platform_calls",
        "bundle_operator_platform_call_duration_seconds",
        "bundle_operator_installations",
        "bundle_operator_drifted_entities",
    }
    reconciles = {
        (s.labels["kind"], s.labels["result"]): s.value
        for s in families["bundle_operator_reconciles"].samples
        if s.name.endswith("_total")
    }
    assert reconciles[("BundleInstallation", "success")] == 1
    assert reconciles[("Bundle", "error")] == 0  # every kind and result is there from the start
    # The workspace name is user data and must not leak into a label value.
    assert "acme" not in response.text
    assert 'route="/v1/workspaces/{ws}/gateway-bundles/{id}/prompts/{id}"' in response.text


def test_reconcile_labels_are_a_closed_set(metrics: Metrics) -> None:
    with pytest.raises(ValueError, match="unknown reconcile result"):
        metrics.observe_reconcile("Bundle", "exploded", 1.0)  # type: ignore[arg-type]


def test_installation_gauges_forget_deleted_installations(metrics: Metrics) -> None:
    gauges = InstallationGauges(metrics)
    registry = metrics.registry

    def installations(ready: str) -> float | None:
        return registry.get_sample_value("bundle_operator_installations", {"ready": ready})

    def drifted(namespace: str, name: str) -> float | None:
        return registry.get_sample_value(
            "bundle_operator_drifted_entities", {"namespace": namespace, "name": name}
        )

    gauges.set("team-a", "helper", "True", 0)
    gauges.set("team-a", "reviewer", "False", 3)
    gauges.set("team-b", "helper", "Unknown", 0)
    assert (installations("True"), installations("False"), installations("Unknown")) == (1, 1, 1)
    assert drifted("team-a", "reviewer") == 3

    # The same installation moving from False to True is counted once.
    gauges.set("team-a", "reviewer", "True", 0)
    assert (installations("True"), installations("False")) == (2, 0)

    gauges.forget("team-a", "reviewer")
    gauges.forget("team-a", "never-seen")
    assert (installations("True"), installations("False"), installations("Unknown")) == (1, 0, 1)
    assert drifted("team-a", "reviewer") is None
    assert drifted("team-a", "helper") == 0


def test_kube_requests_are_labelled_by_resource_never_by_namespace_or_name() -> None:
    from bundle_operator.k8s.process.metrics import kube_resource

    assert kube_resource("/api/v1/namespaces/team-a/secrets/token") == "secrets"
    assert (
        kube_resource("/apis/bundle-operator.dev/v1alpha1/namespaces/x/bundleinstallations/y/status")
        == "bundleinstallations/status"
    )
    assert kube_resource("/apis/bundle-operator.dev/v1alpha1/bundles?limit=5") == "bundles"
    assert kube_resource("/api/v1/namespaces/x") == "namespaces"
    assert kube_resource("/version") == "other"
