"""The dev cluster is a real Kubernetes control plane: each test checks what only a real one does."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl, processes, wait_until

pytestmark = pytest.mark.e2e

MANIFESTS = Path(__file__).resolve().parent / "manifests"
CRD = "widgets.e2e.bundle-operator.dev"
GROUP = "e2e.bundle-operator.dev"


@pytest.fixture(scope="module")
def widget_crd(kubectl: Kubectl) -> str:
    """The Widget CRD, applied from its file and established."""
    kubectl.apply(MANIFESTS / "widgets-crd.yaml")
    kubectl.wait_for_condition("crd", CRD, "Established", timeout=30)
    return CRD


def widget(name: str, minimum: int = 1, maximum: int = 3, **metadata: Any) -> dict[str, Any]:
    """A Widget manifest."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": {"min": minimum, "max": maximum},
    }


def test_server_reports_the_release_it_was_built_from(kubectl: Kubectl, kubernetes_version: str) -> None:
    versions = json.loads(kubectl.run("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == kubernetes_version
    assert versions["serverVersion"]["minor"] == versions["clientVersion"]["minor"]
    readyz = kubectl.run("get", "--raw", "/readyz?verbose").stdout
    assert "readyz check passed" in readyz
    assert "[+]etcd ok" in readyz


def test_crd_is_served_through_discovery(kubectl: Kubectl, widget_crd: str) -> None:
    def discovered() -> bool:
        names = kubectl.run("api-resources", f"--api-group={GROUP}", "-o", "name").stdout.split()
        return f"widgets.{GROUP}" in names

    wait_until(discovered, 30, "widgets in discovery")
    wide = kubectl.run("api-resources", f"--api-group={GROUP}", "-o", "wide").stdout
    assert "wdg" in wide
    assert "e2e" in wide


def test_custom_resource_is_created_and_defaulted(kubectl: Kubectl, widget_crd: str, namespace: str) -> None:
    kubectl.apply(MANIFESTS / "widget-valid.yaml", namespace=namespace)

    created = kubectl.get("widget", "small", namespace)
    assert created["spec"] == {"min": 1, "max": 3, "color": "blue"}
    assert created["metadata"]["generation"] == 1
    listed = kubectl.run("get", "wdg", "-n", namespace, "-o", "name").stdout.split()
    assert listed == [f"widget.{GROUP}/small"]


def test_cel_rule_rejects_an_invalid_resource_with_its_message(
    kubectl: Kubectl, widget_crd: str, namespace: str
) -> None:
    result = kubectl.apply(MANIFESTS / "widget-invalid.yaml", namespace=namespace, check=False)

    assert result.returncode != 0
    assert "spec.min must not exceed spec.max" in result.stderr
    assert kubectl.get_or_none("widget", "upside-down", namespace) is None


def test_structural_schema_refuses_unknown_fields_and_enum_values(
    kubectl: Kubectl, widget_crd: str, namespace: str
) -> None:
    unknown = widget("odd")
    unknown["spec"]["size"] = 4
    result = kubectl.apply(unknown, namespace=namespace, check=False)
    assert result.returncode != 0
    assert 'unknown field "spec.size"' in result.stderr

    off_palette = widget("red")
    off_palette["spec"]["color"] = "red"
    result = kubectl.apply(off_palette, namespace=namespace, check=False)
    assert result.returncode != 0
    assert 'Unsupported value: "red"' in result.stderr


class Watch:
    """`kubectl get --watch -o json --output-watch-events` in the background, event by event."""

    def __init__(self, kubectl: Kubectl, *args: str) -> None:
        argv = kubectl.command("get", *args, "--watch", "-o", "json", "--output-watch-events")
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        buffer = ""
        for line in self.process.stdout:
            # One event per line in watch mode; accumulate anyway, in case an object spans lines.
            buffer += line
            try:
                event = json.loads(buffer)
            except ValueError:
                continue
            self.events.put(event)
            buffer = ""

    def next(self, timeout: float = 30) -> dict[str, Any]:
        """The next event; fails the test if none arrives in time."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            stderr = (
                self.process.stderr.read() if self.process.poll() is not None and self.process.stderr else ""
            )
            pytest.fail(f"no watch event within {timeout} s {stderr}")

    def close(self) -> None:
        """Stop kubectl."""
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def watch_widgets(kubectl: Kubectl, widget_crd: str, namespace: str) -> Iterator[Watch]:
    """A watch on the Widgets of the test's namespace."""
    watch = Watch(kubectl, "widgets", "-n", namespace)
    yield watch
    watch.close()


def test_watch_delivers_added_modified_deleted(
    kubectl: Kubectl, namespace: str, watch_widgets: Watch
) -> None:
    kubectl.apply(widget("watched", maximum=3), namespace=namespace)
    added = watch_widgets.next()
    assert (added["type"], added["object"]["spec"]["max"]) == ("ADDED", 3)

    kubectl.run("patch", "widget", "watched", "-n", namespace, "--type=merge", "-p", '{"spec":{"max":4}}')
    modified = watch_widgets.next()
    assert (modified["type"], modified["object"]["spec"]["max"]) == ("MODIFIED", 4)
    assert modified["object"]["metadata"]["generation"] == 2

    kubectl.run("delete", "widget", "watched", "-n", namespace)
    deleted = watch_widgets.next()
    assert (deleted["type"], deleted["object"]["metadata"]["name"]) == ("DELETED", "watched")


def test_finalizer_blocks_deletion_until_removed(kubectl: Kubectl, widget_crd: str, namespace: str) -> None:
    kubectl.apply(widget("held", finalizers=[f"{GROUP}/hold"]), namespace=namespace)

    kubectl.run("delete", "widget", "held", "-n", namespace, "--wait=false")
    # Without the finalizer the delete is immediate; give the server ample time to prove otherwise.
    time.sleep(2)
    held = kubectl.get("widget", "held", namespace)
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == [f"{GROUP}/hold"]

    kubectl.run(
        "patch", "widget", "held", "-n", namespace, "--type=json",
        "-p", '[{"op":"remove","path":"/metadata/finalizers"}]',
    )  # fmt: skip
    kubectl.wait_for_deletion("widget", "held", namespace, timeout=30)


def test_status_subresource_write_does_not_bump_generation(
    kubectl: Kubectl, widget_crd: str, namespace: str
) -> None:
    kubectl.apply(widget("observed"), namespace=namespace)
    before = kubectl.get("widget", "observed", namespace)

    status = {"status": {"phase": "Ready", "observedGeneration": 1}}
    kubectl.run(
        "patch", "widget", "observed", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip
    after = kubectl.get("widget", "observed", namespace)
    assert after["status"] == status["status"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"] == 1
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]

    # Through the main resource, status is ignored and spec bumps the generation.
    kubectl.run(
        "patch", "widget", "observed", "-n", namespace, "--type=merge",
        "-p", '{"spec":{"max":9},"status":{"phase":"Tampered"}}',
    )  # fmt: skip
    changed = kubectl.get("widget", "observed", namespace)
    assert changed["metadata"]["generation"] == 2
    assert changed["status"]["phase"] == "Ready"
    printed = kubectl.run("get", "widget", "observed", "-n", namespace).stdout
    assert "Ready" in printed.splitlines()[1]


def test_owned_secret_is_garbage_collected_after_its_owner(
    kubectl: Kubectl, widget_crd: str, namespace: str
) -> None:
    kubectl.apply(widget("owner"), namespace=namespace)
    owner = kubectl.get("widget", "owner", namespace)
    reference = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for name, references in (("owned", [reference]), ("unowned", [])):
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "ownerReferences": references},
            "stringData": {"token": "not-a-real-secret"},
        }
        kubectl.apply(secret, namespace=namespace)

    kubectl.run("delete", "widget", "owner", "-n", namespace)
    # The garbage collector of kube-controller-manager notices the owner is gone.
    kubectl.wait_for_deletion("secret", "owned", namespace, timeout=90)
    assert kubectl.get_or_none("secret", "unowned", namespace) is not None


def test_namespace_deletion_completes(kubectl: Kubectl) -> None:
    name = f"e2e-doomed-{os.getpid()}"
    kubectl.run("create", "namespace", name)
    kubectl.run("create", "configmap", "inside", "-n", name, "--from-literal=k=v")

    kubectl.run("delete", "namespace", name, "--wait=false")
    # The namespace controller empties it and removes the `kubernetes` finalizer.
    kubectl.wait_for_deletion("namespace", name, timeout=90)


def test_rbac_authorizes_a_service_account_token(
    kubectl: Kubectl, devcluster: DevCluster, namespace: str
) -> None:
    kubectl.run("create", "serviceaccount", "reader", "-n", namespace)
    token = kubectl.run("create", "token", "reader", "-n", namespace).stdout.strip()
    as_reader = [
        f"--server={devcluster.server}",
        f"--certificate-authority={devcluster.ca_cert}",
        f"--token={token}",
    ]

    def as_reader_run(*args: str) -> subprocess.CompletedProcess[str]:
        # No kubeconfig: the admin's client certificate would win over the token.
        argv = [str(devcluster.binaries.kubectl), "--kubeconfig=/dev/null", *as_reader, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    whoami = json.loads(as_reader_run("auth", "whoami", "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:reader"
    denied = as_reader_run("get", "secrets", "-n", namespace)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr

    kubectl.run("create", "role", "read-secrets", "--verb=get,list", "--resource=secrets", "-n", namespace)
    kubectl.run(
        "create", "rolebinding", "reader", "--role=read-secrets",
        f"--serviceaccount={namespace}:reader", "-n", namespace,
    )  # fmt: skip

    def reader_lists_secrets() -> subprocess.CompletedProcess[str] | None:
        result = as_reader_run("get", "secrets", "-n", namespace)
        return result if result.returncode == 0 else None

    allowed = wait_until(reader_lists_secrets, 30, "the role binding to take effect")
    assert "forbidden" not in allowed.stderr
    # The binding is namespaced: other namespaces stay closed, as the admin sees by impersonation.
    elsewhere = kubectl.run(
        "auth", "can-i", "list", "secrets", "-n", "default",
        f"--as=system:serviceaccount:{namespace}:reader", check=False,
    )  # fmt: skip
    assert elsewhere.stdout.strip() == "no"


CRASHING_OWNER = """
import json, sys, time
from pathlib import Path
from bundle_operator.devcluster import Binaries, DevCluster
paths = json.loads(sys.argv[1])
cluster = DevCluster(Binaries(**{key: Path(value) for key, value in paths.items()}), controller_manager=False)
cluster.start()
print(json.dumps({"workdir": str(cluster.workdir), "pids": list(cluster.pids.values())}), flush=True)
time.sleep(600)
"""


def test_leftovers_of_a_crashed_run_are_stopped(
    devcluster: DevCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run files under a private cache, so this test touches no other cluster's record.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    binaries = {
        "etcd": str(devcluster.binaries.etcd),
        "kube_apiserver": str(devcluster.binaries.kube_apiserver),
        "kube_controller_manager": str(devcluster.binaries.kube_controller_manager),
        "kubectl": str(devcluster.binaries.kubectl),
    }
    owner = subprocess.Popen(
        [sys.executable, "-c", CRASHING_OWNER, json.dumps(binaries)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    try:
        assert owner.stdout is not None
        started = json.loads(owner.stdout.readline())
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    children = [processes.ProcessIdentity.of(pid) for pid in started["pids"]]
    assert len(children) == 2
    assert all(child is not None and child.alive() for child in children)

    cleaned = processes.reap_leftovers()

    assert len(cleaned) == 1
    assert not any(child is not None and child.alive() for child in children)
    assert not Path(started["workdir"]).exists()
    assert list(processes.state_root().glob("*.json")) == []
