"""Prometheus metrics of the operator, all named ``bundle_operator_*``, and the ``/metrics`` server.

Everything is registered in this module's own ``REGISTRY`` (never the process-global one) through
one ``Metrics`` object, ``METRICS``. Tests build ``Metrics(CollectorRegistry())`` for a clean slate
and pass it to ``platform_event_hooks``, ``InstrumentedTransport`` and ``InstallationGauges``.

Platform calls are labelled with the route *template* (``/v1/workspaces/{ws}/agents/{id}``), never
the concrete path: ids would make one series per entity, and workspace names are user data.

Two ways to measure platform calls; use one of them, not both (each would count the same call):

- ``platform_event_hooks()`` for ``httpx.AsyncClient(event_hooks=...)`` (``PlatformClient`` passes
  its ``event_hooks`` argument on). httpx fires response hooks only when an answer arrives, so a
  call that fails in transport is not seen; report those with ``observe_platform_error``.
- ``InstrumentedTransport(inner)``, a transport wrapper that ``PlatformClient(transport=...)``
  already accepts. It sees answers and transport failures (``status="error"``) alike.

Each attempt of a repeated call is one observation: retries are visible as extra calls.

Per-object state is fed by the writers of status: ``InstallationGauges`` after each
BundleInstallation status write (``installations``, ``drifted_entities``, and how long each
condition has held its status and reason), ``EndpointGauges`` after each Endpoint status write
(each member's health); both ``forget`` an object when it is deleted, so its series go. The
webhook server counts and times admission reviews and sets its certificate's expiry when it loads
it; that gauge is absent while no webhook runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import httpx
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from bundle_operator.k8s.conditions import unix_seconds
from bundle_operator.platform.routes import OTHER_ROUTE, route_template

if TYPE_CHECKING:
    from bundle_operator.k8s.platforms import PlatformPool

PREFIX: Final = "bundle_operator_"

ReconcileKind = Literal["Bundle", "BundleInstallation", "Endpoint"]
ReconcileResult = Literal["success", "blocked", "stalled", "retry", "error"]
ReadyState = Literal["True", "False", "Unknown"]
AdmissionResult = Literal["allowed", "denied", "error"]

RECONCILE_KINDS: Final[tuple[ReconcileKind, ...]] = ("Bundle", "BundleInstallation", "Endpoint")
RECONCILE_RESULTS: Final[tuple[ReconcileResult, ...]] = ("success", "blocked", "stalled", "retry", "error")
READY_STATES: Final[tuple[ReadyState, ...]] = ("True", "False", "Unknown")
# What an admission review is labelled with; anything else counts as "other".
ADMISSION_KINDS: Final = ("Bundle", "BundleInstallation", "Endpoint")
ADMISSION_OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")
ADMISSION_RESULTS: Final[tuple[AdmissionResult, ...]] = ("allowed", "denied", "error")

ERROR_STATUS: Final = "error"

# A reconcile may wait on several platform calls with backoff; a platform call is usually fast.
_RECONCILE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# An admission answer comes within the webhook's timeoutSeconds (at most 30).
_ADMISSION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0, 30.0)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_STARTED_KEY = "bundle_operator_started"


M = TypeVar("M", Counter, Gauge, Histogram)


def _registered(metric: type[M], registry: CollectorRegistry) -> Callable[..., M]:
    """A maker of ``metric``s named under the operator's prefix and registered in ``registry``."""

    def make(name: str, documentation: str, labels: tuple[str, ...] = (), **options: Any) -> M:
        return metric(f"{PREFIX}{name}", documentation, labels, registry=registry, **options)

    return make


