"""``bundlectl operator run``: settings, the kopf operator loop, probes, metrics, clean SIGTERM.

With ``--leader-election`` several replicas may run: each starts its probes and metrics at once,
waits as a standby until it holds the Lease (``k8s/process/leader.py``), and only then starts kopf. A
leader that cannot renew in time stops kopf at once and exits with ``EXIT_LOST_LEASE`` so the
kubelet restarts it as a standby; one that is stopped (SIGTERM) stops kopf and then releases the
Lease, so a standby takes over within a retry period.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol

from bundle_operator import __version__
from bundle_operator.fetch import tls_context
from bundle_operator.k8s import handlers
from bundle_operator.k8s.kube import Kube, load_connection
from bundle_operator.k8s.logs import configure_logging
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.process.health import Liveness, serve_health, ticking
from bundle_operator.k8s.process.leader import (
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    KubeLeases,
    LeaderElector,
    LeaseConfig,
    LostLease,
    Role,
    default_identity,
)
from bundle_operator.k8s.process.metrics import (
    METRICS,
    REGISTRY,
    InstrumentedTransport,
    PlatformLoad,
    serve_metrics,
)
from bundle_operator.k8s.process.options import LeaderElectionOptions, RunOptions, add_arguments, options_from
from bundle_operator.k8s.process.watch_lag import Deliveries, WatchLag
from bundle_operator.k8s.reconcile import OperatorSettings
from bundle_operator.k8s.resources import BUNDLE_PLURAL, ENDPOINT_PLURAL, INSTALLATION_PLURAL
from bundle_operator.k8s.runtime import Runtime, build_runtime, memo_of
from bundle_operator.k8s.webhook.certs import CertificateKeeper
from bundle_operator.k8s.webhook.server import answer_seconds, serve_webhook
from bundle_operator.platform.transport import AiohttpTransport
from bundle_operator.sources.resolution import SourceSettings
from bundle_operator.telemetry import tracing

log = logging.getLogger(__name__)


class Stoppable(Protocol):
    """A server of the operator's (metrics, probes, admission) that ``cleanup`` stops."""

    async def cleanup(self) -> None: ...


# The kinds whose watch streams are checked, every WATCH_CHECK_SECONDS. A stream that leaves
# changes undelivered past kopf's watch timeout (300 s, after which the API server ends every
# watch and kopf opens it again) and two more minutes is wedged.
WATCHED_PLURALS = (BUNDLE_PLURAL, INSTALLATION_PLURAL, ENDPOINT_PLURAL)
WATCH_CHECK_SECONDS = 60.0
WATCH_LAG_LIMIT = 300.0 + 120.0

# service.name of the operator's spans.
SERVICE_NAME: Final = "bundle-operator"

# The exit code of a leader that lost its Lease (distinct from 1, an unexpected crash).
EXIT_LOST_LEASE: Final = 3
# How long kopf may take to unwind once cancelled after a lost Lease before the process ends hard.
LOST_LEASE_GRACE_SECONDS: Final = 2.0


async def run_operator(options: RunOptions) -> None:
    """Run until SIGTERM or SIGINT; then stop handlers and close connections.

    With leader election, a leader that lost its Lease ends with ``SystemExit(EXIT_LOST_LEASE)``.
    """
    _configure_logs(options)
    tracing.configure(SERVICE_NAME, endpoint=options.otlp_endpoint, attributes=resource_attributes())
    try:
        await _run(options)
    finally:
        tracing.shutdown()  # the last spans are exported before the process ends


