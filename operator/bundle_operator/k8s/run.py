"""``bundlectl operator run``: settings, the kopf operator loop, probes, metrics, clean SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bundle_operator.k8s import handlers
from bundle_operator.k8s.bundle import BundleReconciler
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.health import Liveness, serve_health
from bundle_operator.k8s.installation import InstallationReconciler, OperatorSettings
from bundle_operator.k8s.kube import Kube, load_connection
from bundle_operator.k8s.logs import configure_logging
from bundle_operator.k8s.metrics import platform_event_hooks, serve_metrics
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.sources import SourceSettings
from bundle_operator.platform.client import ENV_TOKEN, ENV_URL

log = logging.getLogger(__name__)


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
        "--allow-private-sources",
        action="store_true",
        help="UNSAFE, for tests and local setups only: let url and mcpb sources reach loopback and "
        "private networks (an SSRF risk wherever Bundles come from untrusted users)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("--text-logs", action="store_true", help="plain text logs instead of JSON")


def options_from(args: argparse.Namespace) -> RunOptions:
    """RunOptions from parsed flags; the token comes from the file or the environment."""
    token = os.environ.get(ENV_TOKEN) or None
    if args.platform_token_file is not None:
        token = args.platform_token_file.read_text().strip() or None
    if not args.namespace and not args.all_namespaces:
        raise SystemExit("bundlectl operator run: give --namespace NS (repeatable) or --all-namespaces")
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
    )


async def run_operator(options: RunOptions) -> None:
    """Run until SIGTERM or SIGINT; then stop handlers and close connections."""
    import kopf

    configure_logging(options.log_level, options.json_logs)
    # One line per HTTP request and per successful kopf handler drowns what matters; failures and
    # retries still come through at WARNING and above, and the reconcilers log each outcome.
    if options.log_level.upper() != "DEBUG":
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    kube = Kube(load_connection())
    platforms = PlatformPool(event_hooks=platform_event_hooks())
    sources = SourceSettings(allow_private_sources=options.allow_private_sources)
    settings = OperatorSettings(
        options.platform_url, options.platform_token, sources, options.platform_token_file
    )
    events = Events(kube)
    installations = InstallationReconciler(kube, settings, platforms, events, on_status=handlers.GAUGES.set)
    liveness = Liveness()
    handlers.RUNTIME = handlers.Runtime(
        kube=kube,
        installations=installations,
        bundles=BundleReconciler(kube, sources),
        liveness=liveness,
        default_platform_url=options.platform_url,
    )
    stop = asyncio.Event()
    ready = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runners = []
    if options.metrics_port is not None:
        runners.append(await serve_metrics(options.host, options.metrics_port))
    if options.health_port is not None:
        runners.append(await serve_health(options.host, options.health_port, liveness, ready.is_set))
    log.info(
        "operator starting: %s, default platform %s",
        "all namespaces" if options.all_namespaces else "namespaces " + ", ".join(options.namespaces),
        options.platform_url or "(none)",
    )
    beat = asyncio.create_task(_heartbeat(kube, liveness))
    try:
        await kopf.operator(
            registry=handlers.REGISTRY,
            clusterwide=options.all_namespaces,
            namespaces=list(options.namespaces),
            standalone=True,
            stop_flag=stop,
            ready_flag=ready,
        )
    finally:
        beat.cancel()
        for runner in runners:
            await runner.cleanup()
        await platforms.aclose()
        await kube.aclose()
        log.info("operator stopped")


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
