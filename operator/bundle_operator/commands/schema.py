"""bundlectl schema: the bundle document's JSON Schema, for editors and linters."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bundle_operator.commands.exit_codes import EXIT_OK
from bundle_operator.document.json_schema import schema_text
from bundle_operator.document.models import LATEST_SCHEMA_VERSION, SCHEMA_VERSIONS


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add schema."""
    text = "print the bundle document's JSON Schema (the repo keeps both in schemas/)"
    parser = sub.add_parser("schema", help=text, description=text)
    parser.add_argument(
        "schema_version",
        nargs="?",
        choices=SCHEMA_VERSIONS,
        default=LATEST_SCHEMA_VERSION,
        help=f"the document's schema_version (default {LATEST_SCHEMA_VERSION})",
    )
    parser.set_defaults(func=_schema)


def _schema(args: argparse.Namespace) -> int:
    sys.stdout.write(schema_text(args.schema_version))
    return EXIT_OK
