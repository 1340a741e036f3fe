"""Benchmark: a fleet of BundleInstallations applied at once, on the dev cluster and the reference platform.

Starts the dev cluster (binaries from `make envtest`, with an audit log so API-server requests can
be told apart by client), the reference platform with its call counters on (`--count-calls`) and
the operator, then applies COUNT BundleInstallations of a 12-entity bundle (COUNT/WORKSPACES
distinct bundles, each installed into every workspace) with one `kubectl apply --server-side`, and
prints:

- seconds from the apply to every installation Ready (from one watch of the server-side table);
- the operator's peak RSS (VmHWM), and the CPU seconds of each process during the install;
- API-server requests per installation during the install, from the audit log, by client, verb
  and resource;
- platform calls per installation during the install, counted at the platform, by method, kind
  and operation, against the limit: platform entities created + disabled triggers + 3;
- once settled, platform calls per drift interval over --intervals intervals, by kind and
  workspace, and the most lists of one kind in one workspace per interval (limit 1).

Targets (issue 13): 1,000 Ready within 120 s, operator RSS under 300 MB, drift at most one list per
kind per workspace per interval, install calls per installation at most the limit above. MB here
is MiB (2^20 bytes). The last line is for scripts:

    scale: N installations Ready in S s; operator peak RSS M MB; drift lists per workspace per
    interval L (limit K)                                                    (on one line)

    .venv/bin/python bench/scale.py [--count 300] [--workspaces 10] [--drift-interval 30]
        [--intervals 3] [--ready-timeout 600] [--operator-arg=--some-flag ...] [--keep]
        [--otlp-receiver | --otlp-endpoint URL]

With --otlp-receiver the operator traces (--otlp-endpoint) to an OTLP/HTTP receiver in this process
(the tests' own, ``tests/otlp_receiver.py``), and the spans it received are printed: what tracing
costs shows in the operator's CPU seconds and the Ready times, against a run without.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.control_plane import ETCD_VERSION, KUBERNETES_VERSION  # noqa: E402
from tests.e2e.fleet import CREDENTIALS, NAMESPACE, fleet, workspace_names  # noqa: E402
from tests.e2e.operator_harness import (  # noqa: E402
    OperatorProcess,
    apply_crds,
    finalizer_policy,
    policy_in_force,
)
from tests.integration.platform.platform_harness import PlatformProcess, start_platform  # noqa: E402
from tests.otlp_receiver import OtlpReceiver  # noqa: E402

from bundle_operator.devcluster import DevCluster, Kubectl, locate, wait_until  # noqa: E402

# The script's own folder is first on sys.path: its sibling modules import by their names.
from ready_watch import ReadyWatch  # noqa: E402
from scale_measure import (  # noqa: E402
    AuditLog,
    Processes,
    operator_metric,
    peak,
    platform_calls,
    proc_status,
)
from scale_report import drift_breakdown, print_audit, print_install_calls  # noqa: E402

AUTOMATIONS = 2  # cron triggers per bundle; installed disabled (activate: false)
BUNDLE_ENTITIES = 12
DRIFT_LIST_LIMIT = 1
READY_TARGET_SECONDS = 60.0  # for 1,000 installations
RSS_TARGET_MIB = 250.0
RSS_SLOPE_TARGET_KIB = 60.0  # KiB of operator memory per installation (issue: 5,000 installations)
CORES = os.cpu_count() or 1
# One event per request: watches when they start, everything else when it completes.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
# Not the operator: this benchmark's own kubectl and polls, the control plane's own components.
POLL_AGENT = "bench-scale"
INSTALLATIONS = f"/apis/bundle-operator.dev/v1alpha1/namespaces/{NAMESPACE}/bundleinstallations"


# --- waiting ----------------------------------------------------------------------------------------


@dataclass
class Progress:
    """When each installation was first seen Ready, and how the rest stood at the last look."""

    ready_at: dict[str, float] = field(default_factory=dict)
    others: Counter[str] = field(default_factory=Counter)
    interrupted: bool = False
    peak_rss: float = float("nan")  # the operator's VmHWM at the last look, should it be gone later


def api_client(kubeconfig: Path, folder: Path) -> httpx.Client:
    """An HTTP client for the API server with the kubeconfig's (admin) client certificate."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    ca, cert, key = folder / "ca.pem", folder / "client.pem", folder / "client-key.pem"
    key.touch(mode=0o600)
    for path, data in (
        (ca, cluster["certificate-authority-data"]),
        (cert, user["client-certificate-data"]),
        (key, user["client-key-data"]),
    ):
        path.write_bytes(base64.b64decode(data))
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(cert, key)
    return httpx.Client(
        base_url=cluster["server"], verify=context, timeout=120, headers={"User-Agent": f"{POLL_AGENT}/1"}
    )


