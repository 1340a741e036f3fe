"""Benchmark: a fleet under chaos, on the dev cluster and the reference platform.

Starts the dev cluster (binaries from `make envtest`), a restartable reference platform with fault
injection and the operator; installs COUNT BundleInstallations (COUNT/WORKSPACES bundles, each in
every workspace), then for MINUTES draws faults from a seeded random schedule (platform 5xx and
slow writes, a platform outage, the operator SIGKILLed, kube-apiserver restarted, the setup Secret
rotated, a Bundle updated; see tests/e2e/chaos.py), lets everything settle and checks what must
hold. Prints each fault as it happens, and last, for scripts:

    chaos: N installations, K faults, orphans O, duplicates D, stuck S, leaked L

    .venv/bin/python bench/chaos.py [--count 200] [--workspaces 4] [--minutes 10] [--seed 1] [--keep]

Exits 1 when any of O, D, S, L is not zero.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.control_plane import ETCD_VERSION, KUBERNETES_VERSION  # noqa: E402
from tests.e2e.chaos import ChaosPlan, ChaosRun  # noqa: E402
from tests.e2e.operator_harness import OperatorProcess, apply_crds  # noqa: E402
from tests.e2e.platform_control import RestartablePlatform  # noqa: E402

from bundle_operator.devcluster import DevCluster, Kubectl, locate  # noqa: E402

NAMESPACE = "chaos"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200, help="installations (a multiple of --workspaces)")
    parser.add_argument("--workspaces", type=int, default=4)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long faults are drawn")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settle", type=float, default=600.0, help="seconds to converge afterwards")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, db)")
    args = parser.parse_args()
    if args.count <= 0 or args.workspaces <= 0 or args.count % args.workspaces:
        parser.error("--count must be a positive multiple of --workspaces")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below stops everything

    work = Path(tempfile.mkdtemp(prefix="bench-chaos-"))
    plan = ChaosPlan(
        installations=args.count,
        workspaces=args.workspaces,
        seconds=args.minutes * 60,
        seed=args.seed,
        settle=args.settle,
    )
    print(
        f"chaos: {args.count} installations in {args.workspaces} workspaces, faults for "
        f"{args.minutes:g} min, seed {args.seed}; work folder {work}",
        flush=True,
    )
    cluster = DevCluster(locate(KUBERNETES_VERSION, ETCD_VERSION), workdir=work / "cluster")
    platform = RestartablePlatform(work / "platform.db", work)
    run: ChaosRun | None = None
    clean = False
    try:
        cluster.start()
        kubectl = Kubectl(cluster.binaries.kubectl, cluster.kubeconfig)
        apply_crds(kubectl)
        kubectl.run("create", "namespace", NAMESPACE)
        platform.start()

        def start_operator(log: Path) -> OperatorProcess:
            return OperatorProcess(
                cluster.kubeconfig, platform.url, log, scope=("--namespace", NAMESPACE)
            ).start(timeout=120)

        run = ChaosRun(
            plan,
            cluster,
            kubectl,
            platform,
            NAMESPACE,
            work,
            start_operator,
            say=lambda s: print(s, flush=True),
        )
        run.setup()
        started = time.monotonic()
        result = run.run()
        print(
            f"chaos: settled {result.converged_after:.1f} s after the last fault"
            if result.converged_after is not None
            else f"chaos: not settled {plan.settle:.0f} s after the last fault",
            flush=True,
        )
        for problem in result.problems()[:50]:
            print(f"  {problem}")
        print(f"chaos: run took {time.monotonic() - started:.0f} s; logs in {work}")
        print(result.line())
        clean = not result.problems()
        return 0 if clean else 1
    finally:
        if run is not None:
            run.stop()
        platform.stop()
        cluster.stop()
        if clean and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
