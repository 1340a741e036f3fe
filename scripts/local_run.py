"""`make run`: the operator at work on the embedded defaults.

1. The cluster: `$KUBECONFIG` when it is set, else a local control plane (etcd, kube-apiserver and
   kube-controller-manager from `make envtest`) in tmp/run/devcluster.
2. The reference platform (data in tmp/run/platform.db) with a loopback stand-in for raw GitHub
   content, so the example's GitHub skill resolves without internet.
3. The CRDs from crds/, then the operator (`python -m bundle_operator`, log in tmp/run/operator.log)
   watching namespace bundle-demo.
4. examples/k8s/ applied in bundle-demo; progress printed every second until the BundleInstallation
   is Ready for its current generation.

Everything then keeps running until Ctrl-C (or SIGTERM), and stops in reverse order.
RUN_ONCE=1 stops as soon as the installation is Ready (exit 0) or failed (exit 1).

A fresh local control plane comes with a fresh platform database: a platform kept from an earlier
run would hold entities the new cluster knows nothing of. On an existing cluster the database is
kept, since that cluster's installation records refer to it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

from github_standin import GitHubStandIn

from bundle_operator.devcluster import (
    BinariesNotFound,
    ClusterStartError,
    DevCluster,
    Kubectl,
    KubectlError,
    locate,
)
from bundle_operator.devcluster.binaries import find_kubectl
from bundle_operator.reference_platform.process import PlatformProcess, start_platform

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "tmp" / "run"
DEVCLUSTER_DIR = RUN_DIR / "devcluster"
PLATFORM_DB = RUN_DIR / "platform.db"
OPERATOR_LOG = RUN_DIR / "operator.log"
# What a second shell sources to reach this run's cluster and platform (the port is new every run).
ENV_FILE = RUN_DIR / "env"
CRDS = ROOT / "crds"
EXAMPLES = ROOT / "examples" / "k8s"
ENVTEST = ROOT / "tests" / "envtest"
NAMESPACE = "bundle-demo"
INSTALLATION = "github-triage"
CRD_NAMES = (
    "bundles.bundle-operator.dev",
    "bundleinstallations.bundle-operator.dev",
    "endpoints.bundle-operator.dev",
)
READY_TIMEOUT = 180.0
OPERATOR_START_TIMEOUT = 60.0
LOG_TAIL_LINES = 40


class Stop(Exception):
    """Raised by the SIGINT and SIGTERM handlers: unwinds to the cleanup in main()."""


class Failed(Exception):
    """A step failed; the message says which and why."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def say(message: str) -> None:
    print(message, flush=True)


def pinned_version(go_mod: Path, module: str) -> str:
    """The version of `module` that a wrapper go.mod of tests/envtest requires (as mk/envtest.mk reads it)."""
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", go_mod.read_text(), re.MULTILINE)
    if match is None:
        raise Failed(f"{go_mod} does not require {module}")
    return match.group(1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_ok(url: str) -> bool:
    # No proxy: a proxy set for package registries must not see loopback probes.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=1) as response:
            status: int = response.status
            return status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


class EnvKubectl(Kubectl):
    """kubectl on the cluster `$KUBECONFIG` names (which may list several files), without --kubeconfig."""

    def command(self, *args: str) -> list[str]:
        return [str(self.binary), *args]


class OperatorProcess:
    """`python -m bundle_operator` as a child, its log in a file."""

    def __init__(self, kubeconfig: str, platform_url: str, log: Path) -> None:
        self.kubeconfig = kubeconfig
        self.platform_url = platform_url
        self.log = log
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = OPERATOR_START_TIMEOUT) -> OperatorProcess:
        env = {**os.environ, "KUBECONFIG": self.kubeconfig, "PYTHONUNBUFFERED": "1"}
        env.pop("BUNDLE_PLATFORM_TOKEN", None)
        argv = [
            sys.executable,
            "-m",
            "bundle_operator",
            "--namespace",
            NAMESPACE,
            "--platform-url",
            self.platform_url,
            "--health-port",
            str(self.health_port),
            "--metrics-port",
            str(self.metrics_port),
            "--probe-host",
            "127.0.0.1",
            "--text-logs",
        ]
        with self.log.open("w") as out:
            # A session of its own: Ctrl-C reaches only this script, which then stops it with SIGTERM.
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=RUN_DIR,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not http_ok(f"http://127.0.0.1:{self.health_port}/readyz"):
            if self.process.poll() is not None:
                raise Failed(f"the operator exited with {self.process.returncode}:\n{log_tail(self.log)}")
            if time.monotonic() > deadline:
                raise Failed(f"the operator's /readyz not 200 after {timeout:.0f} s:\n{log_tail(self.log)}")
            time.sleep(0.2)
        return self

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=10)


