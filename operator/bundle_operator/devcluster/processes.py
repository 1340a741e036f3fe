"""Child processes of a dev cluster: free ports, orderly stops, and leftovers of crashed runs.

Each running cluster records its owner and children in a run file. A later start removes the
run files whose owner is gone and ends the processes they list, each checked by pid *and* start
time so that a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path


def state_root() -> Path:
    """Where run files live: ~/.cache/bundle-operator/devcluster/runs (XDG_CACHE_HOME respected)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "bundle-operator" / "devcluster" / "runs"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the caller retries if another process takes it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` in clock ticks, or None if it is gone (or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after the last one.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcessIdentity:
    """A process named so that a recycled pid does not match: pid plus start time."""

    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity | None:
        """The identity of a live process, or None."""
        started = start_time(pid)
        return None if started is None else cls(pid, started)

    def alive(self) -> bool:
        """True while this very process runs."""
        return start_time(self.pid) == self.start


@dataclass
class RunRecord:
    """The run file of one cluster: who owns it, what it started, what to delete after it."""

    owner: ProcessIdentity
    workdir: str
    remove_workdir: bool
    children: list[ProcessIdentity] = field(default_factory=list)
    path: Path = field(default_factory=lambda: state_root() / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json")

    def save(self) -> None:
        """Write the record atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data.pop("path")
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    def discard(self) -> None:
        """Delete the run file once everything it lists is stopped."""
        self.path.unlink(missing_ok=True)


def terminate(identity: ProcessIdentity, timeout: float) -> None:
    """SIGTERM a process that is not our child, then SIGKILL it if it outlives `timeout`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not identity.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(identity.pid, sig)
        deadline = time.monotonic() + timeout
        while identity.alive() and time.monotonic() < deadline:
            time.sleep(0.05)


def stop_child(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM our child and reap it; SIGKILL it if it outlives `timeout`."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def reap_leftovers(timeout: float = 10.0) -> list[str]:
    """End what clusters of dead owners left running; return a line for each run cleaned up."""
    cleaned: list[str] = []
    root = state_root()
    if not root.is_dir():
        return cleaned
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            owner = ProcessIdentity(**data["owner"])
            children = [ProcessIdentity(**child) for child in data["children"]]
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if owner.alive():
            continue
        # Newest first, as a clean stop does: etcd outlives the apiserver that writes to it.
        survivors = [child for child in reversed(children) if child.alive()]
        for child in survivors:
            terminate(child, timeout)
        if data.get("remove_workdir"):
            shutil.rmtree(data["workdir"], ignore_errors=True)
        path.unlink(missing_ok=True)
        cleaned.append(f"run of pid {owner.pid}: stopped {len(survivors)} leftover process(es)")
    return cleaned
