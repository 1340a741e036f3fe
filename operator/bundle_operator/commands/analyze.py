"""bundlectl analyze: analyze a bundle document and report what an install would do."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from bundle_operator.commands.connection import (
    UsageError,
    add_install_flags,
    add_platform_flags,
    substitutions,
    uses_platform,
)
from bundle_operator.commands.install import plan_command
from bundle_operator.commands.output import add_output_flag, emit_preview
from bundle_operator.commands.setup_input import SetupInputError, add_setup_flags, read_setup
from bundle_operator.commands.source_input import (
    USAGE_REFUSALS,
    SourceFetchError,
    SourceInputError,
    fetch_source,
    is_url,
    read_source,
)
from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.analyze import analyze_offline

EXIT_OK, EXIT_BLOCKED, EXIT_USAGE = 0, 1, 2


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the analyze command."""
    parser = sub.add_parser(
        "analyze",
        help="analyze a bundle document without writing anything",
        description="Parse and check a bundle document and preview what an install would do. "
        "Exit 0 when nothing blocks, 1 when something blocks, 2 on usage errors.",
    )
    parser.add_argument(
        "file",
        help="the bundle document, YAML or JSON: a file, '-' for standard input, or an https URL "
        "(fetched behind the SSRF guard, 5 MiB cap)",
    )
    fetch = parser.add_argument_group("fetching a URL")
    fetch.add_argument(
        "--sha256", metavar="HEX", help="refuse the fetched document unless its SHA-256 is HEX (optional)"
    )
    fetch.add_argument("--ca-file", metavar="PEM", help="trust this CA bundle for the https fetch")
    fetch.add_argument(
        "--allow-private-sources",
        action="store_true",
        help="let the URL reach loopback and private networks (unsafe; for tests and local setups)",
    )
    add_setup_flags(parser)
    add_install_flags(parser)
    add_platform_flags(parser, required=False)
    add_output_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Analyze offline, or against a platform when --platform is given, and print the preview."""
    if is_url(args.file):
        return _run_url(args)
    if args.sha256:
        print("bundlectl analyze: --sha256 applies only to a URL", file=sys.stderr)
        return EXIT_USAGE
    if uses_platform(args):
        return plan_command(args)
    try:
        text = read_source(args.file)
    except SourceInputError as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _run_offline(args, text)


def _run_url(args: argparse.Namespace) -> int:
    """Fetch the document (seed 000's source_url), then analyze it like a file."""
    try:
        text = fetch_source(
            args.file, sha256=args.sha256, allow_private=args.allow_private_sources, ca_file=args.ca_file
        )
    except SourceFetchError as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.code in USAGE_REFUSALS else EXIT_BLOCKED
    except SourceInputError as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not uses_platform(args):
        return _run_offline(args, text)
    # plan reads its document from a file: hand it a private copy, removed afterwards.
    handle, name = tempfile.mkstemp(prefix=".bundlectl-analyze-", suffix=".yaml")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text)
        args.file = name
        return plan_command(args)
    finally:
        os.unlink(name)


def _run_offline(args: argparse.Namespace, text: bytes) -> int:
    try:
        supplied = read_setup(args.setup, args.setup_file)
        mapped = substitutions(args.substitute)
    except (SetupInputError, UsageError) as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    preview = analyze_offline(parse_bundle_text(text), supplied, mapped)
    emit_preview(preview, args.output)
    return EXIT_BLOCKED if preview.blocking else EXIT_OK