# --- the steps ----------------------------------------------------------------------------------


def start_cluster() -> tuple[DevCluster | None, Kubectl, str]:
    """The existing cluster of $KUBECONFIG, or a fresh dev cluster; kubectl and the KUBECONFIG value."""
    existing = os.environ.get("KUBECONFIG")
    if existing:
        try:
            kubectl: Kubectl = EnvKubectl(find_kubectl(), Path(existing))
        except BinariesNotFound as error:
            raise Failed(str(error)) from None
        say(f"cluster: the existing one of KUBECONFIG={existing}")
        try:
            kubectl.run("version", timeout=15)
        except (KubectlError, subprocess.TimeoutExpired) as error:
            raise Failed(f"the cluster of KUBECONFIG does not answer: {error}") from None
        return None, kubectl, existing
    kube_version = pinned_version(ENVTEST / "kube" / "go.mod", "k8s.io/kubernetes")
    etcd_version = pinned_version(ENVTEST / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3")
    try:
        binaries = locate(kube_version, etcd_version)
    except BinariesNotFound as error:
        raise Failed(f"the local control plane needs its binaries: {error}") from None
    # Throw-away: a new CA and a new etcd every run, no state of an earlier run to trip over.
    shutil.rmtree(DEVCLUSTER_DIR, ignore_errors=True)
    say(f"cluster: starting kube-apiserver {kube_version} and etcd {etcd_version} in {DEVCLUSTER_DIR}")
    cluster = DevCluster(binaries, workdir=DEVCLUSTER_DIR)
    try:
        cluster.start()
    except ClusterStartError as error:
        raise Failed(f"the local control plane did not start: {error}") from None
    logs = DEVCLUSTER_DIR / "logs"
    say(f"cluster: {cluster.server} ready in {cluster.ready_seconds:.1f} s (logs in {logs})")
    return cluster, Kubectl(binaries.kubectl, cluster.kubeconfig), str(cluster.kubeconfig)


def apply_crds(kubectl: Kubectl) -> None:
    say(f"\n$ kubectl apply --server-side -f {CRDS.relative_to(ROOT)}/")
    say(kubectl.run("apply", "--server-side", "-f", str(CRDS)).stdout.rstrip())
    for crd in CRD_NAMES:
        kubectl.wait_for_condition("crd", crd, "Established", timeout=30)
    say("CRDs established")


def create_namespace(kubectl: Kubectl) -> None:
    result = kubectl.run("create", "namespace", NAMESPACE, check=False)
    if result.returncode == 0:
        say(f"namespace/{NAMESPACE} created")
    elif "AlreadyExists" in result.stderr or "already exists" in result.stderr:
        say(f"namespace/{NAMESPACE} exists")
    else:
        raise KubectlError(["create", "namespace", NAMESPACE], result.returncode, result.stderr)


def ready_condition(obj: dict[str, Any]) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            found: dict[str, Any] = cond
            return found
    return {}


def wait_ready(kubectl: Kubectl, operator: OperatorProcess, cluster: DevCluster | None) -> dict[str, Any]:
    """Print progress every second until Ready=True for the current generation; the object."""
    started = time.monotonic()
    while True:
        elapsed = time.monotonic() - started
        obj = kubectl.get_or_none("bundleinstallation", INSTALLATION, NAMESPACE)
        if obj is None:
            say(f"[{elapsed:5.1f}s] bi/{INSTALLATION}: not found yet")
        else:
            status = obj.get("status") or {}
            ready = ready_condition(obj)
            entities = len(status.get("entities") or [])
            generation = obj["metadata"].get("generation")
            observed = status.get("observedGeneration")
            state = ready.get("status")
            what = (
                f"Ready={state} {ready.get('reason', '')}: {ready.get('message', '')}"
                if ready
                else "no Ready condition yet"
            )
            say(f"[{elapsed:5.1f}s] {what} | {entities} entities | generation {observed}/{generation}")
            if state == "True" and observed == generation:
                return obj
        if (code := operator.exited()) is not None:
            raise Failed(f"the operator exited with {code}")
        if cluster is not None and (component := cluster.exited()) is not None:
            raise Failed(f"{component} exited:\n{cluster.log_tail(component)}")
        if elapsed > READY_TIMEOUT:
            raise Failed(f"bi/{INSTALLATION} not Ready after {READY_TIMEOUT:.0f} s")
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started - elapsed)))