class Metrics:
    """The operator's metrics, registered in ``registry``; build one per registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        counter = _registered(Counter, registry)
        gauge = _registered(Gauge, registry)
        histogram = _registered(Histogram, registry)
        self.reconciles = counter(
            "reconciles_total", "Reconciles handled, by resource kind and result.", ("kind", "result")
        )
        self.reconcile_duration = histogram(
            "reconcile_duration_seconds",
            "Wall time of one reconcile, by resource kind.",
            ("kind",),
            buckets=_RECONCILE_BUCKETS,
        )
        self.platform_calls = counter(
            "platform_calls_total",
            "HTTP calls to the platform API, by method, route template and status (or 'error').",
            ("method", "route", "status"),
        )
        self.platform_call_duration = histogram(
            "platform_call_duration_seconds",
            "Time until the platform answered (or the call failed), by method and route template.",
            ("method", "route"),
            buckets=_CALL_BUCKETS,
        )
        self.kube_requests = counter(
            "kube_requests_total",
            "Requests of the operator's own Kubernetes client (not kopf's watches and patches), by "
            "method and resource (plural, with /status for the subresource).",
            ("method", "resource"),
        )
        self.installations = gauge(
            "installations",
            "BundleInstallations known to the operator, by their Ready condition status.",
            ("ready",),
        )
        self.drifted_entities = gauge(
            "drifted_entities",
            "Platform entities of an installation whose live state differs from what it last wrote.",
            ("namespace", "name"),
        )
        self.installation_condition_since = gauge(
            "installation_condition_since_timestamp_seconds",
            "Unix time since when a BundleInstallation's condition has had this status and reason: "
            "its lastTransitionTime when a write changed the status, the time of the write when only "
            "the reason changed. After an operator restart, an installation's first series take the "
            "lastTransitionTime, though the reason may have changed since.",
            ("namespace", "name", "condition", "status", "reason"),
        )
        self.endpoint_member_up = gauge(
            "endpoint_member_up",
            "1 while an Endpoint's status.members says the member is healthy, 0 while it does not.",
            ("namespace", "name", "member"),
        )
        self.admission_reviews = counter(
            "admission_reviews_total",
            "AdmissionReviews the validating webhook answered, by kind, operation and result "
            "(allowed, denied, or error: it could not read or judge the review and answered with a "
            "failure).",
            ("kind", "operation", "result"),
        )
        self.admission_review_duration = histogram(
            "admission_review_duration_seconds",
            "Time from an AdmissionReview reaching the webhook to its answer, by kind.",
            ("kind",),
            buckets=_ADMISSION_BUCKETS,
        )
        self.webhook_certificate_expiry = OptionalGauge(
            f"{PREFIX}webhook_certificate_expiry_timestamp_seconds",
            "NotAfter (Unix time) of the serving certificate the webhook server loaded last; absent "
            "while the webhook does not run.",
        )
        registry.register(self.webhook_certificate_expiry)
        self.leader = gauge(
            "leader",
            "1 while this replica reconciles (it holds the leader election lease, or runs without "
            "leader election), 0 while it waits as a standby.",
        )
        # Series that exist from the start, so rate() and absent() work before the first event.
        for kind in RECONCILE_KINDS:
            self.reconcile_duration.labels(kind)
            for result in RECONCILE_RESULTS:
                self.reconciles.labels(kind, result)
        for ready in READY_STATES:
            self.installations.labels(ready).set(0)
        for admission_kind in (*ADMISSION_KINDS, OTHER_ROUTE):
            self.admission_review_duration.labels(admission_kind)
            for operation in ("CREATE", "UPDATE"):
                for admission_result in ADMISSION_RESULTS:
                    self.admission_reviews.labels(admission_kind, operation, admission_result)

    def observe_reconcile(self, kind: ReconcileKind, result: ReconcileResult, seconds: float) -> None:
        """Count one finished reconcile and its duration."""
        if kind not in RECONCILE_KINDS:
            raise ValueError(f"unknown reconcile kind {kind!r}; use one of {RECONCILE_KINDS}")
        if result not in RECONCILE_RESULTS:
            raise ValueError(f"unknown reconcile result {result!r}; use one of {RECONCILE_RESULTS}")
        self.reconciles.labels(kind, result).inc()
        self.reconcile_duration.labels(kind).observe(max(seconds, 0.0))

    def observe_admission(
        self, kind: object, operation: object, result: AdmissionResult, seconds: float
    ) -> None:
        """Count one answered AdmissionReview; a kind or operation we do not know counts as other."""
        kind_label = kind if isinstance(kind, str) and kind in ADMISSION_KINDS else OTHER_ROUTE
        operation_label = (
            operation if isinstance(operation, str) and operation in ADMISSION_OPERATIONS else OTHER_ROUTE
        )
        self.admission_reviews.labels(kind_label, operation_label, result).inc()
        self.admission_review_duration.labels(kind_label).observe(max(seconds, 0.0))

    def observe_platform_call(self, method: str, path: str, status: int | str, seconds: float) -> None:
        """Count one platform call; ``path`` is the concrete request path, templated here."""
        method_label = method.upper() if method.upper() in _METHODS else "OTHER"
        route = route_template(path)
        self.platform_calls.labels(method_label, route, str(status)).inc()
        self.platform_call_duration.labels(method_label, route).observe(max(seconds, 0.0))


class OptionalGauge:
    """A gauge without labels that a scrape shows only once it was set (a plain Gauge shows 0)."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self._value: float | None = None

    def set(self, value: float) -> None:
        """Show ``value`` from now on."""
        self._value = value

    @property
    def value(self) -> float | None:
        """The value set last, or None."""
        return self._value

    def collect(self) -> Iterator[Metric]:
        """The family with its one sample, or nothing before the first set."""
        if self._value is None:
            return
        family = GaugeMetricFamily(self.name, self.documentation)
        family.add_metric([], self._value)
        yield family

    def describe(self) -> Iterator[Metric]:
        """The family's name for the registry, whether set or not."""
        yield GaugeMetricFamily(self.name, self.documentation)


