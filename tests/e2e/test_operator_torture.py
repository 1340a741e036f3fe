"""Torture: the operator SIGKILLed at random moments of twenty concurrent installs, the platform gone
for a minute in the middle of installs, the API server restarted mid-run. Each time everything
converges with no human step, and every platform workspace holds each bundle entity exactly once,
with nothing the installation's record does not own.

A fleet under a random schedule of every fault kind at once (tests/e2e/chaos.py) ends them.

Bounded in count and time (about five minutes together on two cores); `-m "not torture"` leaves
them out of a quick local run, `make test` runs them. Run with -s to see the figures they measure.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, KubectlError, wait_until
from bundle_operator.devcluster.kubectl import WaitTimeout
from bundle_operator.k8s.installation.state import LABEL_INSTALLATION
from tests.e2e.chaos import WEIGHTS, ChaosPlan, ChaosRun
from tests.e2e.conftest import GITHUB_FILES
from tests.e2e.operator_harness import (
    EXAMPLES,
    OperatorProcess,
    platform_list,
    state_record_text,
    wait_ready,
)
from tests.e2e.platform_control import RestartablePlatform
from tests.e2e.test_operator_crash import COLLECTIONS
from tests.integration.platform.platform_harness import github_stub

pytestmark = [pytest.mark.e2e, pytest.mark.torture, pytest.mark.usefixtures("crds")]

BUNDLE_FILE = EXAMPLES / "github-triage-bundle.yaml"
SECRET_FILE = EXAMPLES / "github-triage-secret.yaml"
INSTALLATION_FILE = EXAMPLES / "github-triage-installation.yaml"
# The bundle document's sections and the record's kind names for them.
SECTIONS = {
    "mcps": "mcp",
    "skills": "skill",
    "agents": "agent",
    "channels": "channel",
    "automations": "automation",
    "policies": "policy",
}

# (a): how many installations, how many kills, and the random pause before each kill.
INSTALLATIONS_A = 20
KILLS = 20
KILL_PAUSE = (0.2, 3.0)
# (b): how many installations, and how long the platform is down.
INSTALLATIONS_B = 12
OUTAGE_SECONDS = 60.0
# (c): how many installations before the restart.
INSTALLATIONS_C = 10


@pytest.fixture
def own_platform(tmp_path: Path) -> Iterator[RestartablePlatform]:
    """A platform for this test alone: the tests kill it, slow it down and restart it."""
    with github_stub(GITHUB_FILES) as stub:
        running = RestartablePlatform(tmp_path / "platform.db", tmp_path, stub.url).start()
        try:
            yield running
        finally:
            running.stop()


# --- installations -----------------------------------------------------------------------------


def installation_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i:02d}" for i in range(count)]


def workspace_of(namespace: str, name: str) -> str:
    return f"{namespace}-{name}"


def installations_yaml(namespace: str, names: list[str]) -> str:
    """The example installation once per name, each into a workspace of its own, as one file."""
    template = yaml.safe_load(INSTALLATION_FILE.read_text())
    docs = []
    for name in names:
        doc = json.loads(json.dumps(template))
        doc["metadata"]["name"] = name
        doc["spec"]["workspace"] = workspace_of(namespace, name)
        docs.append(yaml.safe_dump(doc, sort_keys=False))
    return "---\n".join(docs)


def start_operator(
    devcluster: DevCluster, platform: RestartablePlatform, ns: str, log: Path
) -> OperatorProcess:
    return OperatorProcess(devcluster.kubeconfig, platform.url, log, scope=("--namespace", ns)).start()


def prepare(kubectl: Kubectl, ns: str) -> None:
    kubectl.apply(SECRET_FILE, namespace=ns)
    kubectl.apply(BUNDLE_FILE, namespace=ns)
    wait_ready(kubectl, "bundle", "github-triage", ns)


def _ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def installations(kubectl: Kubectl, ns: str) -> dict[str, dict[str, Any]] | None:
    """Every installation of the namespace by name; None while the API server does not answer."""
    try:
        listed = json.loads(
            kubectl.run("get", "bundleinstallations", "-n", ns, "-o", "json", timeout=20).stdout
        )
    except (KubectlError, json.JSONDecodeError, subprocess.TimeoutExpired):
        return None
    return {item["metadata"]["name"]: item for item in listed["items"]}


def ready_names(kubectl: Kubectl, ns: str) -> set[str] | None:
    found = installations(kubectl, ns)
    return None if found is None else {name for name, obj in found.items() if _ready(obj)}


def wait_all_ready(kubectl: Kubectl, ns: str, names: list[str], timeout: float) -> float:
    """Wait until every named installation is Ready; the seconds it took. On timeout, say which are
    not and what their Ready condition says."""
    started = time.monotonic()
    last: dict[str, dict[str, Any]] = {}

    def done() -> bool:
        nonlocal last
        found = installations(kubectl, ns)
        if found is None:
            return False
        last = found
        return all(name in found and _ready(found[name]) for name in names)

    try:
        wait_until(done, timeout, f"{len(names)} installations Ready", interval=0.5)
    except WaitTimeout as error:
        lines = []
        for name in names:
            obj = last.get(name)
            if obj is None:
                lines.append(f"  {name}: missing")
                continue
            if _ready(obj):
                continue
            conds = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
            ready = conds.get("Ready", {})
            lines.append(
                f"  {name}: Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')}"
            )
        raise WaitTimeout(f"{error}; not Ready:\n" + "\n".join(lines)) from None
    return time.monotonic() - started


def progress(kubectl: Kubectl, ns: str) -> tuple[set[str], dict[str, Counter[str]]]:
    """In one read: the installations that are Ready, and for each one with a run in flight, its
    journal entries by state (pending, created)."""
    try:
        listed = json.loads(
            kubectl.run("get", "bundleinstallations,secrets", "-n", ns, "-o", "json", timeout=20).stdout
        )
    except (KubectlError, json.JSONDecodeError, subprocess.TimeoutExpired):
        return set(), {}
    ready = {
        i["metadata"]["name"] for i in listed["items"] if i["kind"] == "BundleInstallation" and _ready(i)
    }
    journals: dict[str, Counter[str]] = {}
    for secret in listed["items"]:
        labels = secret["metadata"].get("labels") or {}
        if secret["kind"] != "Secret" or LABEL_INSTALLATION not in labels:
            continue
        if (secret.get("data") or {}).get("record.json.gz"):
            journal = json.loads(state_record_text(secret)).get("journal") or []
            if journal:
                journals[labels[LABEL_INSTALLATION]] = Counter(str(entry["state"]) for entry in journal)
    return ready, journals


# --- what must hold at the end ------------------------------------------------------------------


def bundle_entities() -> set[str]:
    """``kind:key`` of every entity the example bundle declares."""
    doc = yaml.safe_load(BUNDLE_FILE.read_text())["spec"]["source"]["inline"]
    return {f"{kind}:{item['key']}" for section, kind in SECTIONS.items() for item in doc.get(section) or []}


def state_record(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    secret = kubectl.get_or_none("secret", f"{name}-bundle-state", ns)
    assert secret is not None, f"installation {name}: no state Secret {name}-bundle-state"
    loaded: dict[str, Any] = json.loads(state_record_text(secret))
    return loaded


def assert_each_entity_once(
    kubectl: Kubectl, platform: RestartablePlatform, ns: str, names: list[str]
) -> dict[str, int]:
    """For each installation: its workspace holds exactly what its record owns (each bundle entity
    once, nothing orphaned, nothing missing), its journal is empty and its status lists the
    record's ids. Returns the entities per collection, the same in every workspace."""
    declared = bundle_entities()
    shape: dict[str, int] | None = None
    problems: list[str] = []
    for name in names:
        workspace = workspace_of(ns, name)
        rec = state_record(kubectl, ns, name)
        for part in ("journal", "leftovers", "unresolved"):
            if rec.get(part):
                problems.append(f"{name}: the record's {part} is not empty: {rec[part]}")
        recorded = Counter(f"{e['kind']}:{e['key']}" for e in rec["entities"])
        if set(recorded) != declared or max(recorded.values(), default=1) != 1:
            problems.append(
                f"{name}: the record holds {sorted(recorded.elements())}, the bundle {sorted(declared)}"
            )
        owned: dict[str, set[str]] = {path: set() for path in COLLECTIONS}
        for entity in rec["entities"]:
            for part in entity["parts"]:
                owned.setdefault(part["path"], set()).add(part["id"])
        live = {path: platform_list(platform.process, workspace, path) for path in COLLECTIONS}
        # A channel's bot token is stored by the platform itself, for the channel and deleted with
        # it: owned through the channel.
        owned["secrets"] |= {
            str(c["bot_token_secret_id"])
            for c in live["channels"]
            if c["id"] in owned["channels"] and c.get("bot_token_secret_id")
        }
        counts: dict[str, int] = {}
        for path, items in live.items():
            labels = {str(i["id"]): str(i.get("name") or i.get("key") or i.get("type") or "?") for i in items}
            seen = Counter(labels[i] for i in labels)
            for label, times in seen.items():
                if times > 1:
                    problems.append(f"{name}: {path} '{label}' is on the platform {times} times")
            orphans = sorted(f"{labels[i]} ({i})" for i in set(labels) - owned[path])
            if orphans:
                problems.append(f"{name}: {path} not owned by the record (orphaned): {orphans}")
            missing = sorted(owned[path] - set(labels))
            if missing:
                problems.append(f"{name}: {path} ids in the record but not on the platform: {missing}")
            counts[path] = len(items)
        if shape is None:
            shape = counts
        elif counts != shape:
            problems.append(f"{name}: entities per collection {counts}, other workspaces {shape}")
        obj = kubectl.get("bundleinstallation", name, ns)
        in_status = {e["id"] for e in (obj.get("status") or {}).get("entities") or [] if e.get("id")}
        primaries = {p["id"] for e in rec["entities"] for p in e["parts"] if p["role"] == "primary"}
        if in_status != primaries:
            problems.append(
                f"{name}: status.entities ids {sorted(in_status)} != the record's {sorted(primaries)}"
            )
    assert not problems, "after the torture:\n" + "\n".join(problems)
    assert shape is not None and sum(shape.values()) >= 11, f"too few entities: {shape}"
    return shape


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include ``labels``."""
    total = 0.0
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if not match:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


CALLS = "bundle_operator_platform_calls_total"
RECONCILES = "bundle_operator_reconciles_total"

# Loaded into the operator's process only (PYTHONPATH, for the outage test): appends a line to a file
# at every TCP connection the operator opens to the platform's port. While the platform is down
# every call needs a new connection, refused at once, so the lines count the calls the operator
# tried; its own metric does not count calls that got no answer.
CONNECT_PROBE = """
import os

