"""bundlectl approve: show the plan a BundleInstallation waits with, and approve exactly that plan.

The plan comes from the installation's status (the operator computed it); approving sets
``spec.approvedPlan`` to its id with a merge patch guarded by the object's resourceVersion, so a
plan that changed between showing and approving is never approved unseen.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from bundle_operator.commands.exit_codes import EXIT_OK, EXIT_REFUSED
from bundle_operator.mcpb.errors import printable

IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# A status write by the operator moves the resourceVersion without changing the plan: try again.
_ATTEMPTS = 3


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``approve``."""
    parser = sub.add_parser(
        "approve",
        help="print the plan a BundleInstallation waits with and approve it (KUBECONFIG or in-cluster)",
        description="Print the plan in the BundleInstallation's status.plan and set spec.approvedPlan "
        "to its id. The operator then applies exactly that plan, or shows a new one if anything "
        "it depends on changed meanwhile.",
    )
    parser.add_argument("name", help="the BundleInstallation")
    parser.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's)")
    parser.add_argument("--plan", metavar="ID", help="approve only if the waiting plan has this id")
    parser.set_defaults(func=_approve)


def render_plan(name: str, namespace: str, plan: dict[str, Any]) -> str:
    """The waiting plan as text: its id and operation, then one line per entity."""
    lines = [
        printable(f"BundleInstallation {namespace}/{name}: {plan.get('summary') or plan.get('operation')}"),
        f"Plan: {plan['id']}",
        "",
    ]
    entities = plan.get("entities") or []
    width = max((len(f"{e['kind']}:{e['key']}") for e in entities), default=0)
    for e in entities:
        entity = printable(f"{e['kind']}:{e['key']}")
        paths = ", ".join(printable(p) for p in e.get("paths") or [])
        lines.append(f"  {e['action']:<7} {entity:<{width}}  {paths}".rstrip())
    return "\n".join(lines)


def default_namespace() -> str:
    """The kubeconfig's current context namespace, the pod's own namespace, or ``default``."""
    from kubernetes import config as kube_config

    try:
        _, active = kube_config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        namespace = (active or {}).get("context", {}).get("namespace")
        if namespace:
            return str(namespace)
    except kube_config.ConfigException:
        if IN_CLUSTER_NAMESPACE_FILE.exists():
            return IN_CLUSTER_NAMESPACE_FILE.read_text().strip()
    return "default"


def _approve(args: argparse.Namespace) -> int:
    return asyncio.run(_approve_async(args))


async def _approve_async(args: argparse.Namespace) -> int:
    from bundle_operator.k8s.kube import Kube, KubeError, load_connection
    from bundle_operator.k8s.resources import INSTALLATION_PLURAL

    namespace = args.namespace or default_namespace()
    kube = Kube(load_connection())
    try:
        for _ in range(_ATTEMPTS):
            obj = await kube.read_custom(INSTALLATION_PLURAL, namespace, args.name)
            if obj is None:
                return _refuse(f"there is no BundleInstallation {args.name} in namespace {namespace}")
            spec, plan = obj.get("spec") or {}, (obj.get("status") or {}).get("plan") or {}
            if spec.get("approval", "Auto") != "Manual":
                return _refuse(
                    f"{namespace}/{args.name} has spec.approval Auto: every plan is applied unasked"
                )
            if not plan.get("id"):
                spent = plan.get("lastAppliedId")
                tail = f" (the last approved plan, {spent}, is applied)" if spent else ""
                return _refuse(f"no plan of {namespace}/{args.name} waits for approval{tail}")
            print(render_plan(args.name, namespace, plan))
            if args.plan is not None and args.plan != plan["id"]:
                return _refuse(f"the waiting plan is {plan['id']}, not {args.plan}; nothing was approved")
            if spec.get("approvedPlan") == plan["id"]:
                print(f"\n{plan['id']} is approved already; the operator applies it on its next run")
                return EXIT_OK
            try:
                await kube.patch_spec(
                    INSTALLATION_PLURAL,
                    namespace,
                    args.name,
                    {"approvedPlan": plan["id"]},
                    resource_version=obj["metadata"]["resourceVersion"],
                )
            except KubeError as exc:
                if exc.conflict:
                    print("\n(the installation changed while approving: reading it again)\n")
                    continue
                raise
            print(f"\napproved {plan['id']}; the operator applies it on its next run")
            return EXIT_OK
        return _refuse("the installation kept changing; nothing was approved, try again")
    except KubeError as exc:
        return _refuse(f"the API server answered {exc.status} {exc.reason}: {exc.message}")
    finally:
        await kube.aclose()


def _refuse(message: str) -> int:
    print(f"bundlectl approve: {printable(message)}", file=sys.stderr)
    return EXIT_REFUSED
