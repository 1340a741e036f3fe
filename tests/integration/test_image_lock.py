"""The image's venv, built here the way the Dockerfile builds it, runs both entrypoints.

A fresh venv (no pip of its own) gets exactly requirements.lock (`--require-hashes --no-deps
--only-binary=:all:`), then the project with `--no-deps` from a copy of what the Dockerfile copies.
`pip check` passes, the installed set is exactly the locked set plus the project, and both
`python -m bundle_operator --help` and `bundlectl platform serve --help` work: the lock is complete
and the image's entrypoints resolve with nothing else. pip's cache makes re-runs quick; the first
run downloads about 60 wheels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.unit.test_image import LOCK, PYPROJECT, parse_lock

pytestmark = pytest.mark.integration

ROOT = PYPROJECT.parent
PACKAGE = ROOT / "operator" / "bundle_operator"


def clean_env() -> dict[str, str]:
    """The environment without this test run's venv, so the new venv sees only itself."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.pop("PIP_NO_CACHE_DIR", None)  # the cache is what keeps re-runs fast
    return env


def pip(venv: Path) -> list[str | Path]:
    """This test run's pip, working on venv (pip --python): seeding each venv with a pip of its own
    costs seconds and would add pip itself to the set that must equal the lock."""
    return [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]


def check(argv: list[str | Path], cwd: Path) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv built like the Dockerfile's build stage: the lock, then the project's own package."""
    work = tmp_path_factory.mktemp("image")
    # What the Dockerfile copies from the context, and nothing more (no egg-info, no bytecode).
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(PACKAGE, source / "operator" / "bundle_operator", ignore=ignore)

    venv = work / "venv"
    check([sys.executable, "-m", "venv", "--without-pip", venv], cwd=work)
    install = [*pip(venv), "install", "--quiet", "--no-compile"]
    check([*install, "--require-hashes", "--no-deps", "--only-binary=:all:", "-r", LOCK], cwd=work)
    check([*install, "--no-deps", source], cwd=work)
    return venv


def test_pip_check_passes_with_only_the_locked_set(venv: Path) -> None:
    check([*pip(venv), "check"], cwd=venv)
    listed = json.loads(check([*pip(venv), "list", "--format=json"], cwd=venv))
    installed: dict[str, str] = {canonicalize_name(p["name"]): p["version"] for p in listed}
    assert installed.pop("bundle-operator") == "0.1.0"
    locked: dict[str, str] = {pin.name: str(pin.version) for pin in parse_lock(LOCK.read_text())}
    assert installed == locked


def test_the_package_comes_from_the_venv_not_the_work_tree(venv: Path) -> None:
    code = "import bundle_operator; print(bundle_operator.__file__)"
    where = check([venv / "bin" / "python", "-c", code], cwd=venv)
    assert Path(where.strip()).is_relative_to(venv), where


def test_the_operator_entrypoint_runs(venv: Path, tmp_path: Path) -> None:
    """The image's ENTRYPOINT, `python -m bundle_operator`, with the venv's python."""
    out = check([venv / "bin" / "python", "-m", "bundle_operator", "--help"], cwd=tmp_path)
    assert "usage: python -m bundle_operator" in out
    for flag in ("--all-namespaces", "--metrics-port", "--health-port", "--platform-url"):
        assert flag in out


def test_the_platform_command_runs(venv: Path, tmp_path: Path) -> None:
    """The reference platform's command in the image, `bundlectl platform serve`."""
    out = check([venv / "bin" / "bundlectl", "platform", "serve", "--help"], cwd=tmp_path)
    assert "usage: bundlectl platform serve" in out
    for flag in ("--port", "--db", "--host"):
        assert flag in out
