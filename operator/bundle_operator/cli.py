"""bundlectl: the command line for analyze, plan, install and the rest, outside a cluster.

Each command lives in its own module under ``bundle_operator.commands``, whose ``register`` adds
its subparser; ``commands.COMMANDS`` lists them. This module only builds the parser from that list
and maps outcomes to exit codes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bundle_operator import __version__
from bundle_operator.commands import COMMANDS
from bundle_operator.commands.exit_codes import EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The bundlectl argument parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="bundlectl",
        description="Analyze, install and manage bundles of AI-agent configuration.",
    )
    parser.add_argument("--version", action="version", version=f"bundlectl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run bundlectl; returns 0 (ok), 1 (something blocks or was refused) or 2 (usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `bundlectl ... | head` must not print a traceback
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