def wait_all_ready(
    watch: ReadyWatch,
    names: list[str],
    started: float,
    timeout: float,
    operator: OperatorProcess,
) -> Progress:
    """Look once a second at what the watch of the table (ready_watch.py) delivered until every
    installation is Ready or ``timeout`` passes; Ready times count from ``started``.

    The specs never change here, so a Ready installation's generation is the one it observed
    (checked once at the end). Ctrl-C ends the wait early, with the figures so far.
    """
    progress = Progress()
    try:
        look_until_ready(watch, set(names), started, timeout, operator, progress)
    except KeyboardInterrupt:
        progress.interrupted = True
    return progress


def wait_all_observed(api: httpx.Client, names: list[str], timeout: float) -> None:
    """Poll until every installation's status has observed its current generation."""
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while True:
        answer = api.get(INSTALLATIONS)
        answer.raise_for_status()
        behind = [
            item["metadata"]["name"]
            for item in answer.json()["items"]
            if item["metadata"]["name"] in wanted
            and (item.get("status") or {}).get("observedGeneration") != item["metadata"].get("generation")
        ]
        if not behind:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(behind)} installations did not observe their new spec: {behind[:5]}")
        time.sleep(2.0)


def look_until_ready(
    watch: ReadyWatch,
    wanted: set[str],
    started: float,
    timeout: float,
    operator: OperatorProcess,
    progress: Progress,
) -> None:
    last_print = 0.0
    while True:
        tick = time.monotonic()
        assert operator.process is not None
        if operator.process.poll() is not None:
            raise RuntimeError(f"the operator exited: {operator.log.read_text()[-3000:]}")
        if watch.error is not None:
            raise RuntimeError(f"the watch of the installations failed: {watch.error!r}")
        rows = watch.rows()
        progress.peak_rss = peak(progress.peak_rss, proc_status(operator.process.pid, "VmHWM"))
        seen = tick - started
        progress.others = Counter()
        listed = 0
        for name, row in rows.items():
            if name not in wanted:
                continue
            listed += 1
            if row.ready_since is not None:
                progress.ready_at.setdefault(name, max(0.0, row.ready_since - started))
            else:
                progress.others[f"Ready={row.ready}/{row.reason}"] += 1
        progress.others["not listed yet"] = len(wanted) - listed
        done = len(progress.ready_at)
        if tick - last_print >= 15 or done == len(wanted):
            last_print = tick
            waiting = ", ".join(f"{k} {v}" for k, v in progress.others.most_common() if v)
            waiting = f"; {waiting}" if waiting else ""
            print(f"  {seen:6.1f} s: {done}/{len(wanted)} Ready{waiting}", flush=True)
        if done == len(wanted) or seen > timeout:
            return
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))


