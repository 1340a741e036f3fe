"""Benchmark: the operator on a real control plane with the reference platform.

Starts the dev cluster (binaries from `make envtest`), the reference platform and the operator,
then prints: the time from `kubectl apply` of the github-triage example to Ready (median of
several fresh installations), the operator's RSS idle and after those installations, and the
platform calls one settled installation makes per drift interval.

    .venv/bin/python bench/k8s_operator.py [--installs 10] [--drift-interval 10]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.control_plane import ETCD_VERSION, KUBERNETES_VERSION  # noqa: E402
from tests.e2e.conftest import GITHUB_FILES  # noqa: E402
from tests.e2e.operator_harness import (  # noqa: E402
    EXAMPLES,
    OperatorProcess,
    apply_crds,
    wait_ready,
)
from tests.integration.platform.platform_harness import github_stub, start_platform  # noqa: E402

from bundle_operator.devcluster import DevCluster, Kubectl, locate  # noqa: E402


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def platform_calls(metrics: str) -> float:
    """The sum of bundle_operator_platform_calls_total over every label set."""
    total = 0.0
    for line in metrics.splitlines():
        match = re.match(r"^bundle_operator_platform_calls_total\{.*\} ([0-9.e+]+)$", line)
        if match:
            total += float(match.group(1))
    return total


def installation(tmp: Path, name: str, workspace: str, interval: str) -> Path:
    text = (EXAMPLES / "github-triage-installation.yaml").read_text()
    text = text.replace("name: github-triage\nspec:", f"name: {name}\nspec:")
    text = text.replace("workspace: acme", f"workspace: {workspace}").replace(
        "interval: 5m", f"interval: {interval}"
    )
    out = tmp / f"{name}.yaml"
    out.write_text(text)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installs", type=int, default=10)
    parser.add_argument("--drift-interval", type=int, default=10, help="seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    cluster = DevCluster(locate(KUBERNETES_VERSION, ETCD_VERSION), workdir=work / "cluster").start()
    kubectl = Kubectl(cluster.binaries.kubectl, cluster.kubeconfig)
    with github_stub(GITHUB_FILES) as stub:
        platform = start_platform(work / "platform.db", "--github-base-url", stub.url)
        operator = OperatorProcess(
            cluster.kubeconfig, platform.url, work / "operator.log", scope=("--all-namespaces",)
        )
        try:
            apply_crds(kubectl)
            operator.start()
            assert operator.process is not None
            time.sleep(5)
            idle = rss_mib(operator.process.pid)
            ns = "bench"
            kubectl.run("create", "namespace", ns)
            kubectl.apply(EXAMPLES / "github-triage-secret.yaml", namespace=ns)
            kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=ns)
            wait_ready(kubectl, "bundle", "github-triage", ns)
            times = []
            for i in range(args.installs):
                path = installation(work, f"triage-{i}", f"bench-{i}", "1h")
                started = time.monotonic()
                kubectl.apply(path, namespace=ns)
                wait_ready(kubectl, "bundleinstallation", f"triage-{i}", ns, timeout=120)
                times.append(time.monotonic() - started)
            after = rss_mib(operator.process.pid)
            path = installation(work, "drifty", "bench-drift", f"{args.drift_interval}s")
            kubectl.apply(path, namespace=ns)
            wait_ready(kubectl, "bundleinstallation", "drifty", ns, timeout=120)
            time.sleep(args.drift_interval + 2)  # let the first timer run settle
            before = platform_calls(operator.metrics())
            periods = 3
            time.sleep(args.drift_interval * periods)
            per_interval = (platform_calls(operator.metrics()) - before) / periods
            print(
                f"kubectl apply -> Ready (github-triage, {len(times)} installs): "
                f"median {statistics.median(times):.2f} s, min {min(times):.2f} s, max {max(times):.2f} s"
            )
            print(f"operator RSS: idle {idle:.1f} MiB, after {len(times) + 1} installations {after:.1f} MiB")
            print(f"platform calls per settled installation per drift interval: {per_interval:.1f}")
        finally:
            operator.stop()
            platform.stop()
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
