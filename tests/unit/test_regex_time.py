"""Every regular expression of the package runs in linear time on text built to make it backtrack.

A pattern that backtracks (``\\{\\{\\s*(.*?)\\s*\\}\\}`` on ``{{`` and spaces: cubic) or that is
searched from many starts that each read to the end (``\\$\\{[^}]*\\}`` on ``${${${...``:
quadratic) holds the GIL for seconds on a few kilobytes, and with it the operator's event loop,
its probes and the webhook (issue 45). The patterns are the package's compiled module globals and
every literal pattern passed to a ``re`` function anywhere in its source. Each is run, in a child
process that is killed if it hangs, on strings made of its own literals and of characters its
classes take, repeated; a linear pattern handles each in well under a millisecond, a quadratic
one takes seconds and a cubic one never finishes.
"""

from __future__ import annotations

import ast
import importlib
import multiprocessing
import pkgutil
import re
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

import bundle_operator

try:
    import re._parser as sre_parse  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Python 3.10
    import sre_parse  # type: ignore[no-redef,unused-ignore]

PACKAGE = Path(bundle_operator.__file__).parent
# Long enough that quadratic work takes seconds (8,000² steps), short enough that linear work on
# hundreds of strings per pattern stays well under a second.
LENGTH = 8_000
# A linear scan of LENGTH characters takes well under a millisecond; a hundred times that is
# slow beyond any noise of a loaded machine.
SLOW_SECONDS = 0.1
# A pattern's strings are all run within this, or the pattern is stuck (cubic or worse).
STUCK_SECONDS = 60.0
POOL = " a0A.-_\\\"'@/:\t\n{}$=,;#x[]()"
FUNCTIONS = {"compile", "match", "search", "fullmatch", "sub", "subn", "findall", "finditer", "split"}


def _module_patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    for info in pkgutil.walk_packages(bundle_operator.__path__, "bundle_operator."):
        if info.name.endswith("__main__"):
            continue  # running it is the command line
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                yield f"{info.name}.{name}", value


def _flags(call: ast.Call) -> int:
    flags = 0
    for node in ast.walk(call):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
            flag = getattr(re, node.attr, None)
            if isinstance(flag, re.RegexFlag):
                flags |= flag
    return flags


def _literal_patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for call in ast.walk(tree):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "re"
                and call.func.attr in FUNCTIONS
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)
            ):
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{call.lineno}"
            yield where, re.compile(call.args[0].value, _flags(call))


def patterns() -> dict[tuple[str, int], tuple[str, re.Pattern[str]]]:
    """Every pattern of the package by (source, flags), with where one of its uses is."""
    found: dict[tuple[str, int], tuple[str, re.Pattern[str]]] = {}
    for where, pattern in [*_module_patterns(), *_literal_patterns()]:
        found.setdefault((pattern.pattern, pattern.flags), (where, pattern))
    return found


def _literals(pattern: re.Pattern[str]) -> list[str]:
    """The pattern's runs of literal characters in order, and the characters its classes name."""
    runs: list[str] = []

    def walk(items: object) -> None:
        run = ""
        for op, arg in items:  # type: ignore[attr-defined]
            name = str(op)
            if name == "LITERAL":
                run += chr(arg)
                continue
            if run:
                runs.append(run)
                run = ""
            if name == "SUBPATTERN":
                walk(arg[-1])
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                walk(arg[2])
            elif name == "ATOMIC_GROUP":
                walk(arg)
            elif name == "BRANCH":
                for branch in arg[1]:
                    walk(branch)
            elif name == "IN":
                for member_op, member in arg:
                    if str(member_op) == "LITERAL":
                        runs.append(chr(member))
                    elif str(member_op) == "RANGE":
                        runs.extend((chr(member[0]), chr(member[1])))
        if run:
            runs.append(run)

    walk(sre_parse.parse(pattern.pattern, pattern.flags))
    return runs


def hostile_strings(pattern: re.Pattern[str]) -> Iterator[str]:
    """Strings of the pattern's own pieces, repeated: what makes a backtracking pattern slow."""
    ordered = _literals(pattern)
    pieces = sorted(set(ordered))
    chars = sorted(set(POOL) | {p for p in pieces if len(p) == 1})
    for char in chars:
        yield char * LENGTH
    # The literal runs in order, as far as each one ("${", "${setup."): an opening repeated, as
    # many times as a character is (searched from each opening, quadratic in their number).
    for end in range(2, len(ordered) + 1):
        yield "".join(ordered[:end]) * LENGTH
    for piece in pieces:
        yield piece * LENGTH
        for char in chars:
            yield piece + char * LENGTH
            yield (piece + char) * (LENGTH // (len(piece) + 1))
        for other in pieces:
            if other != piece:
                yield piece + other * (LENGTH // len(other))
                yield "a" + piece + other * (LENGTH // len(other)) + piece


def _timed(use: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    use(text)
    return time.perf_counter() - started


def _best(use: Callable[[str], object], text: str) -> float:
    """How long ``use(text)`` takes: measured again when slow, the fastest run counting. A run
    the scheduler paused on a loaded machine is slow once; a quadratic pattern every time."""
    took = _timed(use, text)
    for _ in range(2):
        if took <= SLOW_SECONDS:
            break
        took = min(took, _timed(use, text))
    return took


def _slow_cases(pattern: re.Pattern[str]) -> list[str]:
    slow: list[str] = []
    for text in hostile_strings(pattern):
        for use in (pattern.search, pattern.fullmatch, pattern.findall):
            took = _best(use, text)
            if took > SLOW_SECONDS:
                slow.append(f"{use.__name__}({text[:24]!r}... {len(text)} chars) took {took:.2f} s")
                return slow
    return slow


def _scan(conn: Connection) -> None:
    for where, pattern in patterns().values():
        conn.send(("start", where, pattern.pattern))
        conn.send(("done", where, _slow_cases(pattern)))
    conn.send(("end", "", []))


def test_the_package_has_patterns_to_check() -> None:
    found = patterns()
    # The ones issue 45 found, among the rest: the scan reads what it should.
    sources = {source for source, _ in found}
    assert r"\{\{([^{}]*)\}\}" in sources and r"\$\{\s*setup\.([^}]*+)(?:\}|\Z)" in sources
    assert len(found) > 60


@pytest.mark.parametrize(
    "quadratic",
    [
        r"\$\{\s*setup\.([^}]*)\}",  # many openings that never close, each read to the end
        r"([0-9]+)(s|m|h)",  # a run of digits with no unit, searched from each digit
        r'"(?:[^"\\]|\\.)*"',  # '"\\"\\"...': an unterminated string from every quote
        r"^[^@\s]+@[^@\s]+\.[^@\s]+$",  # a domain of many dots
    ],
)
def test_the_scan_finds_the_quadratic_patterns_the_package_had(quadratic: str) -> None:
    assert _slow_cases(re.compile(quadratic))


def test_every_pattern_runs_in_linear_time_on_hostile_text() -> None:
    parent, child = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_scan, args=(child,), daemon=True)
    process.start()
    problems: list[str] = []
    current = "(before the first pattern)"
    try:
        while True:
            if not parent.poll(STUCK_SECONDS):
                problems.append(f"{current}: still running after {STUCK_SECONDS:.0f} s (cubic or worse)")
                break
            event, where, detail = parent.recv()
            if event == "end":
                break
            if event == "start":
                current = f"{where} {detail!r}"
            elif detail:
                problems.append(f"{current}: {'; '.join(detail)}")
    finally:
        process.kill()
        process.join()
    assert not problems, "\n".join(problems)