def run_outage(
    args: argparse.Namespace,
    work: Path,
    platform: PlatformProcess,
    operator: OperatorProcess,
    watch: ReadyWatch,
    names: list[str],
) -> PlatformProcess:
    """Kill the platform, keep it down, start it again on its port; print how soon all are Ready."""
    outage = args.outage if args.outage is not None else 2 * args.drift_interval + 5
    port = platform.url.rsplit(":", 1)[1]
    errors_before = operator_metric(operator, "bundle_operator_platform_calls_total", {"status": "error"})
    platform.process.kill()  # as a crashed node would: calls in flight get no answer
    platform.process.wait(timeout=10)
    print(f"\nthe platform is killed and stays down {outage:.0f} s ...", flush=True)
    time.sleep(outage)
    tried = (
        operator_metric(operator, "bundle_operator_platform_calls_total", {"status": "error"}) - errors_before
    )
    down = wait_all_ready(watch, names, time.monotonic(), 0.0, operator)
    back = start_platform(
        work / "platform.db", "--count-calls", "--port", port, log=work / "platform-after-outage.log"
    )
    returned = time.monotonic()
    progress = wait_all_ready(watch, names, returned, args.ready_timeout, operator)
    not_ready = len(names) - len(down.ready_at)
    print(
        f"outage: {not_ready}/{len(names)} installations not Ready when the platform came back after "
        f"{outage:.0f} s; {tried:.0f} platform calls tried during it "
        f"({tried / len(names) / (outage / 60):.2f} per installation per minute)"
    )
    if len(progress.ready_at) == len(names):
        print(f"outage: all Ready {max(progress.ready_at.values()):.1f} s after the platform returned")
    else:
        print(
            f"outage: {len(progress.ready_at)}/{len(names)} Ready "
            f"{args.ready_timeout:.0f} s after the platform returned"
        )
    return back


def stop_all(operator: OperatorProcess | None, platform: PlatformProcess | None, cluster: DevCluster) -> None:
    """Stop every process this benchmark started, each even when stopping another failed."""
    if operator is not None and operator.process is not None:
        try:
            # Hundreds of drift daemons to cancel: more time than the harness's default.
            operator.stop(timeout=120)
        except subprocess.TimeoutExpired:
            print("the operator did not stop within 120 s of SIGTERM and was killed", file=sys.stderr)
    if platform is not None:
        try:
            platform.stop()
        except subprocess.TimeoutExpired:
            platform.process.kill()
            platform.process.wait(timeout=10)
    cluster.stop()