def kube_resource(path: str) -> str:
    """The resource a Kubernetes API path names (``secrets``, ``bundleinstallations/status``),
    without namespaces or names; ``other`` for anything else (``/version``)."""
    segments = path.split("?", 1)[0].strip("/").split("/")
    if segments[:1] == ["api"]:
        rest = segments[2:]
    elif segments[:1] == ["apis"]:
        rest = segments[3:]
    else:
        return OTHER_ROUTE
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    if not rest or not rest[0]:
        return OTHER_ROUTE
    return f"{rest[0]}/{rest[2]}" if len(rest) >= 3 else rest[0]


REGISTRY: Final = CollectorRegistry()
METRICS: Final = Metrics(REGISTRY)


# --- platform calls -------------------------------------------------------------------------


def _request_path(request: httpx.Request) -> str:
    # raw_path keeps the percent-encoding: an id holding an encoded '/' stays one segment.
    return request.url.raw_path.decode("ascii", errors="replace")


def platform_event_hooks(
    metrics: Metrics = METRICS,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, list[Callable[..., Any]]]:
    """Async hooks for ``httpx.AsyncClient(event_hooks=...)`` that count and time each answer.

    Transport failures never reach a response hook: report them with ``observe_platform_error``,
    or use ``InstrumentedTransport`` instead of these hooks.
    """

    async def on_request(request: httpx.Request) -> None:
        request.extensions[_STARTED_KEY] = clock()

    async def on_response(response: httpx.Response) -> None:
        request = response.request
        started = request.extensions.get(_STARTED_KEY)
        seconds = clock() - started if isinstance(started, float) else 0.0
        metrics.observe_platform_call(request.method, _request_path(request), response.status_code, seconds)

    return {"request": [on_request], "response": [on_response]}


def observe_platform_error(method: str, path: str, seconds: float, metrics: Metrics = METRICS) -> None:
    """Count a platform call that got no answer (connection refused, timeout, reset)."""
    metrics.observe_platform_call(method, path, ERROR_STATUS, seconds)


