"""bundlectl list: the installations bundlectl keeps state for in a workspace, with drift when a
platform is given."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bundle_operator.commands.connection import UsageError, add_platform_flags, client_for
from bundle_operator.commands.exit_codes import EXIT_OK
from bundle_operator.commands.install import run_command
from bundle_operator.document.issues import printable
from bundle_operator.engine.drift import drift
from bundle_operator.engine.record import Record


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the list command."""
    helptext = "list a workspace's installations: bundle, version, digest, entities and drift"
    parser = sub.add_parser(
        "list",
        help=helptext,
        description=helptext + ". Reads the state files under .bundlectl/<workspace>/ (or --state "
        "FILE); drift is read from the platform when one is given (--platform or $BUNDLE_PLATFORM_URL), "
        "else shown as unknown.",
    )
    add_platform_flags(parser)
    parser.add_argument("-o", "--output", choices=("json", "table"), default="table")
    parser.set_defaults(func=_list)


def state_files(args: argparse.Namespace) -> list[Path]:
    """The state files of the workspace: --state FILE, or every .json under .bundlectl/<workspace>/."""
    if args.state:
        return [Path(args.state)]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", args.workspace)
    folder = Path(".bundlectl") / safe
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if p.is_file())


def _read(path: Path, workspace: str) -> Record | str:
    """The record in a state file, or why there is none to list: unreadable, other_workspace."""
    try:
        record = Record.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return "unreadable"
    return record if record.workspace == workspace else "other_workspace"


async def _list_body(args: argparse.Namespace) -> int:
    if not args.workspace:
        raise UsageError("--workspace is required")
    rows: list[dict[str, Any]] = []
    records: list[tuple[dict[str, Any], Record]] = []
    for path in state_files(args):
        record = _read(path, args.workspace)
        if isinstance(record, str):
            # Every row has every key, so scripts never meet a missing one.
            rows.append(
                {
                    "bundle": None,
                    "version": None,
                    "digest": None,
                    "entities": 0,
                    "drift": record,
                    "drifted_entities": [],
                    "state": str(path),
                }
            )
            continue
        row: dict[str, Any] = {
            "bundle": record.bundle_name,
            "version": record.bundle_version,
            "digest": record.digest,
            "entities": len(record.entities),
            "drift": "unknown",
            "drifted_entities": [],
            "state": str(path),
        }
        rows.append(row)
        records.append((row, record))
    if args.platform and records:
        async with client_for(args) as client:
            for row, record in records:
                report = await drift(client, args.workspace, record)
                row["drift"] = "drifted" if report.drifted else "in_sync"
                row["drifted_entities"] = sorted([*report.changed, *report.missing])
    if args.output == "json":
        print(json.dumps({"workspace": args.workspace, "installations": rows}, indent=2))
    elif not rows:
        print(f"No installations recorded for workspace '{printable(args.workspace)}'.")
    else:
        print(_table(rows))
    return EXIT_OK


def _table(rows: list[dict[str, Any]]) -> str:
    headers = ["BUNDLE", "VERSION", "DIGEST", "ENTITIES", "DRIFT"]
    cells = []
    for row in rows:
        if row["bundle"] is None:
            cells.append([row["state"], "", "", "", row["drift"]])
            continue
        digest = row["digest"] or ""
        drift_cell = row["drift"]
        if row["drifted_entities"]:
            drift_cell += f" ({', '.join(row['drifted_entities'])})"
        cells.append([row["bundle"], row["version"] or "-", digest[:19], str(row["entities"]), drift_cell])
    cells = [[printable(c) for c in r] for r in cells]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    return run_command(args, _list_body)
