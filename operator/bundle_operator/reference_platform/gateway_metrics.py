"""Prometheus metrics of the gateway, served at the platform's ``/metrics``.

Labels are bounded by what the platform stores: endpoint names and the tools bundles present. A
call of a tool the bundle does not have is counted under ``(unknown)``, so a client cannot grow
the series by making names up.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

UNKNOWN_TOOL = "(unknown)"
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class GatewayMetrics:
    """The gateway's counters and latency histogram, in a registry of their own per platform."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.tool_calls = Counter(
            "bundle_platform_gateway_tool_calls",
            "Tool calls through gateway endpoints, by endpoint, presented tool and outcome.",
            ("endpoint", "tool", "outcome"),
            registry=self.registry,
        )
        self.tool_call_seconds = Histogram(
            "bundle_platform_gateway_tool_call_seconds",
            "Time from a tool call reaching the gateway to its answer, by endpoint.",
            ("endpoint",),
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "bundle_platform_gateway_rate_limited_requests",
            "Requests refused with 429 by an endpoint's rate limit.",
            ("endpoint",),
            registry=self.registry,
        )
        self.token_refusals = Counter(
            "bundle_platform_gateway_token_refusals",
            "Requests to OAuth endpoints refused for their token, by reason.",
            ("endpoint", "reason"),
            registry=self.registry,
        )

    def tool_call(self, endpoint: str, tool: str, outcome: str, seconds: float) -> None:
        """Count one tool call and its time."""
        self.tool_calls.labels(endpoint, tool, outcome).inc()
        self.tool_call_seconds.labels(endpoint).observe(seconds)
        if outcome == "rate_limited":
            self.rate_limited.labels(endpoint).inc()

    async def route(self, request: web.Request) -> web.Response:
        """GET /metrics: the Prometheus text format."""
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
