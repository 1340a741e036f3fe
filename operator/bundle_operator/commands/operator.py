"""bundlectl operator run: the Kubernetes operator."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``operator run``."""
    parser = sub.add_parser("operator", help="run the Kubernetes operator")
    actions = parser.add_subparsers(dest="operator_command", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="watch Bundles and BundleInstallations and install them (KUBECONFIG or in-cluster)",
        description="Watch Bundles and BundleInstallations and install them into the platform. Reads "
        "the cluster from KUBECONFIG or the in-cluster service account; stops cleanly on SIGTERM.",
    )
    from bundle_operator.k8s.process.options import add_arguments

    add_arguments(run)
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from bundle_operator.k8s.process.options import options_from
    from bundle_operator.k8s.process.run import run_operator

    asyncio.run(run_operator(options_from(args)))
    return 0
