"""bundlectl analyze: analyze a bundle document and report what an install would do."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bundle_operator.commands.connection import add_install_flags, add_platform_flags, uses_platform
from bundle_operator.commands.install import plan_command
from bundle_operator.commands.output import add_output_flag, emit_preview
from bundle_operator.commands.setup_input import SetupInputError, add_setup_flags, read_setup
from bundle_operator.commands.source_input import SourceInputError, read_source
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
    parser.add_argument("file", help="the bundle document, YAML or JSON ('-' reads standard input)")
    add_setup_flags(parser)
    add_install_flags(parser)
    add_platform_flags(parser, required=False)
    add_output_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Analyze offline, or against a platform when --platform is given, and print the preview."""
    if uses_platform(args):
        return plan_command(args)
    try:
        text = read_source(args.file)
        supplied = read_setup(args.setup, args.setup_file)
    except (SourceInputError, SetupInputError) as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    preview = analyze_offline(parse_bundle_text(text), supplied)
    emit_preview(preview, args.output)
    return EXIT_BLOCKED if preview.blocking else EXIT_OK
