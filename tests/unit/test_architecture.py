"""The package's import rules: the layers point one way, the reference platform stands apart,
the engine never sees Kubernetes, and no module imports itself back through others.

The graph is read from the source with ``ast`` (imports inside functions count too), so a rule
broken by a lazy import fails here as well as one at the top of a module.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "operator" / "bundle_operator"
ROOT = "bundle_operator"

# Third-party packages (or parts of them) a part must never import. The platform client sends
# over aiohttp's client, so only aiohttp's server is kept out of it.
FORBIDDEN_LIBRARIES: dict[str, set[str]] = {
    "document": {"kopf", "kubernetes", "aiohttp", "httpx"},
    "mcpb": {"kopf", "kubernetes", "aiohttp"},
    "engine": {"kopf", "kubernetes", "aiohttp"},
    "registry": {"kopf", "kubernetes", "aiohttp"},
    "sources": {"kopf", "kubernetes", "aiohttp"},
    "platform": {"kopf", "kubernetes", "aiohttp.web"},
    "reference_platform": {"kopf", "kubernetes"},
}
# The one command that runs the reference platform, and it loads it only when it runs.
REFERENCE_PLATFORM_ENTRY = "bundle_operator.commands.platform"


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it stands and whether it runs at import time."""

    source: str
    target: str
    line: int
    top_level: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The module an imported name lives in: ``pkg.mod.Thing`` -> ``pkg.mod``."""
    while name and name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join([*base, *([node.module] if node.module else [])])
            else:
                prefix = node.module or ""
            targets = [_resolve(f"{prefix}.{alias.name}") for alias in node.names]
        for target in targets:
            yield Import(module, _resolve(target), node.lineno, id(node) in top)


GRAPH = [imp for module, path in MODULES.items() for imp in _imports(module, path)]


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layers_table(markdown: str) -> dict[str, set[str]]:
    """ARCHITECTURE.md's import table: each part of a row's left column -> the backticked parts
    on its right (a backticked word that is not a name, such as a command, is part of a note)."""
    section = markdown.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    allowed: dict[str, set[str]] = {}
    for row in rows:
        left, right = (cell.strip() for cell in row.strip("|").split("|"))
        names = {name for name in re.findall(r"`([^`]+)`", right) if name.isidentifier()}
        for part in re.findall(r"`([^`]+)`", left):
            allowed[part] = names
    return allowed


# Which of the package's own parts each part may import (besides itself): read from
# ARCHITECTURE.md's table, so that the prose and the rule are one text.
ALLOWED = _layers_table((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
PARTS = {_part(module) for module in MODULES} - {ROOT}


def _where(imp: Import) -> str:
    return f"{MODULES[imp.source].relative_to(PACKAGE.parent)}:{imp.line} imports {imp.target}"


def test_the_graph_is_read() -> None:
    # A reader that found nothing would pass every rule below.
    assert len(MODULES) > 100
    assert any(i.source == "bundle_operator.engine.apply" and i.target.startswith(ROOT) for i in GRAPH)


def test_the_layers_table_is_read_and_names_every_part() -> None:
    # A table the reader misses would leave no rule; a part without a row would have none.
    assert ALLOWED["engine"] == {"document", "mcpb", "platform", "telemetry"}
    assert ALLOWED["document"] == set() and ALLOWED["devcluster"] == set()
    assert "reference_platform" in ALLOWED["commands"]
    assert not PARTS - ALLOWED.keys(), (
        f"parts without a row in ARCHITECTURE.md: {sorted(PARTS - ALLOWED.keys())}"
    )
    named = set(ALLOWED).union(*ALLOWED.values())
    assert not named - PARTS, f"ARCHITECTURE.md names parts that do not exist: {sorted(named - PARTS)}"


def test_each_part_imports_only_the_layers_below_it() -> None:
    wrong = [
        _where(imp)
        for imp in GRAPH
        if imp.target.startswith(ROOT + ".")
        and _part(imp.target) != _part(imp.source)
        and _part(imp.target) not in ALLOWED[_part(imp.source)]
    ]
    assert not wrong, "imports against the layers (see ARCHITECTURE.md):\n" + "\n".join(wrong)


@pytest.mark.parametrize("part", sorted(FORBIDDEN_LIBRARIES))
def test_pure_parts_never_import_the_runtime_libraries(part: str) -> None:
    banned = FORBIDDEN_LIBRARIES[part]
    wrong = [
        _where(imp)
        for imp in GRAPH
        if _part(imp.source) == part
        and any(imp.target == b or imp.target.startswith(b + ".") for b in banned)
    ]
    assert not wrong, f"{part} must not import {sorted(banned)}:\n" + "\n".join(wrong)


def test_only_platform_serve_loads_the_reference_platform_and_only_when_it_runs() -> None:
    users = [
        imp
        for imp in GRAPH
        if _part(imp.target) == "reference_platform" and _part(imp.source) != "reference_platform"
    ]
    assert users, "the serve command no longer loads the reference platform"
    wrong = [_where(i) for i in users if i.source != REFERENCE_PLATFORM_ENTRY or i.top_level]
    assert not wrong, "the operator's code must not load the reference platform:\n" + "\n".join(wrong)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules around it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_module_imports_itself_back() -> None:
    edges: dict[str, set[str]] = {}
    for imp in GRAPH:
        # A package's __init__ re-exports its modules; the modules importing the package's
        # siblings through it is not a circle of code, so packages count only as their modules.
        if imp.target in MODULES and imp.target != imp.source and MODULES[imp.target].name != "__init__.py":
            edges.setdefault(imp.source, set()).add(imp.target)
    assert _cycle(edges) is None, "import circle: " + " -> ".join(_cycle(edges) or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


# In a package's docstring, a module is named either as a file (`name.py`, `folder/name.py`) or,
# backticked, by its import path (``bundle_operator.platform.models``, possibly with an attribute).
_FILE_NAME = re.compile(r"(?<![\w./])((?:\w+/)*\w+\.py)\b")
_IMPORT_PATH = re.compile(r"`(bundle_operator(?:\.\w+)+)`")
PACKAGES = sorted(path.parent for path in PACKAGE.rglob("__init__.py"))


def _stale_names(package: Path) -> list[str]:
    """The modules the package's docstring names that do not exist."""
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    text = ast.get_docstring(tree) or ""
    stale = [
        name
        for name in _FILE_NAME.findall(text)
        # A file of the package itself, or a path from the package root (``k8s/run.py``).
        if not (package / name).is_file() and not (PACKAGE / name).is_file()
    ]
    for dotted in _IMPORT_PATH.findall(text):
        module = _resolve(dotted)
        # The longest module prefix may be followed by one attribute of that module.
        rest = dotted.removeprefix(module).lstrip(".")
        if (
            module not in MODULES
            or "." in rest
            or (rest and not hasattr(importlib.import_module(module), rest))
        ):
            stale.append(dotted)
    return stale


