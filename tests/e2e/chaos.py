"""A chaos run: a fleet of installations kept under a seeded random schedule of faults, then checked.

The faults come one after another, a random pause apart: platform 5xx answers and slow writes
(armed with the platform's fault injection, each for a random number of calls), a platform outage
(killed, down for seconds, started again on its port), the operator SIGKILLed and started again,
kube-apiserver restarted, the installations' setup Secret rotated, and a Bundle updated. Then the
faults stop and everything must converge with no human step; what is checked at the end:

- orphans: platform entities in the fleet's workspaces that no installation's record owns;
- duplicates: of those, the ones named as an entity a record owns (a second copy of something
  installed), and an entity a record holds twice;
- stuck: installations not Ready on their Bundle's latest version (or whose record names an
  entity the platform lacks) once the settle time is over;
- leaked: objects or logs holding a setup secret value (statuses, Events, ConfigMaps, the
  resources themselves, every operator log).

bench/chaos.py runs it at fleet scale; the torture tests run it bounded.
"""

from __future__ import annotations

import json
import random
import secrets
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, KubectlError
from tests.e2e.fleet import CREDENTIALS, bundle_document, fleet
from tests.e2e.operator_harness import OperatorProcess, platform_list, state_record_text
from tests.e2e.platform_control import RestartablePlatform
from tests.e2e.test_operator_crash import COLLECTIONS

# How often each kind of fault is drawn, relative to the others.
WEIGHTS = {
    "platform-errors": 3,
    "platform-latency": 2,
    "platform-outage": 1,
    "operator-kill": 2,
    "apiserver-restart": 1,
    "secret-rotation": 1,
    "bundle-update": 2,
}


@dataclass(frozen=True)
class ChaosPlan:
    """How big and how long: ``installations`` = bundles x ``workspaces``."""

    installations: int = 200
    workspaces: int = 4
    seconds: float = 600.0
    seed: int = 1
    pause: tuple[float, float] = (3.0, 15.0)  # between two faults
    outage: tuple[float, float] = (3.0, 20.0)  # seconds the platform stays down
    settle: float = 600.0  # after the last fault, how long everything may take to converge
    drift_interval: str = "30s"


@dataclass
class ChaosResult:
    """What the run did and found."""

    installations: int
    faults: Counter[str] = field(default_factory=Counter)
    orphans: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    converged_after: float | None = None

    def line(self) -> str:
        """The summary line scripts read (bench/chaos.py prints it last)."""
        return (
            f"chaos: {self.installations} installations, {sum(self.faults.values())} faults, "
            f"orphans {len(self.orphans)}, duplicates {len(self.duplicates)}, stuck {len(self.stuck)}, "
            f"leaked {len(self.leaked)}"
        )

    def problems(self) -> list[str]:
        """Every finding, one per line, for a failure message."""
        return [
            *(f"orphan: {o}" for o in self.orphans),
            *(f"duplicate: {d}" for d in self.duplicates),
            *(f"stuck: {s}" for s in self.stuck),
            *(f"leaked: {x}" for x in self.leaked),
        ]