_port, _log = os.environ.get("TORTURE_CONNECT_PORT"), os.environ.get("TORTURE_CONNECT_LOG")
if _port and _log:
    import asyncio.base_events

    _create_connection = asyncio.base_events.BaseEventLoop.create_connection

    async def create_connection(self, protocol_factory, host=None, port=None, *args, **kwargs):
        if port == int(_port):
            with open(_log, "a") as out:
                out.write("connect\\n")
        return await _create_connection(self, protocol_factory, host, port, *args, **kwargs)

    asyncio.base_events.BaseEventLoop.create_connection = create_connection
"""


def start_counted_operator(
    devcluster: DevCluster, platform: RestartablePlatform, ns: str, log: Path, probe: Path
) -> OperatorProcess:
    """The operator with the connection probe loaded; ``probe``/connects counts its connections."""
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(CONNECT_PROBE)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(probe), os.environ.get("PYTHONPATH")])))
        env.setenv("TORTURE_CONNECT_PORT", str(platform.port))
        env.setenv("TORTURE_CONNECT_LOG", str(probe / "connects"))
        return start_operator(devcluster, platform, ns, log)


def connects(probe: Path) -> int:
    """Connections the probed operator opened to the platform so far."""
    try:
        return len((probe / "connects").read_text().splitlines())
    except FileNotFoundError:
        return 0


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextmanager
def reporting(label: str, log: Path, running: Callable[[], OperatorProcess]) -> Iterator[None]:
    """On a failure, print the tail of the operator's log; in any case stop the operator that
    ``running`` names at the end (a test may have restarted it under the same name)."""
    try:
        yield
    except BaseException:
        print(f"[{label}] operator log tail:\n{log_tail(log)}")
        raise
    finally:
        operator = running()
        if operator.process is not None and operator.process.poll() is None:
            operator.stop()


# --- (a) twenty installations, twenty SIGKILLs ----------------------------------------------------


def test_twenty_installs_survive_twenty_kills_with_each_entity_once(
    kubectl: Kubectl,
    devcluster: DevCluster,
    own_platform: RestartablePlatform,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    ns, log = solo_namespace, tmp_path / "operator.log"
    seed = int(os.environ.get("TORTURE_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    print(f"\n[kills] seed {seed} (TORTURE_SEED={seed} repeats the pauses); operator log {log}")
    names = installation_names("k", INSTALLATIONS_A)
    operator = start_operator(devcluster, own_platform, ns, log)
    with reporting("kills", log, lambda: operator):
        prepare(kubectl, ns)
        kubectl.apply(installations_yaml(ns, names), namespace=ns)
        began = time.monotonic()
        restarts: list[float] = []
        for kill in range(1, KILLS + 1):
            pause = rng.uniform(*KILL_PAUSE)
            time.sleep(pause)
            operator.kill()
            at = time.monotonic() - began
            # What the kill interrupted, read while nothing runs.
            ready, journals = progress(kubectl, ns)
            started = time.monotonic()
            operator = start_operator(devcluster, own_platform, ns, log)
            restarts.append(time.monotonic() - started)
            print(
                f"[kills] kill {kill:2d} after {pause:.2f} s of running (t={at:5.1f} s): "
                f"{len(ready):2d}/{len(names)} Ready, {len(journals):2d} installs mid-run, their journals "
                f"{sum(j['created'] for j in journals.values()):3d} created and "
                f"{sum(j['pending'] for j in journals.values()):2d} pending; "
                f"restarted in {restarts[-1]:.1f} s"
            )
        kill_phase = time.monotonic() - began
        own_platform.clear_faults()
        converged = wait_all_ready(kubectl, ns, names, timeout=180)
        shape = assert_each_entity_once(kubectl, own_platform, ns, names)
        print(
            f"[kills] {KILLS} kills in {kill_phase:.0f} s "
            f"(restart to /readyz {min(restarts):.1f}-{max(restarts):.1f} s); all {len(names)} Ready "
            f"{converged:.1f} s after the last restart; each workspace holds {shape}"
        )
        assert operator.stop() == 0, "the operator did not stop cleanly on SIGTERM"


# --- (b) the platform down for a minute --------------------------------------------------------------


def test_platform_outage_of_a_minute_converges_without_a_hot_loop(
    kubectl: Kubectl,
    devcluster: DevCluster,
    own_platform: RestartablePlatform,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    ns, log, probe = solo_namespace, tmp_path / "operator.log", tmp_path / "probe"
    names = installation_names("o", INSTALLATIONS_B)
    operator = start_counted_operator(devcluster, own_platform, ns, log, probe)
    with reporting("outage", log, lambda: operator):
        prepare(kubectl, ns)
        own_platform.staggered_writes([workspace_of(ns, n) for n in names], 100, 60)
        kubectl.apply(installations_yaml(ns, names), namespace=ns)
        began = time.monotonic()
        wait_until(lambda: ready_names(kubectl, ns) or None, 120, "a first installation Ready", 0.1)
        before, connects_before = operator.metrics(), connects(probe)
        own_platform.kill()
        down = time.monotonic()
        ready = ready_names(kubectl, ns)
        assert ready is not None
        pending = len(names) - len(ready)
        assert pending > 0, f"all {len(names)} Ready when the platform went: no install in flight"
        print(
            f"\n[outage] platform killed {down - began:.1f} s after the apply, {len(ready)}/{len(names)} "
            f"Ready; down for {OUTAGE_SECONDS:.0f} s"
        )
        time.sleep(OUTAGE_SECONDS)
        during, attempts = operator.metrics(), connects(probe) - connects_before
        outage = time.monotonic() - down
        after = installations(kubectl, ns) or {}
        own_platform.start()
        restarted = time.monotonic()
        flipped = sorted(n for n in ready if n in after and not _ready(after[n]))
        counted = metric_sum(during, CALLS) - metric_sum(before, CALLS)
        errors = metric_sum(during, CALLS, status="error") - metric_sum(before, CALLS, status="error")
        retries = metric_sum(during, RECONCILES, kind="BundleInstallation", result="retry") - metric_sum(
            before, RECONCILES, kind="BundleInstallation", result="retry"
        )
        # The bounds, from the backoff design (k8s/reconcile.py backoff(), platform/retry.py).
        # A failed reconcile is retried after backoff(attempt), at least 2**attempt s (1, 2, 4, 8, 16,
        # 32 s): within a minute an installation runs at most 1 (in flight when the platform went) + 6
        # reconciles; a Ready one runs its drift check at most once per interval (5m): 1. A reconcile
        # stops at its first failed platform step, and the client sends a call at most 4 times: with
        # a few reads before that step (measured before the platform-wide pause existed: 619 calls in
        # 64 reconciles, under 10 each) 40 calls a reconcile is ample, plus once per installation the
        # rollback of the install in flight, 4 tries of each of its at most 11 parts. A hot loop (no
        # backoff between reconciles) would run one every 1-2 s, 30 or more a minute instead of 7.
        minutes = outage / 60.0
        reconciles_bound = (7 * pending + (len(names) - pending)) * minutes
        calls_bound = 40 * reconciles_bound + 44 * pending
        print(
            f"[outage] during the {outage:.0f} s outage, for {pending} installations waiting: "
            f"{attempts} platform calls tried ({attempts / pending / minutes:.1f} per installation per "
            f"minute; bound {calls_bound:.0f}), {retries:.0f} reconciles retried ("
            f"{retries / pending / minutes:.1f} per installation per minute; bound {reconciles_bound:.0f}); "
            f"the operator's {CALLS} counted {counted:.0f} ({errors:.0f} with status error)"
        )
        if flipped:
            print(f"[outage] Ready before, not Ready at the end of the outage: {', '.join(flipped)}")
        assert retries <= reconciles_bound, (
            f"{retries:.0f} reconciles retried during the outage, more than backoff allows "
            f"({reconciles_bound:.0f} for {pending} installations waiting): a hot loop"
        )
        assert attempts <= calls_bound, (
            f"{attempts} platform calls tried during a {outage:.0f} s outage, "
            f"more than {calls_bound:.0f}: a hot loop"
        )
        converged = wait_all_ready(kubectl, ns, names, timeout=150)
        print(
            f"[outage] all {len(names)} Ready {converged:.1f} s after the platform came back; "
            f"{connects(probe) - connects_before - attempts} calls tried since"
        )
        shape = assert_each_entity_once(kubectl, own_platform, ns, names)
        print(
            f"[outage] each workspace holds {shape} ({time.monotonic() - restarted:.0f} s after the restart)"
        )
        # Last, so the convergence above is checked whatever the metric says.
        assert attempts == 0 or errors > 0, (
            f"the operator tried {attempts} platform calls that found the platform down, but its "
            f"{CALLS} counted none with status error: an outage is invisible in /metrics"
        )
        assert operator.stop() == 0, "the operator did not stop cleanly on SIGTERM"


# --- (c) the API server restarted ------------------------------------------------------------------


def test_apiserver_restart_mid_run_relists_and_converges(
    kubectl: Kubectl,
    devcluster: DevCluster,
    own_platform: RestartablePlatform,
    solo_namespace: str,
    tmp_path: Path,
) -> None:
    ns, log = solo_namespace, tmp_path / "operator.log"
    names = installation_names("a", INSTALLATIONS_C)
    operator = start_operator(devcluster, own_platform, ns, log)
    with reporting("apiserver", log, lambda: operator):
        prepare(kubectl, ns)
        own_platform.staggered_writes([workspace_of(ns, n) for n in names], 100, 60)
        kubectl.apply(installations_yaml(ns, names), namespace=ns)
        began = time.monotonic()
        ready_before = wait_until(
            lambda: ready_names(kubectl, ns) or None, 120, "a first installation Ready", 0.1
        )
        in_flight = progress(kubectl, ns)[1]
        down = devcluster.restart_apiserver(down_seconds=2.0)
        print(
            f"\n[apiserver] restarted {time.monotonic() - began - down:.1f} s after the apply, "
            f"{len(ready_before)}/{len(names)} Ready, {len(in_flight)} mid-install; "
            f"not answering for {down:.1f} s"
        )
        assert devcluster.exited() is None, f"{devcluster.exited()} exited after the API server restart"
        assert operator.process is not None and operator.process.poll() is None, "the operator exited"
        own_platform.clear_faults()
        # The watches are back: an installation applied now is seen and installed.
        late = "a-late"

        def applied() -> bool:  # a just-restarted API server may not serve the CRDs for a moment
            return kubectl.apply(installations_yaml(ns, [late]), namespace=ns, check=False).returncode == 0

        wait_until(applied, 30, "kubectl apply to work again", interval=1.0)
        seen = wait_all_ready(kubectl, ns, [late], timeout=60)
        print(f"[apiserver] an installation applied after the restart Ready in {seen:.1f} s")
        converged = wait_all_ready(kubectl, ns, names, timeout=120)
        print(f"[apiserver] all {len(names)} Ready {converged + seen:.1f} s after the restart")
        shape = assert_each_entity_once(kubectl, own_platform, ns, [*names, late])
        print(f"[apiserver] each workspace holds {shape}")
        assert devcluster.exited() is None, f"{devcluster.exited()} exited after the API server restart"
        assert operator.stop() == 0, "the operator did not stop cleanly on SIGTERM"


# (d): a small fleet under every kind of fault at random (bench/chaos.py runs it at fleet scale).
CHAOS = ChaosPlan(
    installations=12,
    workspaces=2,
    seconds=75.0,
    seed=29,
    pause=(1.0, 4.0),
    outage=(2.0, 8.0),
    settle=240.0,
    drift_interval="10s",
)


def test_a_fleet_under_random_faults_converges_with_nothing_orphaned_duplicated_or_leaked(
    devcluster: DevCluster, kubectl: Kubectl, solo_namespace: str, tmp_path: Path
) -> None:
    platform = RestartablePlatform(tmp_path / "platform.db", tmp_path).start()

    def start_operator(log: Path) -> OperatorProcess:
        # Fewer reconciles at once than installations: a restart must not wait for itself.
        return OperatorProcess(
            devcluster.kubeconfig,
            platform.url,
            log,
            extra=("--workers", "4"),
            scope=("--namespace", solo_namespace),
        ).start(timeout=120)

    run = ChaosRun(CHAOS, devcluster, kubectl, platform, solo_namespace, tmp_path, start_operator)
    try:
        run.setup()
        result = run.run()
    finally:
        run.stop()
        platform.stop()
    print(result.line())
    assert set(result.faults) == set(WEIGHTS), f"not every kind of fault came: {result.faults}"
    assert len(run.secret_values) > 1 and any(v != "1.0.0" for v in run.versions.values())
    assert not result.problems(), "after the chaos:\n" + "\n".join(result.problems()[:40])
