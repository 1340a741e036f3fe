"""Run a rendered pod template from the built image, the way a kubelet would, on this machine.

No container runtime runs here (``podman run`` does not), so this does a kubelet's part by hand:
the image's root filesystem comes from buildah (``buildah from`` + ``buildah mount``); each pod gets
a network namespace of its own (``ip netns``), so replicas listen on the same ports; the
container's command and args (``$(VAR)`` expanded), env (``fieldRef`` resolved), securityContext
(uid, gid, fsGroup, read-only root, no privilege escalation), volumes (emptyDir, Secret, a
PersistentVolumeClaim as a host directory, the service account token) and /etc/hosts (Service
names) are applied by tests/image/launch.py, and the process runs as PID 1 of a PID namespace.
The API server and other pods are reached through tests/image/forward.py, which joins namespaces
over Unix sockets. Probes are the rendered httpGet probes, sent through the same forwarder.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bundle_operator.devcluster import Kubectl

HERE = Path(__file__).resolve().parent
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_PORT_IN_POD = 443


def sh(*argv: str, check: bool = True, timeout: float = 120) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


class ImageRoot:
    """A working container of the image: its config and its root filesystem, mounted."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.container = sh(
            "buildah", "from", "--pull=never", "--name", f"pod-{secrets.token_hex(4)}", image
        ).strip()
        self.rootfs = Path(sh("buildah", "mount", self.container).strip())
        config = json.loads(sh("buildah", "inspect", "--type", "container", self.container))["OCIv1"][
            "config"
        ]
        self.entrypoint: list[str] = config.get("Entrypoint") or []
        self.cmd: list[str] = config.get("Cmd") or []
        self.env: dict[str, str] = dict(item.split("=", 1) for item in config.get("Env") or [])
        self.workdir: str = config.get("WorkingDir") or "/"
        self.user: str = config.get("User") or "0"

    def remove(self) -> None:
        sh("buildah", "umount", self.container, check=False)
        sh("buildah", "rm", self.container, check=False)


