"""``bundlectl operator run``: settings, the kopf operator loop, probes, metrics, clean SIGTERM.

With ``--leader-election`` several replicas may run: each starts its probes and metrics at once,
waits as a standby until it holds the Lease (``k8s/leader.py``), and only then starts kopf. A
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from bundle_operator.fetch import tls_context
from bundle_operator.k8s import handlers
from bundle_operator.k8s.bundle import BundleReconciler
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.handlers import DEFAULT_WORKERS
from bundle_operator.k8s.health import Liveness, serve_health, ticking
from bundle_operator.k8s.installation import InstallationReconciler
from bundle_operator.k8s.kube import Kube, load_connection
from bundle_operator.k8s.leader import (
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RENEW_SECONDS,
    DEFAULT_RETRY_SECONDS,
    ENV_POD_NAMESPACE,
    KubeLeases,
    LeaderElector,
    LeaseConfig,
    LostLease,
    Role,
    default_identity,
    default_namespace,
    lease_timing_problem,
)
from bundle_operator.k8s.logs import configure_logging
from bundle_operator.k8s.metrics import METRICS, REGISTRY, InstrumentedTransport, PlatformLoad, serve_metrics
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.reconcile import ABANDON_UNINSTALL_AFTER, OperatorSettings
from bundle_operator.k8s.resources import BUNDLE_PLURAL, ENDPOINT_PLURAL, INSTALLATION_PLURAL
from bundle_operator.k8s.source_types import SourceSettings
from bundle_operator.k8s.watch_lag import WatchLag
from bundle_operator.k8s.webhook import (
    FAILURE_POLICIES,
    WEBHOOK_TIMEOUT_SECONDS,
    answer_seconds,
    serve_webhook,
)
from bundle_operator.k8s.webhook_certs import CertificateKeeper, CertificateSettings
from bundle_operator.platform.client import ENV_TOKEN, ENV_URL
from bundle_operator.platform.gate import DEFAULT_LIMIT
from bundle_operator.platform.transport import AiohttpTransport

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

# The exit code of a leader that lost its Lease (distinct from 1, an unexpected crash).
EXIT_LOST_LEASE: Final = 3
# How long kopf may take to unwind once cancelled after a lost Lease before the process ends hard.
LOST_LEASE_GRACE_SECONDS: Final = 2.0


@dataclass(frozen=True)
class LeaderElectionOptions:
    """Where the Lease is and client-go's three durations (seconds)."""

    namespace: str
    lease_id: str = DEFAULT_LEASE_NAME
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    renew_seconds: float = DEFAULT_RENEW_SECONDS
    retry_seconds: float = DEFAULT_RETRY_SECONDS


