"""What bench/scale.py prints: tables of API-server requests and platform calls, per installation
and per drift interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from scale_measure import CallKey, client_of, resource_of

# Every API-server client but the operator: this benchmark's kubectl and poller, the control plane.
OTHER_CLIENTS = ("kubectl", "bench-scale", "kube-controller-manager", "kube-apiserver")


def print_table(title: str, rows: Iterable[tuple[str, float]], unit: str, limit: int = 40) -> None:
    ordered = sorted(rows, key=lambda r: (-r[1], r[0]))
    print(title)
    for label, value in ordered[:limit]:
        print(f"    {value:9.2f}  {label}")
    if len(ordered) > limit:
        rest = sum(v for _, v in ordered[limit:])
        print(f"    ... {len(ordered) - limit} more rows, {rest:.2f} {unit} in all")


def print_install_calls(calls: Counter[CallKey], count: int) -> tuple[float, float, float]:
    """Platform calls per installation by method, kind and operation; returns (all, created, triggers)."""
    by_op: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for (method, kind, op, _ws, status), n in calls.items():
        by_op[f"{method:6} {kind} {op}"] += n
        if status >= 400:
            failed[f"{method:6} {kind} {op} -> {status}"] += n
    total = sum(calls.values())
    created = sum(n for (_m, _k, op, _w, s), n in calls.items() if op == "create" and s == 201) / count
    disabled = (
        sum(n for (_m, k, op, _w, s), n in calls.items() if k == "triggers" and op == "update" and s < 300)
        / count
    )
    print_table(
        f"platform calls per installation during the install, by method, kind and operation "
        f"({total / count:.2f} in all):",
        ((label, n / count) for label, n in by_op.items()),
        "calls",
    )
    if failed:
        print_table(
            "  of which answered with an error status (per installation):",
            ((label, n / count) for label, n in failed.items()),
            "calls",
        )
    return total / count, created, disabled


def print_audit(events: list[dict[str, Any]], per: int, what: str) -> float:
    """API-server requests ``what`` (divided by ``per``), by client, and the operator's by verb and
    resource. The operator is every client but this benchmark's kubectl and the control plane's own
    components: its own Kubernetes client (python-httpx) and kopf's watches and patches."""
    clients = Counter(client_of(e) for e in events)
    print(
        f"API-server requests {what}, by client (user agent): "
        + ", ".join(f"{name} {n / per:.2f}" for name, n in clients.most_common())
    )
    ours = Counter((str(e.get("verb")), resource_of(e)) for e in events if client_of(e) not in OTHER_CLIENTS)
    total = sum(ours.values()) / per
    print_table(
        f"  the operator's, by verb and resource ({total:.2f} in all):",
        ((f"{verb:6} {res}", n / per) for (verb, res), n in ours.items()),
        "requests",
    )
    return total


def drift_breakdown(calls: Counter[CallKey], intervals: int, workspaces: list[str]) -> float:
    """Print calls per drift interval by kind and workspace; return the most lists of one kind in one
    workspace per interval."""
    by_kind: Counter[str] = Counter()
    per_ws: dict[str, Counter[str]] = {ws: Counter() for ws in workspaces}
    lists: Counter[tuple[str, str]] = Counter()
    for (method, kind, op, ws, _status), n in calls.items():
        by_kind[f"{method:6} {kind} {op}"] += n
        per_ws.setdefault(ws or "(none)", Counter())[op] += n
        if op == "list":
            lists[(kind, ws)] += n
    total = sum(calls.values())
    print_table(
        f"platform calls per drift interval, by method, kind and operation ({total / intervals:.1f} in all):",
        ((label, n / intervals) for label, n in by_kind.items()),
        "calls",
    )
    print("platform calls per drift interval, by workspace (all | list | get | writes):")
    for ws, ops in sorted(per_ws.items()):
        writes = sum(n for op, n in ops.items() if op not in ("list", "get"))
        print(
            f"    {ws:14} {sum(ops.values()) / intervals:9.1f} | {ops['list'] / intervals:7.1f} | "
            f"{ops['get'] / intervals:7.1f} | {writes / intervals:6.1f}"
        )
    if lists:
        kinds = sorted({k for k, _ in lists})
        print("lists per drift interval, by kind (max over workspaces | mean per workspace):")
        for kind in kinds:
            values = [lists[(kind, ws)] / intervals for ws in workspaces]
            print(f"    {kind:18} {max(values):7.2f} | {sum(values) / len(values):7.2f}")
    return max((n / intervals for n in lists.values()), default=0.0)
