"""Run the GitOps tools of the tests: helm, argocd-lua and kstatus, as `make gitops-tools` built them.

    from tests.gitops.tools import argocd_health, helm_binary, kstatus

    helm_binary()                       Path of helm v4.3.1 (helm.sh/helm/v4)
    argocd_health(script, obj)          Argo CD's verdict of a health.lua on an object
    kstatus(obj)                        kstatus' verdict (status.Compute) on an object

Each looks the binary up in ~/.cache/bundle-operator/gitops (see build.py); one that is missing, or
was built from other sources than the checked-out ones, raises ToolNotBuiltError naming
`make gitops-tools`. A tool that fails raises ToolFailedError with its stderr.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, TypedDict

from tests.gitops import build

HELM = build.HELM
ARGOCD_LUA = build.ARGOCD_LUA
KSTATUS = build.KSTATUS
TIMEOUT_SECONDS = 60.0


class GitopsToolError(RuntimeError):
    """A gitops tool could not give an answer."""


class ToolNotBuiltError(GitopsToolError):
    """The cache has no binary of the tool for the checked-out sources."""


class ToolFailedError(GitopsToolError):
    """The tool exited non-zero (for argocd-lua: the script failed, as it would in Argo CD)."""

    def __init__(self, tool: str, returncode: int, stderr: str) -> None:
        super().__init__(f"{tool} exited with {returncode}: {stderr.strip()}")
        self.tool = tool
        self.returncode = returncode
        self.stderr = stderr


class NoHealthError(GitopsToolError):
    """The script returned nil: Argo CD takes no health from it (and falls back to its built-in check)."""


class Health(TypedDict):
    """gitops-engine's HealthStatus as Argo CD takes it from a health.lua ("" when left out)."""

    status: str
    message: str


class KStatusCondition(TypedDict):
    """A kstatus condition Compute derives (Reconciling or Stalled)."""

    type: str
    status: str
    reason: str
    message: str


class KStatus(TypedDict):
    """kstatus' verdict: Current, InProgress, Failed, Terminating, NotFound or Unknown."""

    status: str
    message: str
    conditions: list[KStatusCondition]


def _go_version_key(name: str) -> tuple[int, ...]:
    """Order cache directories by the Go version at the end of their name (go1.26.8 → (1, 26, 8))."""
    match = re.search(r"-go(\d+(?:\.\d+)*)[^-]*$", name)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def binary(tool: str) -> Path:
    """The cached executable of `tool` for the checked-out wrapper module, newest Go build first."""
    spec = build.TOOLS[tool]
    version = spec.version()
    prefix = f"{tool}-{version}-go"
    root = build.cache_root()
    candidates = sorted(
        (
            folder / tool
            for folder in (root.iterdir() if root.is_dir() else [])
            if folder.name.startswith(prefix) and ".tmp" not in folder.name
            if os.access(folder / tool, os.X_OK)
        ),
        key=lambda exe: _go_version_key(exe.parent.name),
        reverse=True,
    )
    if not candidates:
        raise ToolNotBuiltError(f"{tool} {version} is not built in {root}: run make gitops-tools")
    return candidates[0]


def helm_binary() -> Path:
    """helm v4.3.1, built from helm.sh/helm/v4 with the release's version stamp."""
    return binary(HELM)


def helm3_binary() -> Path:
    """helm v3, built from helm.sh/helm/v3 the same way: the chart must work with Helm 3 too."""
    return binary(build.HELM3)


def promtool_binary() -> Path:
    """promtool of the Prometheus release in promtool/go.mod: checks rules, runs rule unit tests."""
    return binary(build.PROMTOOL)


def _run(tool: str, args: list[str], stdin: str) -> str:
    """Run a tool with `stdin`; its stdout, or ToolFailedError."""
    result = subprocess.run(
        [str(binary(tool)), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    if result.returncode != 0:
        raise ToolFailedError(tool, result.returncode, result.stderr)
    return result.stdout


def argocd_health(script: Path, obj: dict[str, Any], *, open_libs: bool = False) -> Health:
    """Run the health check `script` on `obj` as Argo CD v3 does and return its verdict.

    `obj` becomes the Lua table `obj` (util/lua decodeValue); the returned table goes through
    JSON into {status, message}, a status outside Healthy/Progressing/Degraded/Suspended/Missing/
    Unknown turns into Unknown "Lua returned an invalid health status". Libraries: package, base,
    table and the 'safe' os of an argocd-cm customization; `open_libs=True` gives every library
    (string, math, ...), as Argo CD does for built-in scripts and for a customization with
    `resource.customizations.useOpenLibs.<group_kind>: "true"`. A script error (or the 1 s timeout,
    or a result other than a table or nil) raises ToolFailedError; a nil result raises NoHealthError.
    """
    args = ["-open-libs"] if open_libs else []
    out = json.loads(_run(ARGOCD_LUA, [*args, str(script)], json.dumps(obj)))
    if out is None:
        raise NoHealthError(f"{script} returned nil: Argo CD would take no health from it")
    return Health(status=out["status"], message=out["message"])


def kstatus(obj: dict[str, Any]) -> KStatus:
    """kstatus' verdict on `obj`: sigs.k8s.io/cli-utils status.Compute, as Flux and kpt wait on it."""
    out = json.loads(_run(KSTATUS, [], json.dumps(obj)))
    conditions = [
        KStatusCondition(type=c["type"], status=c["status"], reason=c["reason"], message=c["message"])
        for c in out["conditions"]
    ]
    return KStatus(status=out["status"], message=out["message"], conditions=conditions)