class Netns:
    """A network namespace with only its loopback up: a pod's network."""

    def __init__(self) -> None:
        self.name = f"bo-{secrets.token_hex(4)}"
        sh("ip", "netns", "add", self.name)
        sh("ip", "-n", self.name, "link", "set", "lo", "up")

    def exec_argv(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def delete(self) -> None:
        sh("ip", "netns", "delete", self.name, check=False)


class Forwarder:
    """tests/image/forward.py with some rules, in a namespace (or the host's)."""

    def __init__(self, rules: list[str], netns: Netns | None, log: Path) -> None:
        argv = [sys.executable, str(HERE / "forward.py"), *rules]
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            netns.exec_argv(*argv) if netns else argv, stdout=subprocess.PIPE, stderr=self._log
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != b"forwarding":
            raise RuntimeError(f"the forwarder for {rules} did not start; see {log}")

    def stop(self) -> None:
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self.process.kill()
        self._log.close()


@dataclass
class Cluster:
    """What pods share: the API server behind a socket, Service names, and where files go."""

    kubectl: Kubectl
    api_port: int
    ca_file: Path
    workdir: Path
    services: dict[str, tuple[int, Path]] = field(default_factory=dict)  # hostname -> (port, socket)
    _forwarders: list[Forwarder] = field(default_factory=list)

    @property
    def api_socket(self) -> Path:
        return self.workdir / "apiserver.sock"

    def start(self) -> Cluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        forward = f"unix:{self.api_socket}=tcp:127.0.0.1:{self.api_port}"
        self._forwarders.append(Forwarder([forward], None, self.workdir / "forward-host.log"))
        return self

    def expose_host(self, hostname: str, port: int, host_port: int) -> None:
        """``hostname:port`` in every pod started from now on reaches ``127.0.0.1:host_port`` here."""
        sock = self.workdir / f"{hostname}.sock"
        self._forwarders.append(
            Forwarder([f"unix:{sock}=tcp:127.0.0.1:{host_port}"], None, self.workdir / "forward-host.log")
        )
        self.services[hostname] = (port, sock)

    def stop(self) -> None:
        for forwarder in self._forwarders:
            forwarder.stop()
        # A failing test has printed its pod's log tail; nothing else here is worth keeping.
        shutil.rmtree(self.workdir, ignore_errors=True)


def readable(directory: Path) -> Path:
    """A Secret or projected volume's modes as the kubelet writes them (defaultMode 0644)."""
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command, args and env values; ``$$`` escapes."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


@dataclass
class Pod:
    """One pod of a rendered workload: its first container, run from the image."""

    cluster: Cluster
    workload: dict[str, Any]
    name: str
    image: str
    data_dirs: dict[str, Path] = field(default_factory=dict)  # claim template name -> host dir
    process: subprocess.Popen[bytes] | None = None
    root: ImageRoot | None = None
    netns: Netns | None = None
    forwarder: Forwarder | None = None
    log: Path = Path()
    exit_code: int | None = None
    args: list[str] = field(default_factory=list)  # the argv it runs, set by start()

    @property
    def namespace(self) -> str:
        return str(self.workload["metadata"]["namespace"])

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.workload["spec"]["template"]["spec"])

    @property
    def container(self) -> dict[str, Any]:
        return dict(self.spec["containers"][0])

    def _dir(self) -> Path:
        path = self.cluster.workdir / self.name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def port(self, name_or_number: str | int) -> int:
        if isinstance(name_or_number, int):
            return name_or_number
        for port in self.container.get("ports", []):
            if port.get("name") == name_or_number:
                return int(port["containerPort"])
        raise KeyError(f"{self.name}: no container port named {name_or_number}")

    def probe_socket(self, port: int) -> Path:
        return self._dir() / f"port-{port}.sock"

    # --- what the kubelet resolves -------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        assert self.root is not None
        env = dict(self.root.env)
        env["HOSTNAME"] = self.name
        env["KUBERNETES_SERVICE_HOST"] = "127.0.0.1"
        env["KUBERNETES_SERVICE_PORT"] = str(API_PORT_IN_POD)
        fields = {"metadata.name": self.name, "metadata.namespace": self.namespace}
        for item in self.container.get("env", []):
            if "value" in item:
                env[item["name"]] = expand(str(item["value"]), env)
            elif "fieldRef" in item.get("valueFrom", {}):
                env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                raise NotImplementedError(f"{self.name}: env {item['name']} from {item['valueFrom']}")
        return env

    def _argv(self, env: dict[str, str]) -> list[str]:
        assert self.root is not None
        command = self.container.get("command") or self.root.entrypoint
        # As the kubelet: a container that sets its command but no args drops the image's Cmd too.
        default_args = [] if "command" in self.container else self.root.cmd
        args = self.container.get("args", default_args) or []
        return [expand(str(word), env) for word in [*command, *args]]

    def _secret_dir(self, name: str, items: list[dict[str, str]] | None, where: Path) -> Path:
        data = self.cluster.kubectl.get("secret", name, self.namespace)
        where.mkdir(parents=True, exist_ok=True)

        pairs = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data.get("data", {})]
        for key, path in pairs:
            (where / path).write_bytes(base64.b64decode(data["data"][key]))
        return readable(where)

    def _service_account_dir(self) -> Path:
        where = self._dir() / "serviceaccount"
        where.mkdir(exist_ok=True)
        account = self.spec.get("serviceAccountName", "default")
        token = self.cluster.kubectl.run(
            "create", "token", account, "-n", self.namespace, "--duration=1h"
        ).stdout
        (where / "token").write_text(token.strip())
        shutil.copy(self.cluster.ca_file, where / "ca.crt")
        (where / "namespace").write_text(self.namespace)
        return readable(where)

    def _mounts(self, uid: int, gid: int) -> list[dict[str, Any]]:
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        mounts: list[dict[str, Any]] = []
        for mount in self.container.get("volumeMounts", []):
            volume = volumes.get(mount["name"])
            entry: dict[str, Any] = {"target": mount["mountPath"], "readonly": bool(mount.get("readOnly"))}
            if volume is None:  # a volumeClaimTemplate of a StatefulSet
                source = self.data_dirs.setdefault(mount["name"], self._dir() / f"pvc-{mount['name']}")
                source.mkdir(parents=True, exist_ok=True)
                os.chown(source, uid, gid)
                entry |= {"type": "bind", "source": str(source)}
            elif "emptyDir" in volume:
                entry |= {"type": "tmpfs", "size": "64m"}
            elif "secret" in volume:
                where = self._secret_dir(
                    volume["secret"]["secretName"],
                    volume["secret"].get("items"),
                    self._dir() / f"secret-{mount['name']}",
                )
                entry |= {"type": "bind", "source": str(where), "readonly": True}
            else:
                raise NotImplementedError(f"{self.name}: volume {mount['name']} of kind {sorted(volume)}")
            mounts.append(entry)
        if self.spec.get("automountServiceAccountToken", True):
            mounts.append(
                {
                    "type": "bind",
                    "source": str(self._service_account_dir()),
                    "target": SERVICE_ACCOUNT_DIR,
                    "readonly": True,
                }
            )
        hosts = self._dir() / "hosts"
        lines = ["127.0.0.1\tlocalhost", f"127.0.0.1\t{self.name}"]
        lines += [f"127.0.0.1\t{name}" for name in self.cluster.services]
        hosts.write_text("\n".join(lines) + "\n")
        mounts.append(
            {"type": "bind", "source": str(hosts), "target": "/etc/hosts", "readonly": True, "file": True}
        )
        return mounts

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Pod:
        self.root = ImageRoot(self.image)
        pod_security = self.spec.get("securityContext", {})
        security = {**pod_security, **self.container.get("securityContext", {})}
        image_uid, _, image_gid = self.root.user.partition(":")
        uid = int(security.get("runAsUser", image_uid))
        gid = int(security.get("runAsGroup", image_gid or 0))
        if security.get("runAsNonRoot") and uid == 0:
            raise RuntimeError(f"{self.name}: runAsNonRoot with uid 0 would not start")
        groups = [gid] + ([int(pod_security["fsGroup"])] if "fsGroup" in pod_security else [])
        env = self._env()
        self.args = self._argv(env)
        spec = {
            "rootfs": str(self.root.rootfs),
            "workdir": self.container.get("workingDir") or self.root.workdir,
            "uid": uid,
            "gid": gid,
            "groups": sorted(set(groups)),
            "no_new_privs": security.get("allowPrivilegeEscalation") is False,
            "readonly_root": bool(security.get("readOnlyRootFilesystem")),
            "mounts": self._mounts(uid, gid),
            "argv": self.args,
            "env": env,
        }
        spec_file = self._dir() / "launch.json"
        spec_file.write_text(json.dumps(spec, indent=2))
        self.netns = Netns()
        rules = [f"tcp:127.0.0.1:{API_PORT_IN_POD}=unix:{self.cluster.api_socket}"]
        rules += [f"tcp:127.0.0.1:{port}=unix:{sock}" for port, sock in self.cluster.services.values()]
        rules += [
            f"unix:{self.probe_socket(int(p['containerPort']))}=tcp:127.0.0.1:{p['containerPort']}"
            for p in self.container.get("ports", [])
        ]
        self.forwarder = Forwarder(rules, self.netns, self._dir() / "forward.log")
        self.log = self._dir() / "container.log"
        argv = self.netns.exec_argv(
            "unshare", "--mount", "--pid", "--fork", "--propagation", "private",
            sys.executable, str(HERE / "launch.py"), str(spec_file),
        )  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return self

    def serves(self, port: int, path: str) -> int | None:
        """The HTTP status of GET path on the container's port, or None when nothing answers."""
        try:
            with httpx.Client(
                transport=httpx.HTTPTransport(uds=str(self.probe_socket(port))), timeout=5
            ) as client:
                return client.get(f"http://{self.name}{path}").status_code
        except httpx.HTTPError:
            return None

    def probe(self, kind: str) -> bool:
        """The rendered ``livenessProbe`` or ``readinessProbe`` (httpGet), as the kubelet sends it."""
        http = self.container[kind]["httpGet"]
        return self.serves(self.port(http["port"]), http["path"]) == 200

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exited():
                raise AssertionError(f"{self.name} exited with {self.exit_code}:\n{self.log_tail()}")
            if self.probe("readinessProbe"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{self.name} was not ready within {timeout:.0f} s:\n{self.log_tail()}")

    def exited(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            self.exit_code = self.process.returncode
            return True
        return False

    def _container_pid(self) -> int | None:
        """The container's process (PID 1 of its namespace): the child of unshare."""
        if self.process is None or self.process.poll() is not None:
            return None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        with contextlib.suppress(OSError):
            pids = children.read_text().split()
            return int(pids[0]) if pids else None
        return None

    def terminate(self, grace: float | None = None) -> int | None:
        """SIGTERM to the container's process, SIGKILL after the rendered grace period; its exit code."""
        grace = float(self.spec.get("terminationGracePeriodSeconds", 30)) if grace is None else grace
        pid = self._container_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if self.process is not None:
            try:
                self.exit_code = self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.exit_code = self.process.wait(10)
        return self.exit_code

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.terminate(grace=15)
        if self.forwarder is not None:
            self.forwarder.stop()
        if self.netns is not None:
            self.netns.delete()
        if self.root is not None:
            self.root.remove()

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def running(pods: list[Pod]) -> Iterator[list[Pod]]:
    """Start the pods and stop them afterwards, whatever happens."""
    try:
        for pod in pods:
            pod.start()
        yield pods
    finally:
        for pod in reversed(pods):
            pod.stop()