# --- the run ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=300, help="installations (a multiple of --workspaces)")
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument(
        "--drift-interval", type=int, default=30, help="seconds, in the drift phase (the floor is 5)"
    )
    parser.add_argument(
        "--install-interval",
        default="5m",
        help="spec.driftPolicy.interval while they install (default %(default)s, the CRD's)",
    )
    parser.add_argument("--intervals", type=int, default=3, help="drift intervals to measure once settled")
    parser.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for all Ready")
    parser.add_argument(
        "--operator-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra operator flag (repeatable; write --operator-arg=--flag for flags)",
    )
    parser.add_argument(
        "--outage",
        type=float,
        default=None,
        help="seconds the platform is down at the end (default: two drift intervals and 5 s, so "
        "every installation finds it down; 0 skips the outage)",
    )
    parser.add_argument(
        "--no-finalizer-policy",
        action="store_true",
        help="leave out the chart's finalizer policy (the operator then patches its finalizer in)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, audit log, db)")
    tracing = parser.add_mutually_exclusive_group()
    tracing.add_argument(
        "--otlp-endpoint", metavar="URL", help="the operator sends its spans here (OTLP/HTTP)"
    )
    tracing.add_argument(
        "--otlp-receiver",
        action="store_true",
        help="the operator sends its spans to an OTLP receiver started here, which counts them",
    )
    args = parser.parse_args()
    if args.count <= 0 or args.workspaces <= 0 or args.count % args.workspaces:
        parser.error("--count must be a positive multiple of --workspaces")
    if args.drift_interval < 5 or args.intervals <= 0:
        parser.error("--drift-interval must be at least 5 and --intervals positive")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below stops everything

    receiver = OtlpReceiver.start() if args.otlp_receiver else None
    otlp = receiver.endpoint if receiver is not None else args.otlp_endpoint
    operator_args = (*args.operator_arg, *(("--otlp-endpoint", otlp) if otlp else ()))
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    policy = work / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    audit = AuditLog(work / "audit.log")
    workspaces = workspace_names(args.workspaces)
    # The install runs at the installations' usual drift interval (a fleet does not check drift
    # every few seconds); the drift phase then applies the fleet again with --drift-interval.
    objects, names = fleet(args.count, workspaces, args.install_interval)
    manifest = work / "fleet.yaml"
    manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    drift_manifest = work / "fleet-drift.yaml"
    drift_objects, _ = fleet(args.count, workspaces, f"{args.drift_interval}s")
    drift_manifest.write_text(yaml.safe_dump_all(drift_objects, sort_keys=False))
    print(
        f"fleet: {args.count} installations = {args.count // args.workspaces} bundles x "
        f"{args.workspaces} workspaces; {BUNDLE_ENTITIES} entities per bundle; drift interval "
        f"{args.install_interval} while installing, {args.drift_interval} s after; operator args "
        f"{list(operator_args) or 'none'}; the chart's finalizer policy "
        f"{'left out' if args.no_finalizer_policy else 'applied'}; work folder {work}",
        flush=True,
    )

    cluster = DevCluster(
        locate(KUBERNETES_VERSION, ETCD_VERSION),
        workdir=work / "cluster",
        apiserver_args=(
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit.path}",
            "--audit-log-format=json",
            "--audit-log-maxsize=0",
        ),
    )
    platform: PlatformProcess | None = None
    operator: OperatorProcess | None = None
    api: httpx.Client | None = None
    watch: ReadyWatch | None = None
    succeeded = interrupted = False
    try:
        cluster.start()
        kubectl = Kubectl(cluster.binaries.kubectl, cluster.kubeconfig)
        api = api_client(cluster.kubeconfig, work)
        platform = start_platform(work / "platform.db", "--count-calls", log=work / "platform.log")
        operator = OperatorProcess(
            cluster.kubeconfig,
            platform.url,
            work / "operator.log",
            extra=operator_args,
            scope=("--all-namespaces",),
        )
        apply_crds(kubectl)
        kubectl.run("create", "namespace", NAMESPACE)
        if not args.no_finalizer_policy:
            # What the chart installs on this cluster (it serves MutatingAdmissionPolicy).
            policy_docs = finalizer_policy("bench", [])
            kubectl.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(policy_docs))
            wait_until(lambda: policy_in_force(kubectl, NAMESPACE), 30, "the finalizer policy in force")
        kubectl.run(
            "create", "secret", "generic", CREDENTIALS, "-n", NAMESPACE,
            "--from-literal=telegram_bot_token=123456:fleet-bench-not-a-token",
        )  # fmt: skip
        operator.start()
        assert operator.process is not None
        pids = Processes(
            {
                "operator": operator.process.pid,
                "kube-apiserver": cluster.pids["kube-apiserver"],
                "etcd": cluster.pids["etcd"],
                "kube-controller-manager": cluster.pids["kube-controller-manager"],
                "platform": platform.process.pid,
            }
        )
        time.sleep(3)
        idle_rss = proc_status(operator.process.pid, "VmRSS")

        # --- install ----------------------------------------------------------------------------
        platform_calls(platform, reset=True)
        audit.skip()
        reconciles_before = operator_metric(
            operator, "bundle_operator_reconciles_total", {"kind": "BundleInstallation"}
        )
        own_before = operator_metric(operator, "bundle_operator_platform_calls_total", {})
        watch = ReadyWatch(api_client(cluster.kubeconfig, work), INSTALLATIONS).start()
        cpu_before = pids.cpu()
        started = time.monotonic()
        kubectl.run("apply", "--server-side", "-f", str(manifest), timeout=900)
        applied = time.monotonic() - started
        print(f"kubectl apply --server-side of {len(objects)} objects took {applied:.1f} s", flush=True)
        progress = wait_all_ready(watch, names, started, args.ready_timeout, operator)
        elapsed = time.monotonic() - started
        install_calls = platform_calls(platform, reset=True)
        install_events = audit.requests()
        cpu_after = pids.cpu()
        own_after = operator_metric(operator, "bundle_operator_platform_calls_total", {})
        reconciles_after = operator_metric(
            operator, "bundle_operator_reconciles_total", {"kind": "BundleInstallation"}
        )
        ready = len(progress.ready_at)
        interrupted = progress.interrupted
        all_ready = ready == len(names)
        peak_rss = peak(progress.peak_rss, proc_status(operator.process.pid, "VmHWM"))
        last_ready = max(progress.ready_at.values(), default=float("nan"))

        print()
        if all_ready:
            print(f"apply -> all {ready} Ready: {last_ready:.1f} s ({watch.events} watch events)")
        else:
            print(
                f"{'INTERRUPTED' if progress.interrupted else 'TIMEOUT'} after {elapsed:.0f} s: "
                f"{ready}/{len(names)} Ready; the rest: "
                + ", ".join(f"{k} {v}" for k, v in progress.others.most_common() if v)
            )
        if ready:
            times = sorted(progress.ready_at.values())
            print(
                "  Ready after (s): first {:.1f}, 10% {:.1f}, 50% {:.1f}, 90% {:.1f}, last {:.1f}".format(
                    times[0], *(times[int(len(times) * q)] for q in (0.1, 0.5, 0.9)), times[-1]
                )
            )
        print(
            f"operator RSS: idle {idle_rss:.1f} MiB, peak {peak_rss:.1f} MiB "
            f"(target < {RSS_TARGET_MIB:.0f}); "
            + "peak of the others: "
            + ", ".join(
                f"{name} {proc_status(pid, 'VmHWM'):.0f} MiB"
                for name, pid in pids.pids.items()
                if name != "operator"
            )
        )
        # What the fleet costs the operator: its peak over its idle size, spread over the fleet.
        slope = (peak_rss - idle_rss) * 1024 / args.count
        print(
            f"operator memory per installation: {slope:.1f} KiB ((peak - idle) / {args.count}; "
            f"target < {RSS_SLOPE_TARGET_KIB:.0f} KiB at 5,000)"
        )
        print(
            f"CPU seconds during the install ({elapsed:.1f} s wall x {CORES} cores = "
            f"{CORES * elapsed:.0f} core-s): "
            + ", ".join(f"{name} {cpu_after[name] - cpu_before[name]:.1f}" for name in cpu_before)
        )
        print_audit(install_events, args.count, "per installation during the install")
        per_install, created, disabled = print_install_calls(install_calls, args.count)
        print(
            f"  the operator's own count of its platform calls: {(own_after - own_before) / args.count:.2f} "
            f"per installation (the platform counted {per_install:.2f})"
        )
        limit = created + disabled + 3
        writes = (
            sum(n for (m, *_), n in install_calls.items() if m in ("POST", "PATCH", "PUT", "DELETE"))
            / args.count
        )
        # Installations Ready early have drift checks (reconciles too) before the last is Ready.
        reconciles = (reconciles_after - reconciles_before) / args.count
        print(
            f"install calls per installation: {per_install:.2f} = writes {writes:.2f} + reads "
            f"{per_install - writes:.2f} over {reconciles:.2f} reconciles (drift checks of installations "
            f"Ready early included), {(per_install - writes) / max(reconciles, 1e-9):.2f} reads per "
            "reconcile; "
            f"limit = platform entities created {created:.2f} + triggers disabled {disabled:.2f} + 3 "
            f"= {limit:.2f}"
        )

        # --- drift ------------------------------------------------------------------------------
        drift_lists: float | None = None
        if all_ready:
            switched = time.monotonic()
            kubectl.run("apply", "--server-side", "-f", str(drift_manifest), timeout=900)
            wait_all_observed(api, names, args.ready_timeout)
            print(
                f"\nthe fleet switched to a {args.drift_interval} s drift interval in "
                f"{time.monotonic() - switched:.1f} s (every installation observed its new spec)",
                flush=True,
            )
            settle = args.drift_interval + 5
            print(f"settling {settle} s, then counting {args.intervals} drift intervals ...", flush=True)
            time.sleep(settle)
            platform_calls(platform, reset=True)
            audit.skip()
            cpu_before = pids.cpu()
            reconciles_before = operator_metric(
                operator, "bundle_operator_reconciles_total", {"kind": "BundleInstallation"}
            )
            window = args.drift_interval * args.intervals
            time.sleep(window)
            drift_calls = platform_calls(platform, reset=True)
            drift_events = audit.requests()
            cpu_after = pids.cpu()
            checks = (
                operator_metric(operator, "bundle_operator_reconciles_total", {"kind": "BundleInstallation"})
                - reconciles_before
            )
            print(
                f"drift checks in {window} s: {checks:.0f} ({checks / args.count / args.intervals:.2f} per "
                f"installation per interval); CPU seconds: "
                + ", ".join(f"{name} {cpu_after[name] - cpu_before[name]:.1f}" for name in cpu_before)
            )
            drift_lists = drift_breakdown(drift_calls, args.intervals, workspaces)
            if checks:
                print(f"platform calls per drift check: {sum(drift_calls.values()) / checks:.2f}")
            print_audit(drift_events, args.count * args.intervals, "per installation per drift interval")
        peak_rss = peak(peak_rss, proc_status(operator.process.pid, "VmHWM"))

        # --- outage -----------------------------------------------------------------------------
        if all_ready and args.outage != 0:
            platform = run_outage(args, work, platform, operator, watch, names)

        # The specs never changed, so Ready was always for the current generation; check once.
        listed = kubectl.run("get", "bi", "-n", NAMESPACE, "-o", "json", timeout=300).stdout
        statuses = [(i.get("status") or {}, i["metadata"]) for i in json.loads(listed)["items"]]
        stale = sum(1 for status, meta in statuses if status.get("observedGeneration") != meta["generation"])
        entities = Counter(len(status.get("entities") or []) for status, _ in statuses)
        print(
            f"\nstatus: {stale} installations with an unobserved generation; entities in status: "
            + ", ".join(f"{n} x {k}" for k, n in sorted(entities.items()))
        )
        seconds = last_ready if all_ready else elapsed
        print(
            f"targets: Ready {seconds:.1f} s{'' if all_ready else ' (not all Ready)'} "
            f"(1,000 within {READY_TARGET_SECONDS:.0f} s); "
            f"RSS {peak_rss:.1f} MiB (< {RSS_TARGET_MIB:.0f}); "
            f"drift lists {'n/a' if drift_lists is None else f'{drift_lists:.2f}'} (<= {DRIFT_LIST_LIMIT}); "
            f"install calls {per_install:.2f} (<= {limit:.2f})"
        )
        lists_text = "n/a" if drift_lists is None else f"{drift_lists:.1f}"
        print(
            f"scale: {ready} installations Ready in {seconds:.1f} s; operator peak RSS {peak_rss:.0f} MB; "
            f"drift lists per workspace per interval {lists_text} (limit {DRIFT_LIST_LIMIT})"
        )
        if receiver is not None:
            spans = receiver.spans()
            traces = {span.trace_id for span in spans}
            print(f"traces: {len(spans)} spans in {len(traces)} traces, {receiver.requests} exports")
        succeeded = all_ready
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave processes behind
        if api is not None:
            api.close()
        if watch is not None:
            watch.stop()
        stop_all(operator, platform, cluster)
        if receiver is not None:
            receiver.stop()
        if succeeded and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"(work folder kept: {work})", file=sys.stderr)
    return 0 if succeeded else 130 if interrupted else 1


if __name__ == "__main__":
    sys.exit(main())
