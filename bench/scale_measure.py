"""What bench/scale.py measures: process CPU and memory, platform call counts, operator metrics,
and the API server's audit log."""

from __future__ import annotations

import json
import math
import os
import re
import resource
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.operator_harness import OperatorProcess  # noqa: E402
from tests.integration.platform.platform_harness import PlatformProcess  # noqa: E402


def proc_status(pid: int, key: str) -> float:
    """A kB field of /proc/<pid>/status (VmRSS, VmHWM) in MiB; NaN once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def peak(*values: float) -> float:
    """The largest of ``values`` that is a number, NaN when none is."""
    return max((v for v in values if not math.isnan(v)), default=float("nan"))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process so far (as bench/gateway.py reads them)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def own_cpu_seconds() -> float:
    """This benchmark's CPU seconds, its finished kubectl runs included."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


CallKey = tuple[str, str, str, str, int]  # method, kind, op, workspace, status


def platform_calls(platform: PlatformProcess, reset: bool) -> Counter[CallKey]:
    """The platform's call counters; ``reset`` reads and zeroes them in one request; empty when the
    platform is gone (Ctrl-C in a terminal stops it with the benchmark)."""
    try:
        answer = httpx.request("DELETE" if reset else "GET", f"{platform.url}/_admin/calls", timeout=30)
        answer.raise_for_status()
    except httpx.HTTPError as exc:
        print(f"(no platform call counts: {exc})", file=sys.stderr)
        return Counter()
    return Counter(
        {
            (c["method"], c["kind"], c["op"], c["workspace"], int(c["status"])): int(c["count"])
            for c in answer.json()["calls"]
        }
    )


def operator_metric(operator: OperatorProcess, name: str, labels: Mapping[str, str]) -> float:
    """The sum of one operator metric over the label sets that include ``labels``; NaN when the
    operator is gone."""
    try:
        text = operator.metrics()
    except httpx.HTTPError:
        return float("nan")
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}\{{(.*)\}} ([0-9.e+-]+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


@dataclass
class AuditLog:
    """The API server's audit log, read from where the last read stopped."""

    path: Path
    offset: int = 0

    def skip(self) -> None:
        """Forget everything logged so far."""
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def requests(self) -> list[dict[str, Any]]:
        """One event per request since the last read: watches as they start, the rest as they end."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self.offset += end
        events = []
        for line in data[:end].splitlines():
            event = json.loads(line)
            watch = event.get("verb") == "watch"
            if event.get("stage") == ("ResponseStarted" if watch else "ResponseComplete"):
                events.append(event)
        return events


def client_of(event: Mapping[str, Any]) -> str:
    """The client program that sent a request, from its user agent (``kubectl/v1.37 ...`` -> kubectl)."""
    agent = str(event.get("userAgent") or "(none)")
    return agent.split("/", 1)[0].split(" ", 1)[0]


def resource_of(event: Mapping[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    name = ref.get("resource") or event.get("requestURI", "?").split("?", 1)[0]
    if ref.get("subresource"):
        name += "/" + ref["subresource"]
    return str(name)


@dataclass
class Processes:
    """The processes whose CPU time and memory are shown."""

    pids: dict[str, int] = field(default_factory=dict)

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()} | {"bench": own_cpu_seconds()}
