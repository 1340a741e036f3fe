"""bundlectl plan, install and diff: a bundle against a live platform.

plan and install print the analyze contract (with platform ids once entities exist); diff prints,
per entity, the paths an install would change and the conflicts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from bundle_operator.commands.connection import (
    UsageError,
    add_install_flags,
    add_platform_flags,
    artifact_files,
    client_for,
    load_record,
    state_path,
    state_saver,
    substitutions,
)
from bundle_operator.commands.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from bundle_operator.commands.output import InstallOutcome, add_output_flag, emit_preview
from bundle_operator.commands.setup_input import SetupInputError, add_setup_flags, read_setup
from bundle_operator.commands.source_input import SourceInputError, read_source
from bundle_operator.document import ParsedBundle, parse_bundle_text
from bundle_operator.document.gateway_rules import GATEWAY_ENTITY
from bundle_operator.document.issues import Code, Issue, blocking
from bundle_operator.document.keys import keyed_entities
from bundle_operator.engine.analyze import analyze_offline
from bundle_operator.engine.apply import BUNDLE_INVALID, Blocked, InstallFailed, apply
from bundle_operator.engine.artifacts import any_of
from bundle_operator.engine.diff import changed_paths
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.preview import Preview
from bundle_operator.platform.errors import PlatformError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add plan, install and diff."""
    for name, helptext, func in (
        ("plan", "analyze a bundle against a platform: what install would do", plan_command),
        ("install", "install or update a bundle on a platform, all or nothing", _install),
        ("diff", "show, per entity, what an install would change on the platform", _diff),
    ):
        parser = sub.add_parser(name, help=helptext, description=helptext)
        parser.add_argument("file", help="the bundle document ('-' reads standard input)")
        add_setup_flags(parser)
        add_install_flags(parser)
        add_platform_flags(parser)
        add_output_flag(parser)
        parser.set_defaults(func=func)


def _inputs(args: argparse.Namespace) -> tuple[ParsedBundle, dict[str, object], Options]:
    try:
        parsed = parse_bundle_text(read_source(args.file))
        supplied = read_setup(args.setup, args.setup_file)
    except (SourceInputError, SetupInputError) as exc:
        raise UsageError(str(exc)) from None
    options = Options(
        activate=args.activate,
        substitutions=substitutions(args.substitute),
        on_conflict=OnConflict(args.on_conflict),
        # A registry record analyze fetched is held by the operator's own archive store.
        artifacts=any_of(artifact_files(args.artifact), getattr(args, "held_archives", None)),
    )
    return parsed, supplied, options