class InstrumentedTransport(httpx.AsyncBaseTransport):
    """Wraps a transport and measures every call through it, failed ones included."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport | None = None,
        metrics: Metrics = METRICS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()
        self._metrics = metrics
        self._clock = clock

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = self._clock()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError:
            self._metrics.observe_platform_call(
                request.method, _request_path(request), ERROR_STATUS, self._clock() - started
            )
            raise
        self._metrics.observe_platform_call(
            request.method, _request_path(request), response.status_code, self._clock() - started
        )
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


# --- installation gauges --------------------------------------------------------------------


_READY_BY_TEXT: Final[dict[str, ReadyState]] = {state: state for state in READY_STATES}


@dataclass(frozen=True)
class _Held:
    """A condition's status and reason, and since when it has had both."""

    status: ReadyState
    reason: str
    since: float


@dataclass(frozen=True)
class _InstallationState:
    ready: ReadyState
    drifted: int
    conditions: dict[str, _Held]


class InstallationGauges:
    """Per-installation state behind ``installations{ready}``, ``drifted_entities`` and
    ``installation_condition_since_timestamp_seconds``.

    ``set`` after each status write, ``forget`` when an installation is deleted, so a deleted
    installation stops counting and its per-installation series disappear.
    """

    def __init__(self, metrics: Metrics = METRICS, clock: Callable[[], float] = time.time) -> None:
        self._metrics = metrics
        self._clock = clock
        self._states: dict[tuple[str, str], _InstallationState] = {}
        self._counts: dict[ReadyState, int] = dict.fromkeys(READY_STATES, 0)
        self._lock = threading.Lock()

    def set(
        self,
        namespace: str,
        name: str,
        ready: str,
        drifted: int,
        conditions: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Record the installation's Ready status (True|False|Unknown; anything else is Unknown),
        its drift, and its conditions as written."""
        ready_state = _READY_BY_TEXT.get(ready, "Unknown")
        with self._lock:
            before = self._states.get((namespace, name))
            held = self._hold(namespace, name, before.conditions if before is not None else {}, conditions)
            self._states[(namespace, name)] = _InstallationState(ready_state, max(drifted, 0), held)
            self._metrics.drifted_entities.labels(namespace, name).set(max(drifted, 0))
            # Counted as they change, never by a walk over every installation: a fleet's status
            # writes would each cost as many steps as there are installations.
            self._move(before.ready if before is not None else None, ready_state)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted installation; forgetting an unknown one does nothing."""
        with self._lock:
            before = self._states.pop((namespace, name), None)
            if before is None:
                return
            self._metrics.drifted_entities.remove(namespace, name)
            for condition, held in before.conditions.items():
                self._metrics.installation_condition_since.remove(
                    namespace, name, condition, held.status, held.reason
                )
            self._move(before.ready, None)

    def _hold(
        self,
        namespace: str,
        name: str,
        before: dict[str, _Held],
        conditions: Sequence[Mapping[str, Any]],
    ) -> dict[str, _Held]:
        """The conditions' series after a write: one per condition type, old (status, reason) removed."""
        now = self._clock()
        gauge = self._metrics.installation_condition_since
        after: dict[str, _Held] = {}
        for condition in conditions:
            kind = condition.get("type")
            if not isinstance(kind, str) or not kind or kind in after:
                continue
            status = _READY_BY_TEXT.get(str(condition.get("status")), "Unknown")
            given = str(condition.get("reason") or "")
            old = before.get(kind)
            if old is not None and (old.status, old.reason) == (status, given):
                after[kind] = old
                continue
            if old is not None and old.status == status:
                since = now  # only the reason changed: its lastTransitionTime did not move
            else:
                transitioned = unix_seconds(condition.get("lastTransitionTime"))
                since = transitioned if transitioned is not None else now
            after[kind] = _Held(status, given, since)
            gauge.labels(namespace, name, kind, status, given).set(since)
        for kind, old in before.items():
            new = after.get(kind)
            if new is None or (new.status, new.reason) != (old.status, old.reason):
                gauge.remove(namespace, name, kind, old.status, old.reason)
        return after

    def _move(self, before: ReadyState | None, after: ReadyState | None) -> None:
        if before == after:
            return
        for state, step in ((before, -1), (after, 1)):
            if state is not None:
                self._counts[state] += step
                self._metrics.installations.labels(state).set(self._counts[state])


class EndpointGauges:
    """``endpoint_member_up`` of each Endpoint: ``set`` after a status write, ``forget`` on delete."""

    def __init__(self, metrics: Metrics = METRICS) -> None:
        self._metrics = metrics
        self._members: dict[tuple[str, str], set[str]] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, name: str, members: Sequence[Mapping[str, Any]]) -> None:
        """Record status.members: 1 for a healthy member, 0 for another; unlisted members go."""
        gauge = self._metrics.endpoint_member_up
        with self._lock:
            listed: set[str] = set()
            for member in members:
                member_name = member.get("name")
                if not isinstance(member_name, str) or member_name in listed:
                    continue
                listed.add(member_name)
                gauge.labels(namespace, name, member_name).set(1 if member.get("healthy") is True else 0)
            for gone in self._members.get((namespace, name), set()) - listed:
                gauge.remove(namespace, name, gone)
            self._members[(namespace, name)] = listed

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted Endpoint's series; forgetting an unknown one does nothing."""
        with self._lock:
            for member in self._members.pop((namespace, name), set()):
                self._metrics.endpoint_member_up.remove(namespace, name, member)


