"""One dev cluster: etcd, a secure kube-apiserver and kube-controller-manager on loopback."""

from __future__ import annotations

import base64
import http.client
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import yaml

from bundle_operator.devcluster import pki, processes
from bundle_operator.devcluster.binaries import Binaries

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
# kube-apiserver must advertise an address. Left to itself it picks the interface of the default
# route (none on an isolated machine), and a loopback address is refused by the endpoint reconciler
# that writes the `kubernetes` Service's endpoints. So advertise a documentation address (RFC 5737,
# never routed) and switch that reconciler off: nothing ever dials the address, and clients reach
# the server through the kubeconfig's 127.0.0.1 URL.
ADVERTISE_ADDRESS = "198.51.100.10"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
LOG_TAIL_LINES = 40
BIND_RETRIES = 3


class ClusterStartError(RuntimeError):
    """A component did not come up; the message carries the end of its log."""


@dataclass
class _Component:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]


class DevCluster:
    """A local control plane: start(), then point kubectl or a client at `kubeconfig`; stop() ends it."""

    def __init__(
        self,
        binaries: Binaries,
        workdir: Path | None = None,
        kubeconfig: Path | None = None,
        controller_manager: bool = True,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.binaries = binaries
        self._owns_workdir = workdir is None
        self.workdir = (
            Path(tempfile.mkdtemp(prefix="bundle-operator-devcluster-")) if workdir is None else workdir
        )
        self.kubeconfig = kubeconfig or self.workdir / "kubeconfig"
        self._with_controller_manager = controller_manager
        self._apiserver_args = list(apiserver_args)
        self._components: list[_Component] = []
        self._record: processes.RunRecord | None = None
        self._files: pki.PKIFiles | None = None
        self._apiserver_argv: list[str] = []
        self.server = ""
        self.ready_seconds = 0.0

    def __enter__(self) -> DevCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> DevCluster:
        """Start etcd and kube-apiserver, wait for /readyz, then start kube-controller-manager."""
        started = time.monotonic()
        processes.reap_leftovers()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        owner = processes.ProcessIdentity.of(os.getpid())
        if owner is None:
            raise ClusterStartError("the dev cluster tracks its processes through /proc: Linux only")
        self._record = processes.RunRecord(owner, str(self.workdir), self._owns_workdir)
        self._record.save()
        try:
            credentials = pki.generate(SERVICE_IP, ADVERTISE_ADDRESS)
            self._files = pki.write(credentials, self.workdir / "pki")
            deadline = started + timeout
            etcd_url = self._start_etcd(deadline)
            self._start_apiserver(etcd_url, credentials, deadline)
            self.ready_seconds = time.monotonic() - started
            if self._with_controller_manager:
                self._start_controller_manager(credentials, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the components in reverse order of start; delete what this cluster created."""
        for component in reversed(self._components):
            processes.stop_child(component.process, timeout)
            component.log.close()
        self._components.clear()
        if self._record is not None:
            self._record.discard()
            self._record = None
        # A kubeconfig left behind would point clients at a port some other process may get next.
        if not self.kubeconfig.is_relative_to(self.workdir):
            self.kubeconfig.unlink(missing_ok=True)
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def ca_cert(self) -> Path:
        """The cluster CA certificate (PEM), for clients that do not read the kubeconfig."""
        return self._require_files().ca_cert

    @property
    def pids(self) -> dict[str, int]:
        """The process id of each running component, by name."""
        return {component.name: component.process.pid for component in self._components}

    def exited(self) -> str | None:
        """The name of a component that has exited on its own, if any."""
        for component in self._components:
            if component.process.poll() is not None:
                return component.name
        return None

    def log_tail(self, name: str, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines a component wrote to its log."""
        path = self.workdir / "logs" / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- components ------------------------------------------------------------------------------

    def _launch(self, name: str, argv: list[str]) -> _Component:
        log_path = self.workdir / "logs" / f"{name}.log"
        log = log_path.open("ab")
        # A session of its own: Ctrl-C in a terminal reaches only the supervisor, which then stops
        # the components in order (controller manager, apiserver, etcd last).
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        component = _Component(name, process, log_path, log)
        self._components.append(component)
        identity = processes.ProcessIdentity.of(process.pid)
        if identity is not None and self._record is not None:
            self._record.children.append(identity)
            self._record.save()
        return component

    def _forget(self, component: _Component) -> None:
        processes.stop_child(component.process, 5.0)
        component.log.close()
        self._components.remove(component)

    def _run_until_ready(
        self, name: str, make_argv: Callable[[], list[str]], ready: Callable[[], bool], deadline: float
    ) -> None:
        """Launch a component and poll `ready`; relaunch on new ports if one was taken meanwhile."""
        for _attempt in range(BIND_RETRIES):
            component = self._launch(name, make_argv())
            while time.monotonic() < deadline:
                if component.process.poll() is not None:
                    break
                if ready():
                    return
                time.sleep(0.1)
            else:
                raise ClusterStartError(f"{name} not ready in time:\n{self.log_tail(name)}")
            tail = self.log_tail(name)
            self._forget(component)
            if "address already in use" not in tail:
                raise ClusterStartError(f"{name} exited with {component.process.returncode}:\n{tail}")
        raise ClusterStartError(f"{name} found no free port in {BIND_RETRIES} attempts")

    def _start_etcd(self, deadline: float) -> str:
        ports = {"client": 0, "peer": 0}

        def argv() -> list[str]:
            ports.update(client=processes.free_port(), peer=processes.free_port())
            client, peer = f"http://127.0.0.1:{ports['client']}", f"http://127.0.0.1:{ports['peer']}"
            return [
                str(self.binaries.etcd),
                "--name=devcluster",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=devcluster={peer}",
                # Throw-away data: skipping fsync makes every write, and so every test, faster.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]

        def healthy() -> bool:
            return _http_ok(f"http://127.0.0.1:{ports['client']}/health", None)

        self._run_until_ready("etcd", argv, healthy, deadline)
        return f"http://127.0.0.1:{ports['client']}"

    def _start_apiserver(self, etcd_url: str, credentials: pki.ClusterPKI, deadline: float) -> None:
        files = self._require_files()
        context = _client_context(files.ca_cert, files.admin_cert, files.admin_key)
        port = 0

        def argv() -> list[str]:
            nonlocal port
            port = processes.free_port()
            self.server = f"https://127.0.0.1:{port}"
            write_kubeconfig(self.kubeconfig, self.server, credentials.ca, credentials.admin, "admin")
            return [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--advertise-address={ADVERTISE_ADDRESS}",
                "--endpoint-reconciler-type=none",
                f"--cert-dir={self.workdir / 'apiserver'}",
                f"--tls-cert-file={files.apiserver_cert}",
                f"--tls-private-key-file={files.apiserver_key}",
                f"--client-ca-file={files.ca_cert}",
                "--authorization-mode=RBAC",
                # As on many production clusters: an ownerReference with blockOwnerDeletion needs
                # update on the owner's finalizers, so the chart's RBAC test sees that rule matter.
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
                f"--requestheader-client-ca-file={files.front_proxy_ca_cert}",
                f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={files.front_proxy_client_cert}",
                f"--proxy-client-key-file={files.front_proxy_client_key}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={files.service_account_public}",
                f"--service-account-signing-key-file={files.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--profiling=false",
                *self._apiserver_args,
            ]

        def remembered() -> list[str]:
            self._apiserver_argv = argv()
            return self._apiserver_argv

        def ready() -> bool:
            return _http_ok(f"{self.server}/readyz", context)

        self._run_until_ready("kube-apiserver", remembered, ready, deadline)

    def restart_apiserver(self, down_seconds: float = 0.0, timeout: float = 60.0) -> float:
        """Stop kube-apiserver (SIGTERM) and start it again on the same port with the same flags, as
        a rolling control-plane upgrade does; etcd keeps every object. Returns the seconds it was
        not answering (stop, ``down_seconds``, start until /readyz)."""
        index, old = next((i, c) for i, c in enumerate(self._components) if c.name == "kube-apiserver")
        started = time.monotonic()
        processes.stop_child(old.process, 15.0)
        old.log.close()
        self._components.remove(old)
        if self._record is not None:
            self._record.children = [c for c in self._record.children if c.alive()]
        time.sleep(down_seconds)
        files = self._require_files()
        context = _client_context(files.ca_cert, files.admin_cert, files.admin_key)
        deadline = time.monotonic() + timeout
        # The port was just released; another process may take it meanwhile, but nothing can be
        # done about that without a new kubeconfig, so a taken port fails the restart.
        new = self._launch("kube-apiserver", self._apiserver_argv)
        # Back in its place, so stop() still stops it after the controller manager and before etcd.
        self._components.remove(new)
        self._components.insert(index, new)
        while not _http_ok(f"{self.server}/readyz", context):
            if new.process.poll() is not None:
                raise ClusterStartError(
                    f"kube-apiserver exited on restart:\n{self.log_tail('kube-apiserver')}"
                )
            if time.monotonic() > deadline:
                raise ClusterStartError(
                    f"kube-apiserver not ready after restart:\n{self.log_tail('kube-apiserver')}"
                )
            time.sleep(0.1)
        return time.monotonic() - started

    def _start_controller_manager(self, credentials: pki.ClusterPKI, deadline: float) -> None:
        files = self._require_files()
        kubeconfig = self.workdir / "controller-manager.kubeconfig"
        write_kubeconfig(
            kubeconfig, self.server, credentials.ca, credentials.controller_manager, "controller-manager"
        )
        context = _client_context(files.ca_cert, None, None)
        port = 0

        def argv() -> list[str]:
            nonlocal port
            port = processes.free_port()
            return [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={files.controller_manager_serving_cert}",
                f"--tls-private-key-file={files.controller_manager_serving_key}",
                f"--client-ca-file={files.ca_cert}",
                f"--cert-dir={self.workdir / 'controller-manager'}",
                # One instance only: leader election would only delay the first sync.
                "--leader-elect=false",
                # Each controller acts as its own service account, as on a real cluster.
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={files.service_account_key}",
                f"--root-ca-file={files.ca_cert}",
                f"--cluster-signing-cert-file={files.ca_cert}",
                f"--cluster-signing-key-file={files.ca_key}",
                "--cluster-name=devcluster",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--profiling=false",
            ]

        def healthy() -> bool:
            return _http_ok(f"https://127.0.0.1:{port}/healthz", context)

        self._run_until_ready("kube-controller-manager", argv, healthy, deadline)

    def _require_files(self) -> pki.PKIFiles:
        if self._files is None:
            raise RuntimeError("the PKI is written at the start of start()")
        return self._files


def write_kubeconfig(path: Path, server: str, ca: pki.CertKey, user: pki.CertKey, user_name: str) -> None:
    """Write a self-contained kubeconfig (certificates inline), readable by its owner only."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {"server": server, "certificate-authority-data": b64(ca.cert_pem)},
            }
        ],
        "users": [
            {
                "name": user_name,
                "user": {"client-certificate-data": b64(user.cert_pem), "client-key-data": b64(user.key_pem)},
            }
        ],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": user_name}}],
        "current-context": "devcluster",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _client_context(ca: Path, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key) if key else None)
    return context


def _http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    # No proxy: a proxy configured for package registries must not see loopback health checks.
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(url, timeout=2) as response:
            status: int = response.status
            return status == 200
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError):
        return False
