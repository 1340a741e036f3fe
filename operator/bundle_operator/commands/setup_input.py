"""Setup values from the command line: ``--setup KEY=VALUE`` and ``--setup-file FILE``.

Values are never printed back, not even in errors: any of them may be a credential.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from bundle_operator.document.issues import joined_surrogate_pairs, shown


class SetupInputError(Exception):
    """The setup values given on the command line cannot be used."""


def add_repeatable(parser: argparse.ArgumentParser, flag: str, metavar: str, text: str) -> None:
    """A flag that may be given many times; its values arrive as a list, empty when not given."""
    parser.add_argument(flag, action="append", default=[], metavar=metavar, help=text)


def add_setup_flags(parser: argparse.ArgumentParser) -> None:
    """Add --setup and --setup-file."""
    add_repeatable(parser, "--setup", "KEY=VALUE", "a setup value (repeatable); wins over --setup-file")
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
    where = shown(name, 256)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise SetupInputError(f"--setup-file {where}: {exc.strerror or 'cannot be read'}") from None
    except UnicodeDecodeError:
        raise SetupInputError(f"--setup-file {where}: not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SetupInputError(f"--setup-file {where}: not a YAML or JSON mapping") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SetupInputError(f"--setup-file {where}: must be a mapping of setup keys to values")
    out: dict[str, object] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise SetupInputError(f"--setup-file {where}: keys must be strings")
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise SetupInputError(f"--setup-file {where}: the value of '{shown(key)}' must be a single value")
        if value is not None:
            # YAML reads "\ud83d\ude00" as two surrogates: join them into the character they mean.
            # A lone one stays, and analyze reports it (escaped) instead of printing it raw.
            text_key = joined_surrogate_pairs(key)
            out[text_key] = joined_surrogate_pairs(value) if isinstance(value, str) else value
    return out