def run_command(args: argparse.Namespace, body: Any) -> int:
    """Run an async command body, mapping usage and platform errors to exit codes."""
    try:
        code: int = asyncio.run(body(args))
        return code
    except UsageError as exc:
        print(f"bundlectl {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PlatformError as exc:
        print(f"bundlectl {args.command}: the platform answered {exc}", file=sys.stderr)
        return EXIT_FAILED


async def _plan_body(args: argparse.Namespace) -> int:
    parsed, supplied, options = _inputs(args)
    async with client_for(args) as client:
        if parsed.bundle is None:
            preview = analyze_offline(parsed, supplied)
        else:
            record = load_record(state_path(args, parsed.bundle.name), args.workspace, parsed.bundle.name)
            preview = (await plan(client, args.workspace, parsed, supplied, record, options)).preview
    emit_preview(preview, args.output)
    return EXIT_FAILED if preview.blocking else EXIT_OK


def plan_command(args: argparse.Namespace) -> int:
    """Plan against the platform (also what analyze does when given --platform)."""
    return run_command(args, _plan_body)


async def _install_body(args: argparse.Namespace) -> int:
    parsed, supplied, options = _inputs(args)
    if parsed.bundle is None:
        emit_preview(analyze_offline(parsed, supplied), args.output)
        return EXIT_FAILED
    path = state_path(args, parsed.bundle.name)
    record = load_record(path, args.workspace, parsed.bundle.name)
    async with client_for(args) as client:
        try:
            planned = await plan(client, args.workspace, parsed, supplied, record, options)
            result = await apply(client, planned, record, state_saver(path))
        except Blocked as exc:
            emit_preview(exc.preview, args.output, outcome=InstallOutcome(BUNDLE_INVALID))
            return EXIT_FAILED
        except InstallFailed as exc:
            failed = await plan(client, args.workspace, parsed, supplied, record, options)
            issue = _failure_issue(exc, parsed)
            emit_preview(
                Preview(failed.preview.bundle, failed.preview.entities, [*failed.preview.issues, issue]),
                args.output,
                outcome=InstallOutcome(exc.code, _failure_json(exc)),
            )
            return EXIT_FAILED
    # code and failure are part of install's JSON on success too, as null.
    emit_preview(result.preview, args.output, outcome=InstallOutcome(None))
    return EXIT_OK


def _failure_json(exc: InstallFailed) -> dict[str, object]:
    """The ``failure`` of install's JSON: what failed, the platform's problem, what was undone."""
    cause = exc.cause
    problem: dict[str, object] | None = None
    if isinstance(cause, PlatformError):
        problem = {
            "status": cause.status,
            "code": cause.code,
            "detail": cause.detail,
            "errors": [{"field": e.field, "message": e.message} for e in cause.errors],
            "holders": list(cause.holders),
        }
    return {
        "entity": exc.entity,
        "fields": exc.fields,
        "detail": cause.detail if isinstance(cause, PlatformError) else exc.detail,
        "problem": problem,
        "rolled_back": list(exc.rolled_back),
        "rollback_failures": list(exc.rollback_failures),
    }


def _failure_issue(exc: InstallFailed, parsed: ParsedBundle) -> Issue:
    """The blocking issue that says, in the preview, which entity and fields failed and why."""
    pointer = None
    if exc.entity is not None and parsed.bundle is not None:
        if exc.entity == GATEWAY_ENTITY:
            pointer = "/gateway"
        for item in keyed_entities(parsed.bundle):
            if item.entity == exc.entity:
                pointer = item.pointer.removesuffix("/key")
    detail = exc.detail
    where = f"{exc.entity}: " if exc.entity else ""
    fields = f" (fields: {', '.join(exc.fields)})" if exc.fields else ""
    if exc.code == BUNDLE_INVALID:
        code, what = Code.INSTALL_REFUSED, "the platform refused it as invalid"
    else:
        code, what = Code.INSTALL_FAILED, "the install step failed"
    if exc.rolled_back:
        undone = f"rolled back {len(exc.rolled_back)} platform entities this run created"
    elif exc.rollback_failures:
        undone = "the rollback could delete none of what this run created"
    else:
        undone = "this run had created nothing to roll back"
    left = f"; could not delete {', '.join(exc.rollback_failures)}" if exc.rollback_failures else ""
    issue = blocking(code, f"{where}{what}{fields}: {detail}; {undone}{left}", pointer, exc.entity)
    return issue.with_line(parsed.source_map.line_of(pointer)) if pointer else issue


def _install(args: argparse.Namespace) -> int:
    return run_command(args, _install_body)


async def _diff_body(args: argparse.Namespace) -> int:
    parsed, supplied, options = _inputs(args)
    if parsed.bundle is None:
        raise UsageError("the document cannot be read; run bundlectl analyze for the reasons")
    record = load_record(state_path(args, parsed.bundle.name), args.workspace, parsed.bundle.name)
    async with client_for(args) as client:
        planned = await plan(client, args.workspace, parsed, supplied, record, options)
    rows: list[dict[str, Any]] = []
    for item in planned.items:
        paths: list[str] = []
        if item.action == "UPDATE" and item.merge is not None and item.live is not None:
            paths = changed_paths(item.live, item.merge.merged)
        elif item.action == "CREATE":
            paths = [""]
        rows.append(
            {
                "entity": item.desired.entity,
                "action": item.action,
                "paths": paths,
                "conflicts": item.merge.conflicts if item.merge else [],
            }
        )
    rows += [
        {
            "entity": r.recorded.entity,
            "action": "DELETE" if r.delete else "KEEP",
            "paths": r.edited_paths,
            "conflicts": [],
        }
        for r in planned.removals
    ]
    if args.output == "json":
        print(json.dumps({"changes": rows, "blocking": planned.preview.blocking}, indent=2))
    else:
        for row in rows:
            if row["action"] == "REUSE":
                continue
            detail = ", ".join(row["paths"]) or "(whole entity)"
            conflict = f"  CONFLICT {', '.join(row['conflicts'])}" if row["conflicts"] else ""
            print(f"{row['action']:<7} {row['entity']:<32} {detail}{conflict}")
        if all(r["action"] == "REUSE" for r in rows):
            print("No changes: the platform matches the bundle.")
    changes = any(r["action"] != "REUSE" for r in rows)
    return EXIT_FAILED if planned.preview.blocking or changes else EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    return run_command(args, _diff_body)
