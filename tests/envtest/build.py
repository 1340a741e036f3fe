"""Build etcd, kube-apiserver and kube-controller-manager from Go modules into the envtest cache.

    build.py                    build what the cache lacks (idempotent), print where the binaries are
    build.py --check            exit 1 unless every binary is cached; builds nothing
    build.py sync-kube v1.37.2  regenerate kube/go.mod from that release's own go.mod, then tidy
    build.py sync-etcd v3.6.16  regenerate etcd/go.mod for that etcd server release, then tidy

The versions live in the wrapper modules' go.mod files (committed with their go.sum); the cache
directory of each binary is `<tool>-<version>-<go version>` under ~/.cache/bundle-operator/envtest.
Environment: GO (the go command), GOTOOLCHAIN (default local), ENVTEST_BUILD_JOBS (default 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bundle_operator.devcluster import binaries
from bundle_operator.devcluster.gobuild import Go, build_lock, find_go

HERE = Path(__file__).resolve().parent
KUBE_MODULE_DIR = HERE / "kube"
ETCD_MODULE_DIR = HERE / "etcd"
KUBERNETES = "k8s.io/kubernetes"
ETCD_SERVER = "go.etcd.io/etcd/server/v3"
KUBE_COMMANDS = {
    binaries.KUBE_APISERVER: f"{KUBERNETES}/cmd/kube-apiserver",
    binaries.KUBE_CONTROLLER_MANAGER: f"{KUBERNETES}/cmd/kube-controller-manager",
}
# The tags and flags of the upstream release build (hack/lib/golang.sh) without debug info.
KUBE_TAGS = "selinux,notest,grpcnotrace"
VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")


def module_requirement(go: Go, module_dir: Path, module: str) -> dict[str, Any]:
    """`go list -m -json` of one requirement of a wrapper module (its Version and Time)."""
    info: dict[str, Any] = json.loads(go.run("list", "-m", "-json", module, cwd=module_dir))
    return info


def kube_ldflags(version: str, build_date: str) -> str:
    """Linker flags stamping the release version so /version reports it, as hack/lib/version.sh does."""
    major, minor = version.removeprefix("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        # Built from the published module: there is no git tree, and the proxy gives no commit.
        "gitCommit": "",
        "gitTreeState": "archive",
        "buildDate": build_date,
    }
    stamps = [f"-X '{pkg}.{key}={value}'" for pkg in VERSION_PACKAGES for key, value in values.items()]
    return " ".join(["-s", "-w", *stamps])


def go_build(go: Go, module_dir: Path, out: str, packages: list[str], tags: str, ldflags: str) -> None:
    """One `go build` of main packages to `out` (a directory when it ends with a slash)."""
    # Two jobs: the machine has two cores and other work beside this build.
    jobs = os.environ.get("ENVTEST_BUILD_JOBS", "2")
    args = ["build", "-p", jobs, "-trimpath", "-ldflags", ldflags, "-o", out]
    if tags:
        args += ["-tags", tags]
    print(f"envtest: go {' '.join(args)} {' '.join(packages)}", flush=True)
    go.run(*args, *packages, cwd=module_dir)


def check_version(exe: Path, expected: str) -> None:
    """Refuse a binary whose --version does not name the version it was built for."""
    output = subprocess.run([str(exe), "--version"], check=True, stdout=subprocess.PIPE, text=True).stdout
    if expected not in output:
        sys.exit(f"{exe} --version printed {output.strip()!r}, expected {expected}")


def install(tool: str, built: Path, version: str, go: Go, info: dict[str, Any]) -> Path:
    """Move a built binary into its cache directory atomically; return its final path."""
    dest = binaries.asset_dir(tool, version, go.version)
    staging = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.move(str(built), staging / tool)
    (staging / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    return dest / tool


def cached(tool: str, version: str, go: Go) -> Path | None:
    """The cached binary, if a previous build finished."""
    exe = binaries.asset_dir(tool, version, go.version) / tool
    return exe if os.access(exe, os.X_OK) else None


def build_kube(go: Go, check_only: bool) -> dict[str, Path | None]:
    """Build whichever of kube-apiserver and kube-controller-manager the cache lacks."""
    release = module_requirement(go, KUBE_MODULE_DIR, KUBERNETES)
    version = release["Version"]
    found = {tool: cached(tool, version, go) for tool in KUBE_COMMANDS}
    missing = [tool for tool, path in found.items() if path is None]
    if check_only or not missing:
        return found
    ldflags = kube_ldflags(version, release["Time"])
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="envtest-kube-") as tmp:
        packages = [KUBE_COMMANDS[tool] for tool in missing]
        go_build(go, KUBE_MODULE_DIR, f"{tmp}/", packages, KUBE_TAGS, ldflags)
        for tool in missing:
            check_version(Path(tmp) / tool, f"Kubernetes {version}")
            info = {"module": KUBERNETES, "version": version, "go": go.version, "ldflags": ldflags}
            found[tool] = install(tool, Path(tmp) / tool, version, go, info)
    print(f"envtest: built {', '.join(missing)} {version} in {time.monotonic() - started:.0f} s")
    return found


def build_etcd(go: Go, check_only: bool) -> Path | None:
    """Build etcd unless the cache has it."""
    version = module_requirement(go, ETCD_MODULE_DIR, ETCD_SERVER)["Version"]
    found = cached(binaries.ETCD, version, go)
    if check_only or found is not None:
        return found
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="envtest-etcd-") as tmp:
        # The server module's main package is not named etcd; -o names the binary.
        built = Path(tmp) / binaries.ETCD
        go_build(go, ETCD_MODULE_DIR, str(built), [ETCD_SERVER], "", "-s -w")
        check_version(built, f"etcd Version: {version.removeprefix('v')}")
        info = {"module": ETCD_SERVER, "version": version, "go": go.version}
        found = install(binaries.ETCD, built, version, go, info)
    print(f"envtest: built etcd {version} in {time.monotonic() - started:.0f} s")
    return found


def build(check_only: bool) -> int:
    """Build (or with check_only, only look up) every binary and print where each one is."""
    go = find_go("envtest")
    with build_lock(binaries.cache_root()):
        paths: dict[str, Path | None] = {binaries.ETCD: build_etcd(go, check_only)}
        paths.update(build_kube(go, check_only))
    try:
        paths[binaries.KUBECTL] = binaries.find_kubectl()
    except binaries.BinariesNotFound:
        paths[binaries.KUBECTL] = None
    for tool, path in paths.items():
        print(f"{tool:<24} {path or 'MISSING'}")
    return 0 if all(paths.values()) else 1


def download_go_mod(go: Go, module: str, version: str) -> dict[str, Any]:
    """`go mod edit -json` of a published module's own go.mod, fetched through the module proxy."""
    env = {**go.env, "GOFLAGS": ""}
    with tempfile.TemporaryDirectory(prefix="envtest-sync-") as tmp:
        fetched = json.loads(
            go.run("mod", "download", "-json", f"{module}@{version}", cwd=Path(tmp), env=env)
        )
        parsed: dict[str, Any] = json.loads(go.run("mod", "edit", "-json", fetched["GoMod"], cwd=Path(tmp)))
    return parsed


