"""`python -m bundle_operator.devcluster`: run a dev cluster in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from bundle_operator.devcluster.binaries import BinariesNotFound, locate
from bundle_operator.devcluster.cluster import ClusterStartError, DevCluster


class _Stop(Exception):
    """Raised by the SIGTERM and SIGHUP handlers, so they stop the cluster as Ctrl-C does."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Start the cluster, print how to reach it, and stop it on Ctrl-C, SIGTERM or a crash."""
    parser = argparse.ArgumentParser(prog="python -m bundle_operator.devcluster", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, help="where to write the admin kubeconfig")
    parser.add_argument("--workdir", type=Path, help="keep data, certificates and logs here")
    parser.add_argument("--kubernetes-version", help="e.g. v1.37.2 (default: newest cached)")
    parser.add_argument("--etcd-version", help="e.g. v3.6.16 (default: newest cached)")
    parser.add_argument("--no-controller-manager", action="store_true", help="run without it")
    args = parser.parse_args(argv)

    try:
        binaries = locate(args.kubernetes_version, args.etcd_version)
    except BinariesNotFound as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 2
    kubeconfig = args.kubeconfig.resolve() if args.kubeconfig else None
    cluster = DevCluster(
        binaries, args.workdir, kubeconfig, controller_manager=not args.no_controller_manager
    )
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGHUP, _raise_stop)
    try:
        cluster.start()
        print(f"devcluster: kube-apiserver ready at {cluster.server} in {cluster.ready_seconds:.1f} s")
        print(f"devcluster: logs in {cluster.workdir / 'logs'}")
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        print("devcluster: Ctrl-C stops it", flush=True)
        while (crashed := cluster.exited()) is None:
            time.sleep(0.5)
        print(f"devcluster: {crashed} exited:\n{cluster.log_tail(crashed)}", file=sys.stderr)
        return 1
    except ClusterStartError as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        print("\ndevcluster: stopping", flush=True)
        return 0
    finally:
        # A second Ctrl-C must not leave half the components running.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.stop()
        print("devcluster: stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
