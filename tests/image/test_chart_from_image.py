"""The chart's workloads run for real from the built image against a real API server.

helm renders the chart (charts/bundle-operator/ci/image-values.yaml plus each test's values); its
CRDs, ServiceAccount, RBAC, Services and Secrets are applied to the control plane; the rendered
StatefulSet (the reference platform) and Deployment (the operator) run from the image through
tests/image/kubelet.py with exactly the rendered command, args, env, securityContext and volumes,
the rendered ServiceAccount's token mounted where in-cluster clients look for it, and
KUBERNETES_SERVICE_HOST/PORT pointing at the API server. So the operator runs on the in-cluster
configuration with nothing but the chart's RBAC, and an example installation must reach Ready.
"""

from __future__ import annotations

import secrets
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import Kubectl
from bundle_operator.devcluster.kubectl import condition, wait_until
from tests.docs.blocks import page_of
from tests.e2e.test_chart import CI, helm, render  # noqa: F401  (helm is a fixture)
from tests.image.conftest import GITHUB_HOST, GITHUB_PORT
from tests.image.kubelet import Cluster, Pod

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "k8s"
# The page whose install block this module runs, command by command (see test_the_getting_started_page).
PAGE = ROOT / "docs" / "getting-started" / "cluster.md"
PAGE_SCENE = "tested-by tests/image/test_chart_from_image.py"
IMAGE_VALUES = CI / "image-values.yaml"
WORKLOADS = ("Deployment", "StatefulSet")


class Release:
    """A rendered release on the control plane: its objects applied, its workloads ready to run."""

    def __init__(self, cluster: Cluster, image: str, docs: list[dict[str, Any]], namespace: str) -> None:
        self.cluster = cluster
        self.image = image
        self.docs = docs
        self.namespace = namespace
        self.pods: list[Pod] = []

    def workload(self, kind: str) -> dict[str, Any]:
        [found] = [d for d in self.docs if d["kind"] == kind]
        return found

    def apply(self, *, create_namespace: bool = True) -> None:
        kubectl = self.cluster.kubectl
        if create_namespace:
            kubectl.run("create", "namespace", self.namespace)
        objects = [d for d in self.docs if d["kind"] not in (*WORKLOADS, "CustomResourceDefinition")]
        kubectl.apply(yaml.safe_dump_all(objects))

    def pod(self, kind: str, name: str | None = None) -> Pod:
        workload = self.workload(kind)
        if name is None:
            name = f"{workload['metadata']['name']}-{secrets.token_hex(3)}"
        pod = Pod(self.cluster, workload, name, self.image)
        self.pods.append(pod)
        return pod

    def start_platform(self) -> Pod:
        """The embedded platform's StatefulSet pod, and its Service's name pointed at it."""
        sts = self.workload("StatefulSet")
        platform = self.pod("StatefulSet", f"{sts['metadata']['name']}-0").start()
        platform.wait_ready()
        port = platform.port("http")
        service = f"{sts['spec']['serviceName']}.{self.namespace}.svc"
        self.cluster.services[service] = (port, platform.probe_socket(port))
        return platform

    def stop(self) -> None:
        for pod in reversed(self.pods):
            pod.stop()


@pytest.fixture
def deploy(image_cluster: Cluster, image: str, helm: Path, tmp_path: Path) -> Iterator[Any]:  # noqa: F811
    releases: list[Release] = []

    def make(release: str, values: dict[str, Any], namespace: str | None = None) -> Release:
        github = {
            "embeddedPlatform": {"extraArgs": [f"--github-base-url=http://{GITHUB_HOST}:{GITHUB_PORT}"]}
        }
        namespace = namespace or release
        docs = render(
            helm, IMAGE_VALUES, overrides=github | values, tmp=tmp_path, release=release, namespace=namespace
        )
        made = Release(image_cluster, image, docs, namespace)
        releases.append(made)
        return made

    shared = dict(image_cluster.services)
    try:
        yield make
    finally:
        for made in releases:
            made.stop()
        image_cluster.services = shared


def install_example(kubectl: Kubectl, namespace: str) -> None:
    """examples/k8s/ into the namespace, into a workspace of the same name.

    A workspace of its own: one bundle goes into one workspace of a platform once, and the
    installations of earlier tests stay in the cluster (a cluster-wide operator sees them all).
    """
    kubectl.run("create", "namespace", namespace, check=False)
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        for doc in docs:
            if doc["kind"] == "BundleInstallation":
                doc["spec"]["workspace"] = namespace
        kubectl.apply(yaml.safe_dump_all(docs), namespace=namespace)