def report(kubectl: Kubectl, obj: dict[str, Any], seconds: float) -> None:
    say(f"\n$ kubectl get bdl,bi -n {NAMESPACE} -o wide")
    say(kubectl.run("get", "bdl,bi", "-n", NAMESPACE, "-o", "wide").stdout.rstrip())
    say("\nentities on the platform:")
    for entity in (obj.get("status") or {}).get("entities") or []:
        say(f"  {entity.get('kind', '?'):<12} {entity.get('key', '?'):<20} {entity.get('id')}")
    say(f"\nbi/{INSTALLATION} Ready {seconds:.1f} s after `kubectl apply`")


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    run_once = bool(os.environ.get("RUN_ONCE"))
    cluster: DevCluster | None = None
    standin: GitHubStandIn | None = None
    platform: PlatformProcess | None = None
    operator: OperatorProcess | None = None
    code = 0
    try:
        cluster, kubectl, kubeconfig = start_cluster()

        standin = GitHubStandIn().start()
        if cluster is not None:
            for leftover in RUN_DIR.glob(f"{PLATFORM_DB.name}*"):
                leftover.unlink()
        try:
            platform = start_platform(
                PLATFORM_DB, "--github-base-url", standin.url, log=RUN_DIR / "platform.log"
            )
        except RuntimeError as error:
            raise Failed(str(error)) from None
        say(f"platform: {platform.url} (data in {PLATFORM_DB}, GitHub stand-in at {standin.url})")

        ENV_FILE.write_text(
            f"export KUBECONFIG={shlex.quote(kubeconfig)}\nexport BUNDLE_PLATFORM_URL={platform.url}\n"
        )
        apply_crds(kubectl)

        operator = OperatorProcess(kubeconfig, platform.url, OPERATOR_LOG)
        operator.start()
        say(
            f"operator: ready (health :{operator.health_port}, metrics :{operator.metrics_port},"
            f" log in {OPERATOR_LOG})"
        )

        say("")
        create_namespace(kubectl)
        say(f"$ kubectl apply -n {NAMESPACE} -f {EXAMPLES.relative_to(ROOT)}/")
        existed = kubectl.get_or_none("bundleinstallation", INSTALLATION, NAMESPACE) is not None
        applied = time.monotonic()
        say(kubectl.run("apply", "-n", NAMESPACE, "-f", str(EXAMPLES)).stdout.rstrip())
        obj = wait_ready(kubectl, operator, cluster)
        report(kubectl, obj, time.monotonic() - applied)
        if existed:
            say(f"(bi/{INSTALLATION} existed before this run: its status may date from an earlier operator)")

        if run_once:
            say("\nRUN_ONCE: stopping")
            return 0
        say(
            "\nEverything keeps running. In another shell:\n"
            f"  . {ENV_FILE.relative_to(ROOT)}    # KUBECONFIG and BUNDLE_PLATFORM_URL of this run\n"
            f"  kubectl get bi -n {NAMESPACE} -o yaml\n"
            f"  tail -f {OPERATOR_LOG}\n"
            "Ctrl-C stops it all."
        )
        while True:
            if (exit_code := operator.exited()) is not None:
                raise Failed(f"the operator exited with {exit_code}")
            if cluster is not None and (component := cluster.exited()) is not None:
                raise Failed(f"{component} exited:\n{cluster.log_tail(component)}")
            time.sleep(1)
    except Stop as signum:
        say(f"\n{signum}: stopping")
        code = 0
    except (Failed, KubectlError) as error:
        print(f"\nmake run failed: {error}", file=sys.stderr, flush=True)
        if operator is not None:
            print(f"\nlast lines of {OPERATOR_LOG}:\n{log_tail(OPERATOR_LOG)}", file=sys.stderr, flush=True)
        code = 1
    finally:
        # A second Ctrl-C must not leave half of it running.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(operator, platform, standin, cluster)
    return code


def stop_all(
    operator: OperatorProcess | None,
    platform: PlatformProcess | None,
    standin: GitHubStandIn | None,
    cluster: DevCluster | None,
) -> None:
    """Stop what was started, last started first; each step runs even if an earlier one failed."""
    steps: list[tuple[str, Any]] = []
    if operator is not None:
        steps.append(("operator", operator.stop))
    if platform is not None:
        steps.append(("platform", platform.stop))
    if standin is not None:
        steps.append(("GitHub stand-in", standin.stop))
    if cluster is not None:
        steps.append(("cluster", cluster.stop))
    for name, stop in steps:
        try:
            stop()
        except Exception as error:
            print(f"stopping the {name}: {error}", file=sys.stderr, flush=True)
    if steps:
        say(f"stopped: {', '.join(name for name, _ in steps)}")


if __name__ == "__main__":
    sys.exit(main())