@dataclass
class ChaosRun:
    """The fleet and the processes the faults act on. ``start_operator`` starts one more operator
    process (with a log of its own) and returns it."""

    plan: ChaosPlan
    cluster: DevCluster
    kubectl: Kubectl
    platform: RestartablePlatform
    namespace: str
    work: Path
    start_operator: Callable[[Path], OperatorProcess]
    say: Callable[[str], None] = print
    operator: OperatorProcess | None = None
    operator_logs: list[Path] = field(default_factory=list)
    secret_values: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # bundle name -> the version last applied
    names: list[str] = field(default_factory=list)
    workspaces: list[str] = field(default_factory=list)

    # --- setting up ----------------------------------------------------------------------------

    def setup(self) -> None:
        """Apply the credentials Secret and the fleet, start the operator, wait until all are Ready."""
        plan = self.plan
        self.workspaces = [f"{self.namespace}-ws{w}" for w in range(plan.workspaces)]
        objects, self.names = fleet(plan.installations, self.workspaces, plan.drift_interval, self.namespace)
        for obj in objects:
            if obj["kind"] == "Bundle":
                self.versions[obj["metadata"]["name"]] = obj["spec"]["source"]["inline"]["version"]
        self.rotate_secret()
        manifest = self.work / "fleet.yaml"
        manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
        self._restart_operator()
        started = time.monotonic()
        self.kubectl.run("apply", "--server-side", "-f", str(manifest), "-n", self.namespace, timeout=600)
        left = self.wait_converged(plan.settle)
        if left:
            raise AssertionError(f"the fleet did not install before the chaos: {left[:10]}")
        self.say(f"chaos: {len(self.names)} installations Ready in {time.monotonic() - started:.1f} s")

    def _restart_operator(self) -> None:
        log = self.work / f"operator-{len(self.operator_logs) + 1}.log"
        self.operator_logs.append(log)
        self.operator = self.start_operator(log)

    # --- the faults ----------------------------------------------------------------------------

    def run(self) -> ChaosResult:
        """Faults for ``plan.seconds``, then the settle and the checks."""
        plan = self.plan
        rng = random.Random(plan.seed)
        result = ChaosResult(len(self.names))
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        # Every kind once first, in a random order, so even a short run meets each of them.
        first = rng.sample(kinds, len(kinds))
        deadline = time.monotonic() + plan.seconds
        while time.monotonic() < deadline:
            kind = first.pop() if first else rng.choices(kinds, weights)[0]
            began = time.monotonic()
            detail = self._fault(kind, rng)
            result.faults[kind] += 1
            self.say(f"  {began - deadline + plan.seconds:6.1f} s  {kind}: {detail}")
            time.sleep(min(rng.uniform(*plan.pause), max(0.0, deadline - time.monotonic())))
        self.say("chaos: faults over: " + ", ".join(f"{k} {n}" for k, n in sorted(result.faults.items())))
        self.platform.clear_faults()
        settled = time.monotonic()
        stuck = self.wait_converged(plan.settle)
        result.converged_after = None if stuck else time.monotonic() - settled
        result.stuck = stuck
        self.check(result)
        return result

    def _fault(self, kind: str, rng: random.Random) -> str:
        if kind == "platform-errors":
            spec = {
                "method": rng.choice(["GET", "POST", "PATCH", "DELETE"]),
                "path": rng.choice(["/v1/workspaces/*/*", "/v1/workspaces/*/*/*"]),
                "times": rng.randint(5, 40),
                "status": rng.choice([500, 502, 503]),
            }
            self.platform.arm(spec)
            return f"{spec['status']} to the next {spec['times']} {spec['method']} {spec['path']}"
        if kind == "platform-latency":
            delay, times = rng.randint(200, 1500), rng.randint(20, 120)
            for method in ("POST", "PATCH", "PUT", "DELETE"):
                for path in ("/v1/workspaces/*/*", "/v1/workspaces/*/*/*"):
                    self.platform.arm({"method": method, "path": path, "times": times, "delay_ms": delay})
            return f"writes {delay} ms slower for the next {times} of each kind"
        if kind == "platform-outage":
            down = rng.uniform(*self.plan.outage)
            self.platform.kill()
            time.sleep(down)
            self.platform.start()
            return f"down {down:.1f} s"
        if kind == "operator-kill":
            assert self.operator is not None
            self.operator.kill()
            pause = rng.uniform(0.0, 3.0)
            time.sleep(pause)
            self._restart_operator()
            return f"SIGKILL, started again {pause:.1f} s later"
        if kind == "apiserver-restart":
            down = self.cluster.restart_apiserver(down_seconds=rng.uniform(0.0, 5.0))
            return f"not answering for {down:.1f} s"
        if kind == "secret-rotation":
            self.rotate_secret()
            return f"{CREDENTIALS} has a new value ({len(self.secret_values)} so far)"
        if kind == "bundle-update":
            name = rng.choice(sorted(self.versions))
            return self.update_bundle(name)
        raise ValueError(kind)

    def _kubectl(self, *args: str, stdin: str | None = None) -> str:
        """kubectl, tried again while the API server is coming back from a restart."""
        for attempt in range(10):
            try:
                return self.kubectl.run(*args, stdin=stdin, timeout=120).stdout
            except (KubectlError, subprocess.TimeoutExpired):
                if attempt == 9:
                    raise
                time.sleep(2.0)
        raise AssertionError("unreachable")

    def rotate_secret(self) -> None:
        value = f"{random.randint(100000, 999999)}:chaos-{secrets.token_hex(12)}"
        self.secret_values.append(value)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": CREDENTIALS, "namespace": self.namespace},
            "stringData": {"telegram_bot_token": value},
        }
        self._kubectl("apply", "-f", "-", stdin=json.dumps(secret))

    def update_bundle(self, name: str) -> str:
        major, minor, patch = (int(p) for p in self.versions[name].split("."))
        version = f"{major}.{minor}.{patch + 1}"
        document = bundle_document(name)
        document["version"] = version
        document["agents"][0]["instructions"] += f" (revision {patch + 1})"
        bundle = {
            "apiVersion": "bundle-operator.dev/v1alpha1",
            "kind": "Bundle",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"source": {"inline": document}},
        }
        self._kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(bundle))
        self.versions[name] = version
        return f"{name} now {version}"

    # --- the end -------------------------------------------------------------------------------

    def _listed(self, kinds: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self._kubectl("get", kinds, "-n", self.namespace, "-o", "json")
        )["items"]
        return items

    def unconverged(self) -> list[str]:
        """Installations not Ready on their Bundle's latest version, each with what it says."""
        behind = []
        found = {i["metadata"]["name"]: i for i in self._listed("bundleinstallations")}
        for name in self.names:
            obj = found.get(name)
            if obj is None:
                behind.append(f"{name}: missing")
                continue
            status = obj.get("status") or {}
            ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
            bundle = obj["spec"]["bundleRef"]["name"]
            if (
                ready.get("status") != "True"
                or status.get("observedGeneration") != obj["metadata"].get("generation")
                or status.get("installedVersion") != self.versions[bundle]
            ):
                behind.append(
                    f"{name}: Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')}; "
                    f"installed {status.get('installedVersion')}, latest {self.versions[bundle]}"
                )
        return behind

    def wait_converged(self, timeout: float) -> list[str]:
        """Wait until every installation converged; the ones left when ``timeout`` ran out."""
        deadline = time.monotonic() + timeout
        last_said = 0.0
        while True:
            behind = self.unconverged()
            if not behind or time.monotonic() > deadline:
                return behind
            if time.monotonic() - last_said > 30:
                last_said = time.monotonic()
                self.say(f"  waiting for {len(behind)} installations, e.g. {behind[0]}")
            time.sleep(2.0)

    def check(self, result: ChaosResult) -> None:
        """Fill in orphans, duplicates, entities the platform lacks (as stuck) and leaks."""
        owned: dict[str, dict[str, set[str]]] = {
            ws: {p: set() for p in COLLECTIONS} for ws in self.workspaces
        }
        for secret in self._listed("secrets"):
            if not secret["metadata"]["name"].endswith("-bundle-state"):
                continue
            record = json.loads(state_record_text(secret))
            ws = record.get("workspace")
            if ws not in owned:
                continue
            keys = Counter(f"{e['kind']}:{e['key']}" for e in record.get("entities") or [])
            result.duplicates += [
                f"{secret['metadata']['name']}: {k} recorded {n} times" for k, n in keys.items() if n > 1
            ]
            for entity in record.get("entities") or []:
                for part in entity["parts"]:
                    owned[ws].setdefault(part["path"], set()).add(str(part["id"]))
            for part in ("journal", "leftovers", "unresolved"):
                if record.get(part):
                    result.stuck.append(f"{secret['metadata']['name']}: the record's {part} is not empty")
        for ws in self.workspaces:
            live = {path: platform_list(self.platform.process, ws, path) for path in COLLECTIONS}
            # A channel's bot token Secret is the platform's own, deleted with its channel.
            owned[ws]["secrets"] |= {
                str(c["bot_token_secret_id"])
                for c in live["channels"]
                if str(c["id"]) in owned[ws]["channels"] and c.get("bot_token_secret_id")
            }
            for path, items in live.items():
                labels = {str(i["id"]): str(i.get("name") or i.get("key") or "?") for i in items}
                mine = {labels[i] for i in labels if i in owned[ws][path]}
                for i in sorted(set(labels) - owned[ws][path]):
                    # Nobody's: a second copy of something installed, or a leftover of its own.
                    where = result.duplicates if labels[i] in mine else result.orphans
                    where.append(f"{ws} {path} '{labels[i]}' ({i})")
                missing = sorted(owned[ws][path] - set(labels))
                if missing:
                    result.stuck.append(f"{ws} {path}: ids in a record but not on the platform: {missing}")
        result.leaked = self.leaks()

    def leaks(self) -> list[str]:
        """Where a setup secret value shows: objects of the namespace, then the operator's logs."""
        found = []
        for kinds in ("bundleinstallations,bundles,endpoints", "events", "configmaps"):
            for obj in self._listed(kinds):
                text = json.dumps(obj)
                if any(value in text for value in self.secret_values):
                    found.append(f"{obj['kind']} {obj['metadata']['name']}")
        for log in self.operator_logs:
            text = log.read_text(errors="replace") if log.exists() else ""
            if any(value in text for value in self.secret_values):
                found.append(f"log {log.name}")
        return found

    def stop(self) -> None:
        """Stop the operator running now (it has many drift daemons to cancel: a long timeout)."""
        running = self.operator.process if self.operator is not None else None
        if self.operator is not None and running is not None and running.poll() is None:
            try:
                self.operator.stop(timeout=120)
            except subprocess.TimeoutExpired:
                self.operator.kill()