def wait_installed(kubectl: Kubectl, namespace: str, timeout: float = 120) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        obj = kubectl.get_or_none("bundleinstallations.bundle-operator.dev", "github-triage", namespace)
        found = condition(obj, "Ready") if obj else None
        return obj if found is not None and found.get("status") == "True" else None

    try:
        return wait_until(
            ready, timeout, f"the example installation in {namespace} to be Ready", interval=1.0
        )
    except Exception as error:
        seen = kubectl.run(
            "get", "bundles,bundleinstallations", "-n", namespace, "-o", "yaml", check=False
        ).stdout
        events = kubectl.run("get", "events", "-n", namespace, check=False).stdout
        raise AssertionError(f"{error}\n{seen[-3000:]}\n{events[-2000:]}") from error


def assert_clean_run(pod: Pod) -> None:
    """It ran without a traceback or a refused API call, and SIGTERM ends it with 0 in its grace period."""
    code = pod.terminate()
    log = pod.log_text()
    assert code == 0, f"{pod.name} exited with {code}:\n{pod.log_tail()}"
    assert "Traceback" not in log, log[-4000:]
    assert "Forbidden" not in log and " 403" not in log, log[-4000:]


def can_i(kubectl: Kubectl, account: str, *args: str) -> bool:
    done = kubectl.run("auth", "can-i", *args, f"--as={account}", check=False)
    return done.stdout.strip() == "yes"


def service_account(release: Release) -> str:
    [account] = [d for d in release.docs if d["kind"] == "ServiceAccount"]
    return f"system:serviceaccount:{release.namespace}:{account['metadata']['name']}"


def test_the_default_chart_runs_from_the_image_and_installs_the_example(
    deploy: Any, image_cluster: Cluster
) -> None:
    """Cluster-wide (a ClusterRole), the embedded platform beside it, a read-only root."""
    release = deploy("bo-default", {})
    release.apply()
    operator_spec = release.workload("Deployment")["spec"]["template"]["spec"]
    assert operator_spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    platform = release.start_platform()
    operator = release.pod("Deployment").start()
    operator.wait_ready()
    assert operator.probe("livenessProbe")
    # The operator's args are the rendered ones, the platform's URL among them.
    container = operator.container
    assert operator.args == [*container["command"], *container["args"]]
    service, (port, _) = list(image_cluster.services.items())[-1]
    assert f"--platform-url=http://{service}:{port}" in operator.args

    install_example(image_cluster.kubectl, "agents")
    installed = wait_installed(image_cluster.kubectl, "agents")
    assert installed["status"].get("entities"), installed["status"]
    # Metrics are served on the rendered port, and count the reconcile that just happened.
    assert operator.serves(operator.port("metrics"), "/metrics") == 200
    # The platform wrote its database to its volume (the PersistentVolumeClaim), not the image.
    [data] = platform.data_dirs.values()
    assert (data / "platform.db").is_file()
    assert (data / "platform.db").stat().st_uid == 65532

    assert_clean_run(operator)
    assert_clean_run(platform)


def test_watch_namespaces_runs_on_roles_alone_under_an_arbitrary_uid(
    deploy: Any, image_cluster: Cluster
) -> None:
    """Roles in the watched namespace only, a platform token from a Secret, a uid with no passwd entry."""
    kubectl = image_cluster.kubectl
    for namespace in ("team-a", "team-b"):
        kubectl.run("create", "namespace", namespace)
    release = deploy(
        "bo-scoped",
        {
            "watchNamespaces": ["team-a"],
            "platform": {"tokenSecret": {"name": "platform-token"}},
            # As OpenShift assigns: a uid the image's /etc/passwd does not know.
            "podSecurityContext": {"runAsUser": 1000700000},
        },
    )
    # Cluster-wide only the webhook configuration's CA, by the configuration's name.
    cluster_wide = [
        (d["kind"], d["metadata"]["name"]) for d in release.docs if d["kind"].startswith("Cluster")
    ]
    assert cluster_wide == [
        ("ClusterRole", "bo-scoped-bundle-operator-webhook"),
        ("ClusterRoleBinding", "bo-scoped-bundle-operator-webhook"),
    ]
    release.apply()
    token = secrets.token_urlsafe(24)
    kubectl.run(
        "create",
        "secret",
        "generic",
        "platform-token",
        "-n",
        release.namespace,
        f"--from-literal=token={token}",
    )
    platform = release.start_platform()
    assert any(arg.startswith("--token-file=") for arg in platform.args)
    operator = release.pod("Deployment").start()
    operator.wait_ready()

    install_example(kubectl, "team-a")
    wait_installed(kubectl, "team-a")
    install_example(kubectl, "team-b")
    time.sleep(5)  # several reconcile periods: an operator that saw team-b would have written status
    outside = kubectl.get("bundleinstallations.bundle-operator.dev", "github-triage", "team-b")
    assert not outside.get("status"), outside.get("status")

    account = service_account(release)
    assert can_i(kubectl, account, "get", "secrets", "-n", "team-a")
    assert not can_i(kubectl, account, "get", "secrets", "-n", "team-b")
    assert not can_i(kubectl, account, "list", "secrets", "--all-namespaces")
    assert token not in operator.log_text() and token not in platform.log_text()

    assert_clean_run(operator)
    assert_clean_run(platform)


