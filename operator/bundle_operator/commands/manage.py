"""bundlectl drift, uninstall and export: what an installation left on the platform, and the
workspace as a bundle."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from bundle_operator.commands.connection import (
    UsageError,
    add_platform_flags,
    client_for,
    load_record,
    state_path,
    state_saver,
)
from bundle_operator.commands.exit_codes import EXIT_FAILED, EXIT_OK
from bundle_operator.commands.gitops import export_resources, render_resources
from bundle_operator.commands.install import run_command
from bundle_operator.engine.drift import drift
from bundle_operator.engine.export import ExportRefused, export_with_report
from bundle_operator.engine.uninstall import UninstallRefused, uninstall


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add drift, uninstall and export."""
    for name, helptext, func in (
        (
            "drift",
            "report how the platform differs from what an installation wrote (exit 1 on drift)",
            _drift,
        ),
        (
            "uninstall",
            "delete what an installation owns unmodified; keep and report edited entities",
            _uninstall,
        ),
    ):
        parser = sub.add_parser(name, help=helptext, description=helptext)
        parser.add_argument(
            "--bundle", metavar="NAME", help="the bundle's name (finds the default state file)"
        )
        add_platform_flags(parser)
        parser.add_argument("-o", "--output", choices=("json", "table"), default="table")
        parser.set_defaults(func=func)
    parser = sub.add_parser(
        "export",
        help="write a workspace as a bundle document, credentials screened out",
        description="Write a workspace as a bundle document. Every value replaced with a setup "
        "reference, and everything left out, is reported on standard error by path, never by value "
        "(and under 'report' with -o json, whose output is {document, report}).",
    )
    parser.add_argument(
        "--name",
        help="the exported bundle's name; the gateway bundle of that name is exported with it (default: "
        "the name of the workspace's gateway bundle when it has exactly one, else the workspace)",
    )
    parser.add_argument("--version", default="0.0.0", help="the exported bundle's version (default 0.0.0)")
    parser.add_argument("--out", metavar="FILE", help="write to FILE instead of standard output")
    parser.add_argument(
        "--as-resource",
        action="store_true",
        help="write a Bundle (spec.source.inline) and a BundleInstallation whose setup names a Secret "
        "by secretKeyRef for every secret field (names and keys only), ready to commit to Git",
    )
    parser.add_argument(
        "--namespace", metavar="NS", help="with --as-resource: the resources' namespace (default: none set)"
    )
    add_platform_flags(parser)
    parser.add_argument("-o", "--output", choices=("yaml", "json", "table"), default="yaml")
    parser.set_defaults(func=_export)


def _record(args: argparse.Namespace) -> tuple[Path, Any]:
    if not args.workspace:
        raise UsageError("--workspace is required")
    path = state_path(args, args.bundle)
    return path, load_record(path, args.workspace, args.bundle, must_exist=True)


async def _drift_body(args: argparse.Namespace) -> int:
    _, record = _record(args)
    async with client_for(args) as client:
        report = await drift(client, args.workspace, record)
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2))
    elif not report.drifted:
        print("No drift: the platform matches what was installed.")
    else:
        for entity, paths in sorted(report.changed.items()):
            print(f"DRIFTED  {entity:<32} {', '.join(paths)}")
        for entity in sorted(report.missing):
            print(f"MISSING  {entity}")
    return EXIT_FAILED if report.drifted else EXIT_OK


def _drift(args: argparse.Namespace) -> int:
    return run_command(args, _drift_body)


async def _uninstall_body(args: argparse.Namespace) -> int:
    path, record = _record(args)
    async with client_for(args) as client:
        try:
            result = await uninstall(client, args.workspace, record, state_saver(path))
        except UninstallRefused as refused:
            if args.output == "json":
                print(json.dumps(refused.to_json(), indent=2))
            else:
                print("Uninstall refused; nothing was deleted.")
                for entity, holders in sorted(refused.held.items()):
                    print(f"REFUSED  {entity:<32} in use by {', '.join(holders)}")
            return EXIT_FAILED
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        for entity in result.deleted:
            print(f"DELETED  {entity}")
        for entity, paths in result.kept.items():
            print(f"KEPT     {entity:<32} edited: {', '.join(paths)}")
        for entity, parts in result.failed.items():
            print(f"FAILED   {entity:<32} {', '.join(parts)}")
    return EXIT_OK if result.complete else EXIT_FAILED


def _uninstall(args: argparse.Namespace) -> int:
    return run_command(args, _uninstall_body)


async def _export_body(args: argparse.Namespace) -> int:
    if not args.workspace:
        raise UsageError("--workspace is required")
    if args.namespace and not args.as_resource:
        raise UsageError("--namespace applies only with --as-resource")
    async with client_for(args) as client:
        try:
            exported = await export_with_report(client, args.workspace, args.name, args.version)
        except ExportRefused as exc:
            print(f"bundlectl export: refused: {exc}", file=sys.stderr)
            return EXIT_FAILED
    report = exported.report
    for line in report.lines():
        print(f"bundlectl export: {line}", file=sys.stderr)
    text = exported.text
    resources = (
        export_resources(exported.document, args.workspace, args.namespace) if args.as_resource else None
    )
    if resources is not None and args.output != "json":
        text = render_resources(resources)
    if args.output == "json":
        body: object = exported.document if resources is None else resources
        data = {"resources" if resources is not None else "document": body, "report": report.to_json()}
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if args.out:
        await asyncio.to_thread(Path(args.out).write_text, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    return run_command(args, _export_body)