@dataclass(frozen=True)
class RunOptions:
    """What ``operator run`` was told."""

    namespaces: tuple[str, ...]
    all_namespaces: bool
    platform_url: str | None
    platform_token: str | None
    platform_token_file: Path | None
    metrics_port: int | None
    health_port: int | None
    allow_private_sources: bool
    host: str = "0.0.0.0"
    log_level: str = "INFO"
    json_logs: bool = True
    leader_election: LeaderElectionOptions | None = None
    platform_concurrency: int = DEFAULT_LIMIT
    workers: int = DEFAULT_WORKERS
    webhook_port: int | None = None
    webhook_cert_dir: Path | None = None
    # With a Secret name, the operator makes and renews the webhook's certificate itself.
    webhook_certificates: CertificateSettings | None = None
    # The webhook configuration's: what an analysis out of time gets, and when time is out.
    webhook_failure_policy: str = "Fail"
    webhook_timeout_seconds: int = WEBHOOK_TIMEOUT_SECONDS
    abandon_uninstall_after: float = ABANDON_UNINSTALL_AFTER


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``operator run``."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], metavar="NS", help="watch NS (repeatable)"
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")
    parser.add_argument(
        "--platform-url",
        metavar="URL",
        default=os.environ.get(ENV_URL),
        help=f"default platform (${ENV_URL})",
    )
    parser.add_argument(
        "--platform-token-file",
        metavar="FILE",
        type=Path,
        help=f"a file holding the default platform's token (default ${ENV_TOKEN})",
    )
    parser.add_argument("--metrics-port", type=int, metavar="PORT", help="serve Prometheus /metrics on PORT")
    parser.add_argument("--health-port", type=int, metavar="PORT", help="serve /healthz and /readyz on PORT")
    parser.add_argument("--probe-host", default="0.0.0.0", help="address for metrics and probes")
    parser.add_argument(
        "--abandon-uninstall-after",
        type=float,
        metavar="SECONDS",
        default=ABANDON_UNINSTALL_AFTER,
        help="in a namespace being deleted, give up an uninstall that keeps failing after SECONDS (an "
        f"UninstallAbandoned event says what stays on the platform; default {ABANDON_UNINSTALL_AFTER:.0f})",
    )
    parser.add_argument(
        "--webhook-port",
        type=int,
        metavar="PORT",
        help="serve the validating admission webhook (POST /validate) over HTTPS on PORT, in every replica",
    )
    parser.add_argument(
        "--webhook-cert-dir",
        type=Path,
        metavar="DIR",
        help="the webhook's tls.crt and tls.key, reloaded when they change (required with --webhook-port)",
    )
    parser.add_argument(
        "--webhook-cert-secret",
        metavar="NAME",
        help="make the webhook's certificate, keep it in this Secret of the operator's namespace, renew "
        "it before it expires and write it to --webhook-cert-dir (without it, the files come from elsewhere, "
        "e.g. cert-manager)",
    )
    parser.add_argument(
        "--webhook-failure-policy",
        choices=FAILURE_POLICIES,
        default="Fail",
        help="the webhook configuration's failurePolicy: an analysis that does not finish in time is "
        "refused under Fail (the default) and admitted with a warning under Ignore",
    )
    parser.add_argument(
        "--webhook-timeout-seconds",
        type=int,
        choices=range(1, 31),
        metavar="SECONDS",
        default=WEBHOOK_TIMEOUT_SECONDS,
        help="the webhook configuration's timeoutSeconds (1 to 30); every review is answered a second "
        f"before it (default {WEBHOOK_TIMEOUT_SECONDS})",
    )
    parser.add_argument("--webhook-service", metavar="NAME", help="the Service the certificate is for")
    parser.add_argument(
        "--webhook-configuration",
        metavar="NAME",
        help="the ValidatingWebhookConfiguration whose caBundle gets the certificate's CA",
    )
    parser.add_argument(
        "--allow-private-sources",
        action="store_true",
        help="UNSAFE, for tests and local setups only: let url and mcpb sources reach loopback and "
        "private networks (an SSRF risk wherever Bundles come from untrusted users)",
    )
    parser.add_argument(
        "--platform-concurrency",
        type=_positive,
        metavar="N",
        default=DEFAULT_LIMIT,
        help="calls in flight to one platform at most, shared fairly by its installations "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=_positive,
        metavar="N",
        default=DEFAULT_WORKERS,
        help="objects of one kind reconciled at once at most; caps the load on the API server "
        "(default %(default)s)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("--text-logs", action="store_true", help="plain text logs instead of JSON")
    election = parser.add_argument_group(
        "leader election",
        "Several replicas with --leader-election: one holds a coordination.k8s.io/v1 Lease and "
        "reconciles, the others wait as standbys. Needs get, create and update on leases in the "
        "Lease's namespace.",
    )
    election.add_argument(
        "--leader-election",
        action="store_true",
        help="reconcile only while holding the Lease (off: a single replica reconciles at once)",
    )
    election.add_argument(
        "--leader-election-namespace",
        metavar="NS",
        help=f"the Lease's namespace (default ${ENV_POD_NAMESPACE}, else the service account's "
        "namespace, else default)",
    )
    election.add_argument(
        "--leader-election-id",
        metavar="NAME",
        default=DEFAULT_LEASE_NAME,
        help="the Lease's name; operators that share it share one leader (default %(default)s)",
    )
    election.add_argument(
        "--leader-election-lease-seconds",
        type=int,
        metavar="SECONDS",
        default=DEFAULT_LEASE_SECONDS,
        help="how long a standby waits after the last renewal it saw before it takes over "
        "(default %(default)s)",
    )
    election.add_argument(
        "--leader-election-renew-seconds",
        type=float,
        metavar="SECONDS",
        default=DEFAULT_RENEW_SECONDS,
        help="the leader stops and exits when it could not renew for this long; less than the lease "
        "(default %(default)s)",
    )
    election.add_argument(
        "--leader-election-retry-seconds",
        type=float,
        metavar="SECONDS",
        default=DEFAULT_RETRY_SECONDS,
        help="how often the leader renews and a standby tries (default %(default)s)",
    )


def options_from(args: argparse.Namespace) -> RunOptions:
    """RunOptions from parsed flags; the token comes from the file or the environment."""
    token = os.environ.get(ENV_TOKEN) or None
    if args.platform_token_file is not None:
        token = args.platform_token_file.read_text().strip() or None
    if not args.namespace and not args.all_namespaces:
        raise SystemExit("bundlectl operator run: give --namespace NS (repeatable) or --all-namespaces")
    if (args.webhook_port is None) != (args.webhook_cert_dir is None):
        raise SystemExit("bundlectl operator run: give --webhook-port and --webhook-cert-dir together")
    return RunOptions(
        namespaces=tuple(args.namespace),
        all_namespaces=args.all_namespaces,
        platform_url=args.platform_url or None,
        platform_token=token,
        platform_token_file=args.platform_token_file,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        allow_private_sources=args.allow_private_sources,
        host=args.probe_host,
        log_level=args.log_level,
        json_logs=not args.text_logs,
        leader_election=_leader_election_from(args),
        platform_concurrency=args.platform_concurrency,
        workers=args.workers,
        webhook_port=args.webhook_port,
        webhook_cert_dir=args.webhook_cert_dir,
        webhook_certificates=_certificates_from(args),
        webhook_failure_policy=args.webhook_failure_policy,
        webhook_timeout_seconds=args.webhook_timeout_seconds,
        abandon_uninstall_after=args.abandon_uninstall_after,
    )


def _certificates_from(args: argparse.Namespace) -> CertificateSettings | None:
    if args.webhook_cert_secret is None:
        return None
    if not (args.webhook_cert_dir and args.webhook_service and args.webhook_configuration):
        raise SystemExit(
            "bundlectl operator run: --webhook-cert-secret needs --webhook-cert-dir, --webhook-service "
            "and --webhook-configuration"
        )
    return CertificateSettings(
        namespace=default_namespace(),
        secret=args.webhook_cert_secret,
        service=args.webhook_service,
        configuration=args.webhook_configuration,
        cert_dir=args.webhook_cert_dir,
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def _leader_election_from(args: argparse.Namespace) -> LeaderElectionOptions | None:
    if not args.leader_election:
        return None
    problem = lease_timing_problem(
        args.leader_election_lease_seconds,
        args.leader_election_renew_seconds,
        args.leader_election_retry_seconds,
    )
    if problem is not None:
        raise SystemExit(f"bundlectl operator run: {problem}")
    if not args.leader_election_id:
        raise SystemExit("bundlectl operator run: --leader-election-id must not be empty")
    return LeaderElectionOptions(
        namespace=args.leader_election_namespace or default_namespace(),
        lease_id=args.leader_election_id,
        lease_seconds=args.leader_election_lease_seconds,
        renew_seconds=args.leader_election_renew_seconds,
        retry_seconds=args.leader_election_retry_seconds,
    )


async def run_operator(options: RunOptions) -> None:
    """Run until SIGTERM or SIGINT; then stop handlers and close connections.

    With leader election, a leader that lost its Lease ends with ``SystemExit(EXIT_LOST_LEASE)``.
    """
    configure_logging(options.log_level, options.json_logs)
    # One line per HTTP request and per successful kopf handler drowns what matters; failures and
    # retries still come through at WARNING and above, and the reconcilers log each outcome.
    if options.log_level.upper() != "DEBUG":
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    connection = load_connection()
    kube = Kube(connection)
    # The transport sees calls that got no answer too: an outage shows in the call counts.
    platforms = PlatformPool(
        concurrency=options.platform_concurrency,
        transport=lambda: InstrumentedTransport(AiohttpTransport(limit=options.platform_concurrency * 2)),
    )
    load = PlatformLoad(platforms)
    REGISTRY.register(load)
    try:
        trust = tls_context()
    except ValueError as exc:
        raise SystemExit(f"bundlectl operator run: {exc}") from None
    sources = SourceSettings(allow_private_sources=options.allow_private_sources, verify=trust)
    settings = OperatorSettings(
        options.platform_url,
        options.platform_token,
        sources,
        options.platform_token_file,
        abandon_uninstall_after=options.abandon_uninstall_after,
    )
    events = Events(kube)
    installations = InstallationReconciler(kube, settings, platforms, events, on_status=handlers.GAUGES.set)
    liveness = Liveness()
    handlers.RUNTIME = handlers.Runtime(
        kube=kube,
        installations=installations,
        bundles=BundleReconciler(kube, sources, events),
        liveness=liveness,
        default_platform_url=options.platform_url,
        workers=options.workers,
    )
    stop = asyncio.Event()
    ready = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    election = options.leader_election
    lease_kube: Kube | None = None
    elector: LeaderElector | None = None
    if election is not None:
        # A client of its own: renewals never queue behind the reconcilers' calls.
        lease_kube = Kube(connection, timeout=election.renew_seconds)
        elector = LeaderElector(
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
    METRICS.leader.set(1 if elector is None else 0)
    runners: list[Stoppable] = []
    if options.metrics_port is not None:
        runners.append(await serve_metrics(options.host, options.metrics_port))
    if options.health_port is not None:
        runners.append(
            await serve_health(options.host, options.health_port, liveness, _readiness(ready, elector))
        )
    keeper: asyncio.Task[None] | None = None
    if options.webhook_certificates is not None:
        certificates = CertificateKeeper(kube, options.webhook_certificates)
        await certificates.ensure()  # the files must be there before the server loads them
        keeper = asyncio.create_task(certificates.follow(), name="webhook-certificate-keeper")
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
    log.info(
        "operator starting: %s, default platform %s%s",
        "all namespaces" if options.all_namespaces else "namespaces " + ", ".join(options.namespaces),
        options.platform_url or "(none)",
        "" if election is None else f", leader election on lease {election.namespace}/{election.lease_id}",
    )
    beat = asyncio.create_task(_heartbeat(kube, liveness))
    tick = asyncio.create_task(ticking(liveness), name="liveness-tick")
    lag = asyncio.create_task(_watch_checks(kube, options, liveness, ready), name="watch-lag")
    lost: LostLease | None = None
    try:
        if elector is None:
            await _run_kopf(options, stop, ready)
        else:
            lost = await _lead_then_run(options, elector, stop, ready)
    finally:
        beat.cancel()
        tick.cancel()
        lag.cancel()
        if keeper is not None:
            keeper.cancel()
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


async def _run_kopf(options: RunOptions, stop: asyncio.Event, ready: asyncio.Event) -> None:
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
    options: RunOptions, elector: LeaderElector, stop: asyncio.Event, ready: asyncio.Event
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
    operator = asyncio.create_task(_run_kopf(options, stop, ready), name="kopf operator")
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
    checker = WatchLag(handlers.DELIVERIES, WATCHED_PLURALS, limit=WATCH_LAG_LIMIT)

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
