"""The operator as a user runs it: `python -m bundle_operator` as a subprocess against the dev
cluster, with the reference platform over HTTP as its default platform."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bundle_operator.devcluster import Kubectl, wait_until
from tests.integration.platform.platform_harness import PlatformProcess

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
CHART = ROOT / "charts" / "bundle-operator"
EXAMPLES = ROOT / "examples" / "k8s"
MAP_API = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
FINALIZER = "bundle-operator.dev/finalizer"
# Endpoints read their members' health every 3 s instead of 30 (the chart's
# operator.endpointRefreshSeconds), so Degraded follows a member within seconds in a test.
QUICK_REFRESH = {"BUNDLE_OPERATOR_ENDPOINT_REFRESH_SECONDS": "3"}


def resource(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A manifest of one of the operator's kinds, in the namespace kubectl is pointed at."""
    return {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def sigterm_and_wait(process: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM and the exit code; one that outlives ``timeout`` is killed and fails the test."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        raise


def apply_crds(kubectl: Kubectl) -> None:
    """Install the CRDs the way the README says, and wait until they are served."""
    kubectl.run("apply", "--server-side", "-f", str(CRDS))
    for crd in (
        "bundles.bundle-operator.dev",
        "bundleinstallations.bundle-operator.dev",
        "endpoints.bundle-operator.dev",
    ):
        kubectl.wait_for_condition("crd", crd, "Established", timeout=30)


def helm_env() -> dict[str, str]:
    """helm's environment: no repository config or cache of the user's (template and lint need none)."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}


def finalizer_policy(release: str, watch: list[str]) -> list[dict[str, Any]]:
    """The chart's finalizer policy and its binding, as helm renders them for a cluster that serves
    MutatingAdmissionPolicy (this one does) and an operator watching ``watch`` ([]: every namespace)."""
    from tests.gitops.tools import helm_binary

    values = yaml.safe_dump({"watchNamespaces": watch})
    args = ["template", release, str(CHART), "-f", "-", "--api-versions", MAP_API]
    out = subprocess.run(
        [str(helm_binary()), *args], input=values, capture_output=True, text=True, env=helm_env(), check=True
    ).stdout
    return [
        doc for doc in yaml.safe_load_all(out) if doc and doc["kind"].startswith("MutatingAdmissionPolicy")
    ]


def dry_run_create(
    kubectl: Kubectl, obj: Mapping[str, Any], namespace: str, *, check: bool = True
) -> dict[str, Any] | None:
    """What the API server would store for ``obj``: a server-side dry run passes every admission
    plugin and stores nothing. None when it refuses, unless ``check`` (then kubectl's error)."""
    args = ("create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-")
    answer = kubectl.run(*args, stdin=json.dumps(obj), check=check)
    if answer.returncode != 0:
        return None
    stored: dict[str, Any] = json.loads(answer.stdout)
    return stored


def policy_in_force(kubectl: Kubectl, namespace: str) -> bool:
    """The API server has loaded the finalizer policy for ``namespace`` (it takes a second or so).
    A refused dry run counts as not yet: e.g. a CRD established a moment ago and not served yet."""
    probe = resource("BundleInstallation", "finalizer-probe", {"bundleRef": {"name": "b"}, "workspace": "w"})
    stored = dry_run_create(kubectl, probe, namespace, check=False)
    return stored is not None and FINALIZER in (stored["metadata"].get("finalizers") or [])


@dataclass
class OperatorProcess:
    """A running operator; its JSON log goes to ``log``."""

    kubeconfig: Path
    platform_url: str
    log: Path
    extra: tuple[str, ...] = ()
    # Which namespaces it watches; the session's operator leaves e2e-solo-* to tests that run their own.
    scope: tuple[str, ...] = ("--namespace", "!e2e-solo-*")
    env: dict[str, str] = field(default_factory=dict)  # more environment (SSL_CERT_FILE)
    process: subprocess.Popen[bytes] | None = None
    health_port: int = 0
    metrics_port: int = 0
    logs_seen: list[str] = field(default_factory=list)

    def start(self, timeout: float = 60.0) -> OperatorProcess:
        """Start it and wait until /readyz answers 200."""
        self.health_port, self.metrics_port = free_port(), free_port()
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1", **self.env}
        env.pop("BUNDLE_PLATFORM_TOKEN", None)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bundle_operator",
                    *self.scope,
                    "--platform-url",
                    self.platform_url,
                    "--allow-private-sources",
                    "--health-port",
                    str(self.health_port),
                    "--metrics-port",
                    str(self.metrics_port),
                    "--probe-host",
                    "127.0.0.1",
                    *self.extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )

        def ready() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited: {self.log.read_text()[-3000:]}")
            try:
                return httpx.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout, "the operator's /readyz")
        return self

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as a node failure would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.process is not None
        return sigterm_and_wait(self.process, timeout)

    def metrics(self) -> str:
        """The Prometheus text of /metrics."""
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text


@contextmanager
def solo_operator(
    kubeconfig: Path,
    platform_url: str,
    log: Path,
    namespace: str,
    *,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Iterator[OperatorProcess]:
    """An operator of the test's own that watches only ``namespace``; stopped afterwards."""
    running = OperatorProcess(
        kubeconfig, platform_url, log, extra=extra, scope=("--namespace", namespace), env=env or {}
    ).start()
    try:
        yield running
    finally:
        running.stop()


def apply_object(kubectl: Kubectl, namespace: str, folder: Path, obj: dict[str, Any]) -> None:
    """``kubectl apply`` one manifest, written to ``folder`` first."""
    path = folder / f"{obj['kind']}-{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    kubectl.apply(path, namespace=namespace)


def wait_ready(
    kubectl: Kubectl, kind: str, name: str, namespace: str, timeout: float = 90.0
) -> dict[str, object]:
    """Wait for Ready=True with the current generation observed, as `kubectl wait` would."""

    def ready() -> dict[str, object] | None:
        obj = kubectl.get_or_none(kind, name, namespace)
        if obj is None:
            return None
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"].get("generation"):
            return None
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                return obj
        return None

    return wait_until(ready, timeout, f"{kind} {namespace}/{name} Ready")


def condition(obj: dict[str, object], type_: str) -> dict[str, object] | None:
    """One condition of an object's status."""
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def elapsed_since(start: float) -> float:
    """Seconds since ``start`` (time.monotonic)."""
    return time.monotonic() - start


def platform_list(platform: PlatformProcess, workspace: str, path: str) -> list[dict[str, Any]]:
    """Every entity of a collection in a workspace, straight from the platform's API."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{platform.url}/v1/workspaces/{workspace}/{path}", params=params, timeout=10).json()
        items += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def with_workspace(path: Path, tmp: Path, workspace: str) -> Path:
    """The example installation, pointed at a workspace of the test's own."""
    text = path.read_text().replace("workspace: acme", f"workspace: {workspace}")
    out = tmp / path.name
    out.write_text(text)
    return out


def state_record_text(state: dict[str, Any]) -> str:
    """The engine record in a state Secret, as JSON text (it is stored gzip-compressed)."""
    import base64
    import gzip

    raw = (state.get("data") or {}).get("record.json.gz")
    assert raw, f"the state Secret has no record.json.gz: keys {sorted(state.get('data') or {})}"
    return gzip.decompress(base64.b64decode(raw)).decode("utf-8")


@contextmanager
def registry_operator(
    kubeconfig: Path, platform_url: str, log: Path, namespace: str, ca_file: Path
) -> Iterator[OperatorProcess]:
    """A solo operator that trusts a stub registry's CA only through SSL_CERT_FILE, as a private
    registry would be trusted."""
    with solo_operator(
        kubeconfig, platform_url, log, namespace, env={"SSL_CERT_FILE": str(ca_file)}
    ) as running:
        yield running
