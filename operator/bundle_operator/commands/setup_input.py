"""Setup values from the command line: ``--setup KEY=VALUE`` and ``--setup-file FILE``.

Values are never printed back, not even in errors: any of them may be a credential.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml


class SetupInputError(Exception):
    """The setup values given on the command line cannot be used."""


def add_setup_flags(parser: argparse.ArgumentParser) -> None:
    """Add --setup and --setup-file."""
    parser.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setup value (repeatable); wins over --setup-file",
    )
    parser.add_argument(
        "--setup-file",
        metavar="FILE",
        help="a YAML or JSON mapping of setup keys to values",
    )


def read_setup(pairs: list[str], setup_file: str | None) -> dict[str, object]:
    """Merge the setup file and the --setup pairs (pairs win)."""
    values: dict[str, object] = {}
    if setup_file is not None:
        values.update(_read_file(setup_file))
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SetupInputError("--setup takes KEY=VALUE")
        values[key.strip()] = value
    return values


def _read_file(name: str) -> dict[str, object]:
    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise SetupInputError(f"--setup-file {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SetupInputError(f"--setup-file {name}: not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SetupInputError(f"--setup-file {name}: not a YAML or JSON mapping") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SetupInputError(f"--setup-file {name}: must be a mapping of setup keys to values")
    out: dict[str, object] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise SetupInputError(f"--setup-file {name}: keys must be strings")
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise SetupInputError(f"--setup-file {name}: the value of '{key}' must be a single value")
        if value is not None:
            out[key] = value
    return out
