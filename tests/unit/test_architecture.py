"""The package's import rules: the layers point one way, the reference platform stands apart,
the engine never sees Kubernetes, and no module imports itself back through others.

The graph is read from the source with ``ast`` (imports inside functions count too), so a rule
broken by a lazy import fails here as well as one at the top of a module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "bundle_operator"
ROOT = "bundle_operator"

# Which of the package's own parts each part may import (besides itself): ARCHITECTURE.md's
# layers. A part not named here may import nothing of the package.
ALLOWED: dict[str, set[str]] = {
    "document": set(),
    "mcpb": {"document"},
    "platform": {"document"},
    "fetch": set(),
    "registry": {"document", "fetch"},
    "sources": {"document", "mcpb", "fetch", "registry"},
    "devcluster": set(),
    "engine": {"document", "mcpb", "platform"},
    "reference_platform": {"document", "mcpb", "platform", "fetch"},
    "k8s": {"document", "mcpb", "platform", "engine", "fetch", "registry", "sources"},
    "commands": {
        "document",
        "mcpb",
        "platform",
        "engine",
        "fetch",
        "registry",
        "sources",
        "k8s",
        "devcluster",
        "reference_platform",
    },
    "cli": {"commands", "__version__"},
    "__main__": {"k8s", "cli"},
}
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


def _where(imp: Import) -> str:
    return f"{MODULES[imp.source].relative_to(PACKAGE.parent)}:{imp.line} imports {imp.target}"


def test_the_graph_is_read() -> None:
    # A reader that found nothing would pass every rule below.
    assert len(MODULES) > 100
    assert any(i.source == "bundle_operator.engine.apply" and i.target.startswith(ROOT) for i in GRAPH)


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
