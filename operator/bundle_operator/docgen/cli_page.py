"""reference/cli.md: every bundlectl command, subcommand and flag, read from the argparse parser."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

from bundle_operator.cli import build_parser
from bundle_operator.commands import exit_codes
from bundle_operator.docgen import PageSet
from bundle_operator.docgen._cells import cell, code

# A flag whose default comes from the environment says so in its help ("default $NAME"); the
# page shows the variable, never the value the environment that generated the page happened to hold.
_ENV = re.compile(r"\$([A-Z][A-Z0-9_]+)")
_WIDTH = 100


def pages() -> PageSet:
    """The bundlectl reference page."""
    return {"reference/cli.md": render(build_parser())}


def anchor(path: list[str]) -> str:
    """The stable anchor of a command: ``bundlectl-platform-serve``."""
    return "-".join(path)


def commands(
    parser: argparse.ArgumentParser, path: list[str]
) -> Iterator[tuple[list[str], argparse.ArgumentParser, str]]:
    """Every command under ``parser``, depth first in registration order, with its one-line help."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, child in action.choices.items():
            yield [*path, name], child, helps.get(name, "")
            yield from commands(child, [*path, name])


def render(parser: argparse.ArgumentParser) -> str:
    """The page's Markdown."""
    found = list(commands(parser, ["bundlectl"]))
    lines = [
        "# bundlectl",
        "",
        "<!-- Generated from the argparse parser (bundle_operator/cli.py and commands/) by "
        "`make docs-reference`; do not edit. -->",
        "",
        f"{parser.description} `bundlectl --version` prints the version.",
        "",
        "Every command prints `--help` with the same text as below. A flag whose default names an "
        "environment variable takes its default from that variable when it is set.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for path, _child, help_ in found:
        lines.append(f"| [{cell(' '.join(path))}](#{anchor(path)}) | {cell(help_)} |")
    lines += ["", *_exit_codes()]
    for path, child, help_ in found:
        lines += ["", *_command(path, child, help_)]
    return "\n".join(lines) + "\n"


def _exit_codes() -> list[str]:
    codes: dict[int, list[str]] = {}
    for name, value in vars(exit_codes).items():
        if name.startswith("EXIT_") and isinstance(value, int):
            codes.setdefault(value, []).append(name)
    meaning = {
        0: "the command did what was asked",
        1: "the command ran but could not do what was asked: something blocks (analyze, install), "
        "was refused (an archive, a record, an approval) or failed (a platform call, drift found)",
        2: "the command line cannot be used as given",
    }
    lines = [
        "## Exit codes",
        "",
        "Every command uses the same exit codes:",
        "",
        "| code | names | meaning |",
        "|---|---|---|",
    ]
    for value in sorted(codes):
        names = ", ".join(code(n) for n in sorted(codes[value]))
        lines.append(f"| {value} | {names} | {meaning.get(value, '')} |")
    return lines


def _command(path: list[str], parser: argparse.ArgumentParser, help_: str) -> list[str]:
    title = " ".join(path)
    lines = [f"## {title} {{#{anchor(path)}}}", ""]
    text = parser.description or help_
    if text:
        lines += [text, ""]
    lines += ["```text", _usage(parser), "```"]
    rows = [_row(a) for a in parser._actions if not _hidden(a)]
    if rows:
        lines += ["", "| argument | help | default | choices | environment |", "|---|---|---|---|---|", *rows]
    return lines


def _usage(parser: argparse.ArgumentParser) -> str:
    # A fixed width: argparse would otherwise wrap at the width of the terminal that generated the page.
    formatter = argparse.HelpFormatter(parser.prog, width=_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _hidden(action: argparse.Action) -> bool:
    return (
        isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        or action.help == argparse.SUPPRESS
    )


def _row(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = "" if action.nargs == 0 else f" {_metavar(action)}"
        name = ", ".join(f"{o}{metavar}" for o in action.option_strings)
    else:
        name = _metavar(action)
    help_ = expanded_help(action)
    env = _ENV.search(help_)
    choices = _choices(action)
    return (
        f"| {code(name)} | {cell(help_)} | {_default(action, env is not None)} | {choices} | "
        f"{code('$' + env.group(1)) if env else ''} |"
    )


def expanded_help(action: argparse.Action) -> str:
    """The help as ``--help`` prints it, with ``%(default)s`` and the like filled in."""
    return argparse.HelpFormatter("bundlectl")._expand_help(action) if action.help else ""


def _choices(action: argparse.Action) -> str:
    choices = action.choices
    if not choices:
        return ""
    if isinstance(choices, range):  # thirty numbers say less than their bounds
        return f"{code(str(choices[0]))} to {code(str(choices[-1]))}"
    return ", ".join(code(str(c)) for c in choices)


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, str):
        return action.metavar
    if action.option_strings:
        return action.dest.upper()
    return action.dest


def _default(action: argparse.Action, from_env: bool) -> str:
    if from_env:
        return "from the environment"
    value: Any = action.default
    if action.nargs == 0 or value is None or value == argparse.SUPPRESS or value == []:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(code(str(v)) for v in value)
    return code(str(value))
