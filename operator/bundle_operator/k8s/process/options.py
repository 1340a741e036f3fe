"""The flags of ``operator run`` and the options they make."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bundle_operator.k8s.process.leader import (
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RENEW_SECONDS,
    DEFAULT_RETRY_SECONDS,
    ENV_POD_NAMESPACE,
    default_namespace,
    lease_timing_problem,
)
from bundle_operator.k8s.reconcile import ABANDON_UNINSTALL_AFTER
from bundle_operator.k8s.webhook.certs import CertificateSettings
from bundle_operator.k8s.webhook.server import FAILURE_POLICIES, WEBHOOK_TIMEOUT_SECONDS
from bundle_operator.platform.client import ENV_TOKEN, ENV_URL
from bundle_operator.platform.gate import DEFAULT_LIMIT

# Reconciles of one kind at once: enough to keep a slow platform busy, few enough that the API
# server sees a bounded number of status writes and Secret writes in flight.
DEFAULT_WORKERS = 64
# How often an Endpoint's served tools and members' health are read again: how soon Degraded
# follows a member going down or coming back.
ENV_ENDPOINT_REFRESH = "BUNDLE_OPERATOR_ENDPOINT_REFRESH_SECONDS"
DEFAULT_ENDPOINT_REFRESH_SECONDS = 30.0
ENDPOINT_REFRESH_RANGE = (1.0, 3600.0)


def endpoint_refresh_seconds(environ: Mapping[str, str]) -> float:
    """The Endpoint refresh interval the environment sets (1 to 3600 s), else 30 s."""
    raw = environ.get(ENV_ENDPOINT_REFRESH, "").strip()
    if not raw:
        return DEFAULT_ENDPOINT_REFRESH_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    low, high = ENDPOINT_REFRESH_RANGE
    if not low <= value <= high:
        raise ValueError(f"{ENV_ENDPOINT_REFRESH} must be a number of seconds from 1 to 3600, not {raw!r}")
    return value


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
    # An OTLP/HTTP base URL; None: the standard OTEL_* variables decide (telemetry/tracing.py).
    otlp_endpoint: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``operator run``."""
    _add_scope_and_platform(parser)
    _add_probes(parser)
    _add_webhook(parser)
    _add_limits_and_logs(parser)
    _add_leader_election(parser)


def _add_scope_and_platform(parser: argparse.ArgumentParser) -> None:
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


def _add_probes(parser: argparse.ArgumentParser) -> None:
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


def _add_webhook(parser: argparse.ArgumentParser) -> None:
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


def _add_limits_and_logs(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send traces over OTLP/HTTP to this collector base URL (/v1/traces is appended); without it "
        "the standard OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) turns tracing on, and with "
        "neither tracing is off",
    )
    parser.add_argument("--text-logs", action="store_true", help="plain text logs instead of JSON")


def _add_leader_election(parser: argparse.ArgumentParser) -> None:
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
    try:
        endpoint_refresh_seconds(os.environ)
    except ValueError as exc:
        raise SystemExit(f"bundlectl operator run: {exc}") from None
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
        otlp_endpoint=args.otlp_endpoint or None,
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