async def _run(options: RunOptions) -> None:
    """The operator between tracing's start and its last export."""
    connection = load_connection()
    kube = Kube(connection)
    platforms = _platforms(options)
    load = PlatformLoad(platforms)
    REGISTRY.register(load)
    liveness = Liveness()
    runtime = build_runtime(kube, _settings(options), platforms, liveness, options.workers)
    stop = asyncio.Event()
    ready = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    election = options.leader_election
    # A client of its own: renewals never queue behind the reconcilers' calls.
    lease_kube = None if election is None else Kube(connection, timeout=election.renew_seconds)
    elector = None if election is None or lease_kube is None else _elector(election, lease_kube)
    METRICS.leader.set(1 if elector is None else 0)
    log.info(
        "operator starting: %s, default platform %s%s",
        "all namespaces" if options.all_namespaces else "namespaces " + ", ".join(options.namespaces),
        options.platform_url or "(none)",
        "" if election is None else f", leader election on lease {election.namespace}/{election.lease_id}",
    )
    # Filled as each part starts, so a start that fails half way still stops what had started.
    runners: list[Stoppable] = []
    tasks: list[asyncio.Task[None]] = []
    lost: LostLease | None = None
    try:
        await _serve(options, kube, liveness, _readiness(ready, elector), runners, tasks)
        tasks.append(asyncio.create_task(_heartbeat(kube, liveness)))
        tasks.append(asyncio.create_task(ticking(liveness), name="liveness-tick"))
        checks = _watch_checks(kube, options, runtime.deliveries, liveness, ready)
        tasks.append(asyncio.create_task(checks, name="watch-lag"))
        if elector is None:
            await _run_kopf(options, runtime, stop, ready)
        else:
            lost = await _lead_then_run(options, runtime, elector, stop, ready)
    finally:
        for task in tasks:
            task.cancel()
        for runner in runners:
            await runner.cleanup()
        REGISTRY.unregister(load)
        await platforms.aclose()
        await kube.aclose()
        if lease_kube is not None:
            await lease_kube.aclose()
        log.info("operator stopped")
    if lost is not None:
        raise SystemExit(EXIT_LOST_LEASE)


