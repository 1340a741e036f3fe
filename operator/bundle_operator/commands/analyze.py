"""bundlectl analyze: offline analysis of a bundle document."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the analyze command."""
    parser = sub.add_parser("analyze", help="analyze a bundle document without writing anything")
    parser.add_argument("file")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    raise SystemExit("analyze: not built yet")
