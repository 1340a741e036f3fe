"""What every platform command shares: --platform/--workspace/--token/--state flags, the client,
and the state file that holds the installation's record between runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from pathlib import Path

from pydantic import ValidationError

from bundle_operator.commands.setup_input import add_repeatable
from bundle_operator.engine.artifacts import ArchiveFiles
from bundle_operator.engine.merge import OnConflict
from bundle_operator.engine.record import Record
from bundle_operator.engine.writer import Persist
from bundle_operator.platform.client import ENV_TOKEN, ENV_URL, PlatformClient


class UsageError(Exception):
    """The command line cannot be used as given (exit 2)."""


def add_platform_flags(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add --platform, --workspace, --token and --state."""
    group = parser.add_argument_group("platform")
    group.add_argument(
        "--platform",
        metavar="URL",
        default=os.environ.get(ENV_URL) if required else None,
        help=f"the platform's base URL (default ${ENV_URL})",
    )
    group.add_argument("--workspace", metavar="WS", help="the workspace to work in")
    group.add_argument("--token", help=f"bearer token (default ${ENV_TOKEN}); prefer the variable")
    group.add_argument(
        "--state",
        metavar="FILE",
        help="where the installation's record is kept (default .bundlectl/<workspace>/<bundle>.json)",
    )


def add_install_flags(parser: argparse.ArgumentParser) -> None:
    """Add --substitute, --activate, --artifact and --on-conflict."""
    text = "map a requirement to a local equivalent, e.g. model:gpt-4.1=gpt-5 (repeatable)"
    add_repeatable(parser, "--substitute", "KIND:REF=VALUE", text)
    parser.add_argument("--activate", action="store_true", help="enable the channels and automations")
    text = "an .mcpb file an MCP of the bundle runs from, uploaded when the platform lacks it (repeatable)"
    add_repeatable(parser, "--artifact", "FILE", text)
    parser.add_argument(
        "--on-conflict",
        choices=[m.value for m in OnConflict],
        default=OnConflict.FAIL.value,
        help="what to do where the bundle and a local edit changed the same field",
    )


def substitutions(pairs: list[str]) -> dict[str, str]:
    """Parse --substitute KIND:REF=VALUE pairs."""
    out: dict[str, str] = {}
    for pair in pairs:
        ref, sep, value = pair.partition("=")
        if not sep or ":" not in ref or not value:
            raise UsageError("--substitute takes KIND:REF=VALUE, e.g. model:gpt-4.1=gpt-5")
        out[ref] = value
    return out


def artifact_files(paths: list[str]) -> ArchiveFiles | None:
    """The archives --artifact names, indexed by content; a usage error when one cannot be read."""
    if not paths:
        return None
    try:
        return ArchiveFiles.of(Path(p) for p in paths)
    except OSError as exc:
        raise UsageError(f"--artifact {exc.filename}: {exc.strerror}") from None


def uses_platform(args: argparse.Namespace) -> bool:
    """Whether platform flags were given (analyze works offline without them)."""
    return bool(args.platform)


def client_for(args: argparse.Namespace) -> PlatformClient:
    """A client for the flags; a usage error when the URL or workspace is missing."""
    if not args.platform:
        raise UsageError(f"--platform URL is required (or set ${ENV_URL})")
    if not args.workspace:
        raise UsageError("--workspace is required")
    token = args.token or os.environ.get(ENV_TOKEN) or None
    return PlatformClient(args.platform, token=token)


def state_path(args: argparse.Namespace, bundle_name: str | None) -> Path:
    """The state file: --state, or one per workspace and bundle under .bundlectl/."""
    if args.state:
        return Path(args.state)
    if not bundle_name:
        raise UsageError("--state FILE is required")
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", args.workspace)
    return Path(".bundlectl") / safe / f"{bundle_name}.json"


def load_record(path: Path, workspace: str, bundle_name: str | None, *, must_exist: bool = False) -> Record:
    """The record in the state file, or a new one for this workspace and bundle."""
    if not path.exists():
        if must_exist:
            raise UsageError(f"{path}: no such state file")
        return Record(installation=f"bundlectl/{workspace}/{bundle_name}", workspace=workspace)
    try:
        record = Record.model_validate_json(path.read_text())
    except (OSError, ValidationError, ValueError) as exc:
        raise UsageError(f"{path}: not a bundlectl state file ({type(exc).__name__})") from None
    if record.workspace != workspace:
        raise UsageError(f"{path} records workspace '{record.workspace}', not '{workspace}'")
    return record


def state_saver(path: Path) -> Persist:
    """A persist callback that writes the record atomically (a crash never leaves half a file)."""

    async def persist(record: Record) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(handle, "w") as out:
            out.write(data)
        os.replace(tmp, path)

    return persist