def write_module(module_dir: Path, go: Go, text: str) -> None:
    """Replace a wrapper's go.mod, then let `go mod tidy` complete it and write go.sum afresh."""
    (module_dir / "go.mod").write_text(text)
    (module_dir / "go.sum").unlink(missing_ok=True)
    go.run("mod", "tidy", cwd=module_dir, env={**go.env, "GOFLAGS": ""})
    print(f"envtest: wrote {module_dir / 'go.mod'} and go.sum")


def godebug_lines(release: dict[str, Any]) -> str:
    """The release's godebug defaults, so the binaries behave as the upstream build does."""
    entries = release.get("GoDebug") or []
    return "".join(f"godebug {entry['Key']}={entry['Value']}\n\n" for entry in entries)


def sync_kube(version: str) -> int:
    """Point the kube wrapper at `version`, replacing each staging module with its published twin."""
    go = find_go("envtest")
    release = download_go_mod(go, KUBERNETES, version)
    required = {req["Path"] for req in release.get("Require") or []}
    # The release replaces its staging modules with ./staging/src/...; a dependent module cannot
    # follow such a path, so take the published v0.<minor>.<patch> of each one the release uses.
    staging = sorted(
        rep["Old"]["Path"]
        for rep in release.get("Replace") or []
        if rep["New"]["Path"].startswith("./staging/") and rep["Old"]["Path"] in required
    )
    twin = "v0." + version.removeprefix("v1.")
    replaces = "".join(f"\t{module} => {module} {twin}\n" for module in staging)
    tools = "".join(f"\t{package}\n" for package in KUBE_COMMANDS.values())
    text = (
        f"// Generated by `tests/envtest/build.py sync-kube {version}` from that release's go.mod.\n"
        "module bundle-operator.dev/envtest/kube\n\n"
        f"go {release['Go']}\n\n"
        f"{godebug_lines(release)}"
        f"tool (\n{tools})\n\n"
        f"require {KUBERNETES} {version}\n\n"
        "// The staging modules the release requires, at their published twins.\n"
        f"replace (\n{replaces})\n"
    )
    write_module(KUBE_MODULE_DIR, go, text)
    return 0


def sync_etcd(version: str) -> int:
    """Point the etcd wrapper at `version` of the etcd server module."""
    go = find_go("envtest")
    release = download_go_mod(go, ETCD_SERVER, version)
    text = (
        f"// Generated by `tests/envtest/build.py sync-etcd {version}`.\n"
        "module bundle-operator.dev/envtest/etcd\n\n"
        f"go {release['Go']}\n\n"
        f"tool {ETCD_SERVER}\n\n"
        f"require {ETCD_SERVER} {version}\n"
    )
    write_module(ETCD_MODULE_DIR, go, text)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="build nothing; exit 1 if a binary is missing")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("sync-kube").add_argument("version")
    commands.add_parser("sync-etcd").add_argument("version")
    args = parser.parse_args(argv)
    if args.command == "sync-kube":
        return sync_kube(args.version)
    if args.command == "sync-etcd":
        return sync_etcd(args.version)
    return build(args.check)


if __name__ == "__main__":
    sys.exit(main())