def test_the_docstring_reader_finds_module_names() -> None:
    assert _FILE_NAME.findall("see `k8s/run.py`, client.py's calls and transport.py; not x.pyc") == [
        "k8s/run.py",
        "client.py",
        "transport.py",
    ]
    assert _IMPORT_PATH.findall("import ``bundle_operator.platform.models`` or `bundle_operator`") == [
        "bundle_operator.platform.models"
    ]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_each_package_docstring_names_only_modules_that_exist(package: Path) -> None:
    stale = _stale_names(package)
    assert not stale, f"{package.relative_to(PACKAGE.parent)}/__init__.py names what does not exist: {stale}"


HANDLERS = PACKAGE / "k8s" / "handlers.py"


def _not_registrations(path: Path) -> list[str]:
    """What a module of kopf registrations holds besides them: a class, a function no ``kopf.``
    decorator registers, or a module-level name bound to anything but a constant or the registry."""
    found: list[str] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            found.append(f"class {node.name} (line {node.lineno})")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if not any(d.startswith("kopf.") for d in decorators):
                found.append(f"def {node.name} (line {node.lineno}) is registered with no kopf decorator")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            constant = all(name.isupper() for name in names) and not isinstance(
                node.value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp
            )
            if not names or not constant:
                found.append(f"{ast.unparse(node)[:60]} (line {node.lineno}): mutable module state")
    return found


def test_handlers_hold_only_kopf_registrations() -> None:
    # The composition root, the run envelope, peers, nudges and the diff base live in modules of
    # their own; state a handler needs travels in kopf's memo, never in a module global.
    assert _not_registrations(HANDLERS) == []


def test_the_registration_check_finds_what_is_not_one(tmp_path: Path) -> None:
    module = tmp_path / "handlers.py"
    module.write_text(
        "import kopf\nREGISTRY = kopf.OperatorRegistry()\nSEEN = {}\n"
        "class Runtime: ...\n"
        "def helper(): ...\n"
        "@kopf.on.create('g', 'v1', 'x', registry=REGISTRY)\nasync def created(**_): ...\n",
        encoding="utf-8",
    )
    assert [f.split(" (")[0] for f in _not_registrations(module)] == [
        "SEEN = {}",
        "class Runtime",
        "def helper",
    ]


def test_bundlectl_starts_without_the_operators_libraries() -> None:
    # Every bundlectl call builds the whole parser; kopf and the kubernetes client cost half a
    # second of each start, and only `operator run` needs them (when it runs, not when parsed).
    probe = (
        "import sys\n"
        "from bundle_operator.cli import build_parser\n"
        "build_parser().parse_args(['operator', 'run', '--namespace', 'a'])\n"
        "print(' '.join(m for m in ('kopf', 'kubernetes') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"building bundlectl's parser loaded {done.stdout.strip()}"
