"""bundlectl mcpb: inspect, extract and convert .mcpb archives.

``inspect`` reads and verifies without writing anything (exit 0 when accepted or not runnable,
1 when refused); ``extract`` unpacks into a new private folder and prints the lock and the tree
digest; ``check-tree`` re-checks such a folder; ``to-bundle`` prints the bundle document.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bundle_operator.commands.exit_codes import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from bundle_operator.mcpb.convert import to_bundle
from bundle_operator.mcpb.errors import Refused, printable
from bundle_operator.mcpb.extract import extract_file
from bundle_operator.mcpb.launch import PLATFORMS
from bundle_operator.mcpb.reader import Inspection, inspect_file
from bundle_operator.mcpb.report import InspectReport
from bundle_operator.mcpb.treedigest import check_tree


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the mcpb command and its subcommands."""
    parser = sub.add_parser("mcpb", help="read, verify, extract and convert .mcpb archives")
    actions = parser.add_subparsers(dest="mcpb_command", metavar="SUBCOMMAND", required=True)

    inspect = actions.add_parser("inspect", help="read and verify an archive without writing anything")
    inspect.add_argument("file")
    _reading_options(inspect, ("text", "json"))
    inspect.set_defaults(func=_inspect)

    extract = actions.add_parser("extract", help="unpack an accepted archive into a new private folder")
    extract.add_argument("file")
    extract.add_argument("dir", help="the folder to create; it must not exist yet")
    _reading_options(extract, ("text", "json"))
    extract.set_defaults(func=_extract)

    check = actions.add_parser("check-tree", help="check an unpacked folder against its tree digest")
    check.add_argument("dir")
    check.add_argument("digest", help="the tree digest extract printed (sha256:...)")
    check.set_defaults(func=_check_tree)

    convert = actions.add_parser("to-bundle", help="print the bundle document for an accepted archive")
    convert.add_argument("file")
    _reading_options(convert, ("yaml", "json"))
    convert.add_argument(
        "--root",
        help="the folder a person unpacked the archive into on the platform's disk; without it the "
        "document refers to the archive itself, which install uploads and the platform unpacks",
    )
    convert.set_defaults(func=_to_bundle)


def _reading_options(parser: argparse.ArgumentParser, outputs: tuple[str, str]) -> None:
    """--platform and -o (the first of ``outputs`` by default), which every archive reader takes."""
    parser.add_argument(
        "--platform", choices=PLATFORMS, help="the platform to check against (default: this computer's)"
    )
    parser.add_argument("-o", "--output", choices=outputs, default=outputs[0])


def _refused(refusal: Refused) -> int:
    """Say why the archive or folder was refused, and exit with EXIT_REFUSED."""
    print(f"refused ({refusal.code}): {refusal.reason}", file=sys.stderr)
    return EXIT_REFUSED


def _cannot(what: str, path: str, exc: OSError) -> int:
    """Say what could not be done with which file, and exit with EXIT_USAGE."""
    print(f"bundlectl mcpb: cannot {what} {path}: {exc.strerror}", file=sys.stderr)
    return EXIT_USAGE


def _read(args: argparse.Namespace) -> Inspection | None:
    try:
        return inspect_file(args.file, platform=args.platform)
    except OSError as exc:
        _cannot("read", args.file, exc)
        return None


def _inspect(args: argparse.Namespace) -> int:
    inspection = _read(args)
    if inspection is None:
        return EXIT_USAGE
    if args.output == "json":
        print(InspectReport.of(inspection).model_dump_json(indent=2))
    else:
        print(_text(inspection))
    return EXIT_REFUSED if inspection.refused else EXIT_OK


def _text(inspection: Inspection) -> str:
    # Every value below comes from the archive or its certificate, which an attacker writes: each
    # goes through printable() so none can move the cursor, clear the screen or fake a line.
    p = printable
    lines = []
    if inspection.refused:
        lines.append(f"refused ({p(inspection.code or '')}): {p(inspection.reason or '')}")
    elif inspection.verdict == "not_runnable":
        lines.append(f"not runnable ({p(inspection.code or '')}): {p(inspection.reason or '')}")
    else:
        lines.append("accepted")
    if inspection.sha256:  # empty when the file was refused before it was read
        lines.append(f"sha256: {inspection.sha256}")
    m = inspection.manifest
    if m is not None:
        lines.append(
            f"bundle: {p(m.name)} {p(m.version)} "
            f"(manifest {p(m.manifest_version)}, {p(m.server_type)} server)"
        )
        lines.append(f"runs: {p(' '.join([m.command, *m.args]))}")
        if m.env:
            lines.append(f"env: {p(', '.join(sorted(m.env)))}")
        lines.append(f"platforms: {p(', '.join(m.platforms))}")
    s = inspection.signature
    if s is not None:
        if s.status == "signed":
            lines.append(f"signature: signed by {p(s.subject or '')}")
            lines.append(f"  certificate SHA-256 fingerprint: {s.fingerprint_sha256}")
            lines.append(f"  {p(s.detail or '')}")
        elif s.status == "unsigned":
            lines.append(f"signature: unsigned. {p(s.detail or '')}")
        else:
            lines.append(f"signature: {s.status}: {p(s.detail or '')}")
    if inspection.setup:
        lines.append("setup:")
        for f in inspection.setup:
            need = "required" if f.required else "optional"
            lines.append(f"  {p(f.key)}  {f.type}  {need}  {p(f.label)}")
    return "\n".join(lines)


def _extract(args: argparse.Namespace) -> int:
    try:
        extracted = extract_file(args.file, args.dir, platform=args.platform)
    except Refused as refusal:
        return _refused(refusal)
    except OSError as exc:
        return _cannot("extract", args.file, exc)
    if args.output == "json":
        out = {"dir": str(extracted.path), "lock": extracted.lock, "tree_digest": extracted.tree_digest}
        print(json.dumps(out, indent=2))
    else:
        print(f"extracted to {extracted.path}")
        print(f"lock: {extracted.lock}")
        print(f"tree: {extracted.tree_digest}")
    return EXIT_OK


def _check_tree(args: argparse.Namespace) -> int:
    try:
        check_tree(args.dir, args.digest)
    except Refused as refusal:
        return _refused(refusal)
    except OSError as exc:
        return _cannot("read", args.dir, exc)
    print(f"unchanged: {args.digest}")
    return EXIT_OK


def _to_bundle(args: argparse.Namespace) -> int:
    inspection = _read(args)
    if inspection is None:
        return EXIT_USAGE
    try:
        conversion = to_bundle(inspection, root=args.root)
    except Refused as refusal:
        return _refused(refusal)
    for warning in conversion.warnings:
        print(f"warning: {printable(warning)}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(conversion.document, indent=2))
    else:
        sys.stdout.write(conversion.to_yaml())
    return EXIT_OK