def test_two_replicas_elect_one_leader_and_the_standby_takes_over(
    deploy: Any, image_cluster: Cluster
) -> None:
    """replicas: 2 runs leader election on a Lease: one pod reconciles, the other takes over on SIGTERM."""
    kubectl = image_cluster.kubectl
    release = deploy("bo-standby", {"replicas": 2})
    release.apply()
    release.start_platform()
    first, second = release.pod("Deployment").start(), release.pod("Deployment").start()
    first.wait_ready()
    second.wait_ready()
    lease_name = next(a.split("=", 1)[1] for a in first.args if a.startswith("--leader-election-id="))

    def holder() -> str | None:
        lease = kubectl.get_or_none("leases.coordination.k8s.io", lease_name, release.namespace)
        return (lease or {}).get("spec", {}).get("holderIdentity") or None

    leader_name = wait_until(holder, 60, "a replica to hold the Lease")
    leader, standby = (first, second) if leader_name == first.name else (second, first)
    assert leader_name == leader.name, f"the Lease names a pod: {leader_name}"
    install_example(kubectl, "ha-1")
    wait_installed(kubectl, "ha-1")

    assert_clean_run(leader)
    wait_until(lambda: holder() == standby.name or None, 60, f"{standby.name} to take the Lease")
    install_example(kubectl, "ha-2")
    wait_installed(kubectl, "ha-2")
    assert standby.probe("readinessProbe")
    assert_clean_run(standby)


def page_commands() -> list[list[str]]:
    """The commands of the page's block this test runs, each split as the shell would split it."""
    (block,) = page_of("getting-started/cluster.md", PAGE.read_text(encoding="utf-8")).runnable(PAGE_SCENE)
    text = "\n".join(block.body).replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_the_getting_started_page_installs_the_chart_and_the_example(
    deploy: Any, image_cluster: Cluster
) -> None:
    """docs/getting-started/cluster.md's demo, command by command: kubectl runs as written (from the
    repository root); `helm install` is the chart rendered with the page's release and namespace and
    run by the stand-in kubelet; `rollout status` waits for that operator pod to be ready."""
    kubectl = image_cluster.kubectl
    release: Release | None = None
    operator: Pod | None = None
    printed = ""
    for argv in page_commands():
        match argv:
            case ["helm", "install", name, "charts/bundle-operator", "-n", namespace]:
                release = deploy(name, {}, namespace=namespace)
                release.apply(create_namespace=False)
                release.start_platform()
                operator = release.pod("Deployment").start()
            case ["kubectl", "-n", namespace, "rollout", "status", deployment, *_]:
                assert release is not None and operator is not None, "rollout status before helm install"
                assert namespace == release.namespace
                assert deployment == f"deployment/{release.workload('Deployment')['metadata']['name']}"
                operator.wait_ready()
            case ["kubectl", *args]:
                done = subprocess.run(
                    kubectl.command(*args), cwd=ROOT, capture_output=True, text=True, timeout=330, check=False
                )
                assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}: {done.stderr}"
                printed = done.stdout
            case _:
                pytest.fail(f"{PAGE.name} shows a command this test cannot run: {shlex.join(argv)}")
    assert release is not None and operator is not None, f"{PAGE.name} installs no chart"
    # The page's last command shows the installation Ready, as the text after the block says.
    rows = [line.split() for line in printed.splitlines()]
    assert ["bundleinstallation.bundle-operator.dev/github-triage", "True", "Installed", "1.4.0"] in [
        row[:4] for row in rows
    ], printed
    assert_clean_run(operator)