# --- /metrics -------------------------------------------------------------------------------


async def serve_metrics(host: str, port: int, registry: CollectorRegistry = REGISTRY) -> web.AppRunner:
    """Serve ``GET /metrics`` from ``registry``; call ``cleanup()`` on the runner to stop.

    With ``port=0`` the system picks a free port: read it from ``runner.addresses``.
    """

    async def metrics_view(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    # No access log: Prometheus scrapes every few seconds.
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


# --- the platforms' gates and shared lists ----------------------------------------------------


class PlatformLoad:
    """Reports the call gates and shared lists of a ``PlatformPool`` at each scrape."""

    def __init__(self, pool: PlatformPool) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        """The current figures, summed over the pool's platforms."""
        gates = list(self._pool.gates.values())
        shared = list(self._pool.shared.values())
        in_flight = GaugeMetricFamily(
            f"{PREFIX}platform_calls_in_flight", "Calls sent to a platform and not yet answered."
        )
        in_flight.add_metric([], sum(g.in_flight for g in gates))
        yield in_flight
        waiting = GaugeMetricFamily(
            f"{PREFIX}platform_calls_waiting",
            "Calls queued for a slot under --platform-concurrency (served round-robin by installation).",
        )
        waiting.add_metric([], sum(g.waiting for g in gates))
        yield waiting
        paused = GaugeMetricFamily(
            f"{PREFIX}platform_paused",
            "Platforms no call goes to right now: they asked for a pause (429, Retry-After) or could "
            "not be reached.",
        )
        paused.add_metric([], sum(1 for g in gates if g.open_for() > 0))
        yield paused
        lists = CounterMetricFamily(
            f"{PREFIX}platform_shared_lists",
            "Lists a reconcile asked for: served from a list another installation of the workspace "
            "made (hit) or sent to the platform (miss).",
            labels=("result",),
        )
        lists.add_metric(["hit"], sum(s.hits for s in shared))
        lists.add_metric(["miss"], sum(s.misses for s in shared))
        yield lists

    def describe(self) -> Iterator[Metric]:
        """Nothing up front: the figures are read at scrape time."""
        return iter(())