def resource_attributes(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What every span of this process says of it: the version, and the pod when the chart runs it
    (``POD_NAME``/``POD_NAMESPACE`` from the downward API)."""
    env = os.environ if environ is None else environ
    found = {
        "service.version": __version__,
        "k8s.pod.name": env.get(ENV_POD_NAME, "").strip(),
        "k8s.namespace.name": env.get(ENV_POD_NAMESPACE, "").strip(),
    }
    return {key: value for key, value in found.items() if value}


def _configure_logs(options: RunOptions) -> None:
    configure_logging(options.log_level, options.json_logs)
    # One line per HTTP request and per successful kopf handler drowns what matters; failures and
    # retries still come through at WARNING and above, and the reconcilers log each outcome.
    if options.log_level.upper() != "DEBUG":
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def _platforms(options: RunOptions) -> PlatformPool:
    """One client per platform, the calls to each bounded by --platform-concurrency."""
    # The transport sees calls that got no answer too: an outage shows in the call counts.
    return PlatformPool(
        concurrency=options.platform_concurrency,
        transport=lambda: InstrumentedTransport(AiohttpTransport(limit=options.platform_concurrency * 2)),
    )


def _settings(options: RunOptions) -> OperatorSettings:
    """What every reconcile shares: the default platform, and the rules for fetching sources."""
    try:
        trust = tls_context()
    except ValueError as exc:
        raise SystemExit(f"bundlectl operator run: {exc}") from None
    sources = SourceSettings(allow_private_sources=options.allow_private_sources, verify=trust)
    return OperatorSettings(
        options.platform_url,
        options.platform_token,
        sources,
        options.platform_token_file,
        abandon_uninstall_after=options.abandon_uninstall_after,
    )


def _elector(election: LeaderElectionOptions, lease_kube: Kube) -> LeaderElector:
    return LeaderElector(
        KubeLeases(lease_kube),
        LeaseConfig(
            namespace=election.namespace,
            name=election.lease_id,
            identity=default_identity(),
            lease_seconds=election.lease_seconds,
            renew_seconds=election.renew_seconds,
            retry_seconds=election.retry_seconds,
        ),
        on_role=lambda role: METRICS.leader.set(1 if role is Role.LEADER else 0),
    )


async def _serve(
    options: RunOptions,
    kube: Kube,
    liveness: Liveness,
    readiness: Callable[[], bool],
    runners: list[Stoppable],
    tasks: list[asyncio.Task[None]],
) -> None:
    """Start the metrics, the probes and the webhook (with its certificate's keeper) as asked."""
    if options.metrics_port is not None:
        runners.append(await serve_metrics(options.host, options.metrics_port))
    if options.health_port is not None:
        runners.append(await serve_health(options.host, options.health_port, liveness, readiness))
    if options.webhook_certificates is not None:
        certificates = CertificateKeeper(kube, options.webhook_certificates)
        await certificates.ensure()  # the files must be there before the server loads them
        tasks.append(asyncio.create_task(certificates.follow(), name="webhook-certificate-keeper"))
    if options.webhook_port is not None and options.webhook_cert_dir is not None:
        # Every replica answers admission, leader or standby: the API server picks any endpoint.
        runners.append(
            await serve_webhook(
                options.host,
                options.webhook_port,
                options.webhook_cert_dir,
                kube,
                failure_policy=options.webhook_failure_policy,
                answer_seconds=answer_seconds(options.webhook_timeout_seconds),
            )
        )


def _readiness(ready: asyncio.Event, elector: LeaderElector | None) -> Callable[[], bool]:
    """/readyz: kopf is up; with leader election, a standby is ready while it reaches the Lease.

    A standby counts as ready: a rolling update waits for its new pods to be Ready, and a new pod
    is a standby until the old leader goes, so a leader-only /readyz would stall every rollout of
    two replicas (and PodDisruptionBudgets would count standbys as broken). The operator serves no
    traffic that must reach the leader; its Service carries /metrics, which a ServiceMonitor only
    scrapes from Ready pods, and every replica's ``bundle_operator_leader`` should be scraped. The
    gauge and the Lease's holder say which replica leads.
    """
    if elector is None:
        return ready.is_set

    def check() -> bool:
        if elector.leading:
            return ready.is_set()
        return elector.in_contact()

    return check


def exact_namespaces(options: RunOptions) -> bool:
    """Whether the operator watches a fixed list of namespaces (no kopf glob or negation in any)."""
    return not options.all_namespaces and not any(set(ns) & set("*?[]!,") for ns in options.namespaces)


async def _run_kopf(options: RunOptions, runtime: Runtime, stop: asyncio.Event, ready: asyncio.Event) -> None:
    import kopf
    from kopf._core.engines.peering import Identity  # kopf exports no public name for this NewType

    settings = kopf.OperatorSettings()
    # Named namespaces need no scanning: without it kopf neither lists namespaces nor watches CRDs,
    # so a namespace-scoped install needs no cluster-wide permission at all (the CRDs must exist
    # before the operator starts, as Helm installs them).
    settings.scanning.disabled = exact_namespaces(options)
    # Created before kopf starts, so kopf's shutdown does not count it among its own tasks.
    reclaim = asyncio.create_task(_reclaim_signals(ready, stop), name="reclaim SIGTERM")
    try:
        await kopf.operator(
            registry=handlers.REGISTRY,
            memo=memo_of(runtime),
            settings=settings,
            clusterwide=options.all_namespaces,
            namespaces=list(options.namespaces),
            # No kopf peering: one replica, or the Lease of --leader-election, keeps reconcilers apart.
            standalone=True,
            # Without it kopf asks getpwuid() for a user name, which raises KeyError under a uid that
            # has no passwd entry (OpenShift's arbitrary uids, runAsUser of another number).
            identity=Identity(default_identity()),
            stop_flag=stop,
            ready_flag=ready,
        )
    finally:
        reclaim.cancel()


async def _reclaim_signals(ready: asyncio.Event, stop: asyncio.Event) -> None:
    """Point SIGTERM and SIGINT back at ``stop`` once kopf is up.

    kopf installs its own handlers on start. When its signal wins, its waiter on our stop flag is
    left pending, and kopf's shutdown then waits 5 s for that "hung" task before it returns; a
    leader would hold the Lease that much longer. Through the stop flag kopf stops at once.
    """
    await ready.wait()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def _lead_then_run(
    options: RunOptions, runtime: Runtime, elector: LeaderElector, stop: asyncio.Event, ready: asyncio.Event
) -> LostLease | None:
    """Wait as a standby, then run kopf while renewing; the LostLease when leadership was lost.

    On a lost Lease kopf is cancelled at once (no graceful period: a standby may take over as soon
    as the lease duration has passed). When kopf ends for any other reason (SIGTERM, an error) the
    Lease is released afterwards, never before: nothing may reconcile once a standby can lead.
    """
    if not await elector.acquire(stop):
        log.info("leader election: stopped while a standby")
        return None
    # The renewer exists before kopf starts: kopf cancels every task created after its start.
    renewer = asyncio.create_task(elector.keep_leading(), name="leader election renewer")
    operator = asyncio.create_task(_run_kopf(options, runtime, stop, ready), name="kopf operator")
    try:
        await asyncio.wait({renewer, operator}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        renewer.cancel()
        operator.cancel()
        raise
    ready.clear()
    if renewer.done():
        lost = _lost(renewer)
        if not operator.done():
            operator.cancel()
            done, _ = await asyncio.wait({operator}, timeout=LOST_LEASE_GRACE_SECONDS)
            if not done:
                log.error(
                    "leader election: kopf did not stop in %.0fs; exiting now", LOST_LEASE_GRACE_SECONDS
                )
                logging.shutdown()
                os._exit(EXIT_LOST_LEASE)
        return lost
    # kopf ended first (SIGTERM, the stop flag, or an error of its own): stop renewing, then release.
    renewer.cancel()
    await asyncio.gather(renewer, return_exceptions=True)
    await elector.release()
    operator.result()  # an error of kopf's propagates, after the release
    return None


def _lost(renewer: asyncio.Task[None]) -> LostLease:
    """Why the renewer ended; it only ends by losing the Lease (or by a fault, treated the same)."""
    exc = None if renewer.cancelled() else renewer.exception()
    if isinstance(exc, LostLease):
        return exc
    log.error(
        "leader election: the renewer failed (%s); stopping as if the lease were lost", type(exc).__name__
    )
    return LostLease(f"the renewer failed: {type(exc).__name__}")


async def _watch_checks(
    kube: Kube,
    options: RunOptions,
    deliveries: Deliveries,
    liveness: Liveness,
    ready: asyncio.Event,
    every: float = WATCH_CHECK_SECONDS,
) -> None:
    """Compare what the watches delivered with the API server's lists (watch_lag.py), while kopf runs.

    Namespace globs would need a cluster-wide list the operator may not be allowed: there the
    check is off, and the other two wedges still count.
    """
    if not options.all_namespaces and not exact_namespaces(options):
        log.info("watch checks: off for namespace patterns; the event loop and heartbeat checks stay")
        return
    scopes: list[str | None] = [None] if options.all_namespaces else list(options.namespaces)
    checker = WatchLag(deliveries, WATCHED_PLURALS, limit=WATCH_LAG_LIMIT)

    async def listed(plural: str) -> list[tuple[str, str, str]]:
        return [row for scope in scopes for row in await kube.list_versions(plural, scope)]

    while True:
        await asyncio.sleep(every)
        if not ready.is_set():
            continue  # a standby, or kopf still starting: no watch to judge
        try:
            liveness.watch_lag(await checker.check(listed))
        except Exception as exc:  # the API server not answering is the heartbeat's to judge
            log.warning("watch checks: cannot list: %s: %s", type(exc).__name__, exc, exc_info=True)


async def _heartbeat(kube: Kube, liveness: Liveness, every: float = 60.0) -> None:
    """Touch liveness after each successful API call: with no resources to watch there are no
    events, yet a loop that still reaches the API server is alive."""
    path = "/version"  # readable by every authenticated identity, whatever the operator's scope
    while True:
        try:
            await kube.read(path)
        except Exception as exc:  # a failed beat only means no touch; the probe says the rest
            log.warning("heartbeat: the API server did not answer: %s", type(exc).__name__)
        else:
            liveness.touch()
        await asyncio.sleep(every)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bundle_operator``: the same as ``bundlectl operator run``."""
    parser = argparse.ArgumentParser(prog="python -m bundle_operator", description="run the operator")
    add_arguments(parser)
    args = parser.parse_args(argv)
    asyncio.run(run_operator(options_from(args)))
    return 0
