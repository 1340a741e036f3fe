"""The reference platform of one test, stoppable and startable again on the same port and database,
with fault injection: for the torture tests and the chaos runs."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.e2e.operator_harness import free_port
from tests.integration.platform.platform_harness import PlatformProcess, start_platform


@dataclass
class RestartablePlatform:
    """The reference platform of one test, with fault injection and the GitHub stand-in; kill()
    and start() keep its port and SQLite file, so the operator's platform URL stays valid."""

    db: Path
    logs: Path
    github_url: str | None = None
    port: int = field(default_factory=free_port)
    current: PlatformProcess | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> PlatformProcess:
        assert self.current is not None, "the platform is not running"
        return self.current

    def start(self) -> RestartablePlatform:
        self.starts += 1
        self.current = start_platform(
            self.db,
            "--port",
            str(self.port),
            "--enable-fault-injection",
            *(("--github-base-url", self.github_url) if self.github_url else ()),
            log=self.logs / f"platform-{self.starts}.log",
        )
        assert self.current.url == self.url, f"the platform listens on {self.current.url}, not {self.url}"
        return self

    def kill(self) -> None:
        """SIGKILL, as a crashed node would: calls in flight get no answer."""
        process = self.process.process
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)

    def stop(self) -> None:
        if self.current is not None and self.current.process.poll() is None:
            self.current.stop()

    def slow_writes(self, delay_ms: int, workspace: str = "*") -> None:
        """Every create, update and delete in ``workspace`` (default: all) waits ``delay_ms`` first,
        so installs span seconds and a kill lands inside one."""
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            for path in (f"/v1/workspaces/{workspace}/*", f"/v1/workspaces/{workspace}/*/*"):
                spec = {"method": method, "path": path, "times": 1_000_000, "delay_ms": delay_ms}
                httpx.post(f"{self.url}/_admin/faults", json=spec, timeout=5).raise_for_status()

    def staggered_writes(self, workspaces: list[str], first_ms: int, step_ms: int) -> None:
        """Writes slowed by ``first_ms`` in the first workspace, ``step_ms`` more in each next one: the
        installs started together end one after another, so some are done while others run."""
        for index, workspace in enumerate(workspaces):
            self.slow_writes(first_ms + index * step_ms, workspace)

    def arm(self, spec: dict[str, object]) -> None:
        """Arm one fault (``FaultSpec``: method, path, times, status or delay_ms)."""
        httpx.post(f"{self.url}/_admin/faults", json=spec, timeout=5).raise_for_status()

    def clear_faults(self) -> None:
        httpx.delete(f"{self.url}/_admin/faults", timeout=5).raise_for_status()
