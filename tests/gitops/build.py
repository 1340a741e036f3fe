"""Build helm (4 and 3), argocd-lua and kstatus from Go modules into the gitops tool cache.

    build.py                    build what the cache lacks (idempotent), print where the binaries are
    build.py --check            exit 1 unless every binary is cached; builds nothing
    build.py sync-helm v4.3.2   regenerate helm/go.mod (helm3/go.mod for a v3.x) for that release, then tidy

    helm        helm/     requires helm.sh/helm/v4; builds cmd/helm, stamped as helm's Makefile does
    helm3       helm3/    the same for helm.sh/helm/v3: the chart is checked with both
    argocd-lua  luarun/   main.go on github.com/yuin/gopher-lua: a health.lua run as Argo CD runs it
    kstatus     kstatus/  main.go on sigs.k8s.io/cli-utils: kstatus status.Compute of one object
    promtool    promtool/ requires github.com/prometheus/prometheus; builds cmd/promtool (the chart's
                          alerting rules and dashboard queries are checked with it)

The versions live in the wrapper modules' go.mod files (committed with their go.sum); the cache
directory of each binary is `<tool>-<version>-<go version>` under ~/.cache/bundle-operator/gitops,
where the version of a program of ours (argocd-lua, kstatus) is its library's version plus a hash
of its source, so an edit to main.go makes a new build rather than reusing a stale one.
Environment: GO (the go command), GOTOOLCHAIN (default local), GITOPS_BUILD_JOBS (default 2),
BUNDLE_OPERATOR_GITOPS_CACHE (the cache directory).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_operator.devcluster.gobuild import Go, build_lock, cache_dir, find_go

HERE = Path(__file__).resolve().parent
CACHE_ENV = "BUNDLE_OPERATOR_GITOPS_CACHE"

HELM = "helm"
HELM3 = "helm3"
ARGOCD_LUA = "argocd-lua"
KSTATUS = "kstatus"
PROMTOOL = "promtool"

HELM_MODULE = "helm.sh/helm/v4"
HELM3_MODULE = "helm.sh/helm/v3"
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"


@dataclass(frozen=True)
class Tool:
    """One binary: the wrapper module it is built in and the module whose version names the build."""

    name: str
    module_dir: Path
    module: str
    package: str
    # A program of ours: its source is part of the build's identity.
    own_source: bool

    def module_version(self) -> str:
        """The version of `module` that the wrapper's go.mod requires."""
        return required_version(self.module_dir, self.module)

    def version(self) -> str:
        """The version part of the cache directory: the module's, plus a source hash for our programs."""
        version = self.module_version()
        return f"{version}-{source_hash(self.module_dir)}" if self.own_source else version


def required_version(module_dir: Path, module: str) -> str:
    """The version of `module` that the go.mod in `module_dir` requires."""
    text = (module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise LookupError(f"{module_dir / 'go.mod'} does not require {module}")
    return match.group(1)


TOOLS: dict[str, Tool] = {
    HELM: Tool(HELM, HERE / "helm", HELM_MODULE, f"{HELM_MODULE}/cmd/helm", own_source=False),
    # The chart must work with Helm 3 too, which many clusters' tooling still runs.
    HELM3: Tool(HELM3, HERE / "helm3", HELM3_MODULE, f"{HELM3_MODULE}/cmd/helm", own_source=False),
    ARGOCD_LUA: Tool(ARGOCD_LUA, HERE / "luarun", "github.com/yuin/gopher-lua", ".", own_source=True),
    KSTATUS: Tool(KSTATUS, HERE / "kstatus", "sigs.k8s.io/cli-utils", ".", own_source=True),
    PROMTOOL: Tool(
        PROMTOOL,
        HERE / "promtool",
        PROMETHEUS_MODULE,
        f"{PROMETHEUS_MODULE}/cmd/promtool",
        own_source=False,
    ),
}


def source_hash(module_dir: Path) -> str:
    """12 hex digits of sha256 over a module's go.mod, go.sum and .go files (names and contents)."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in module_dir.rglob("*") if p.is_file() and p.name.endswith((".go", ".mod", ".sum"))
    )
    for path in files:
        digest.update(path.relative_to(module_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    """The gitops cache: $BUNDLE_OPERATOR_GITOPS_CACHE or ~/.cache/bundle-operator/gitops."""
    return cache_dir("gitops", CACHE_ENV)


def asset_dir(tool: str, version: str, go_version: str, root: Path | None = None) -> Path:
    """The cache directory of one build, e.g. `helm-v4.3.1-go1.26.8`."""
    return (root or cache_root()) / f"{tool}-{version}-{go_version}"


def helm_ldflags(module: str, version: str) -> str:
    """The linker flags of helm's Makefile for a tagged release, so `helm version` reports it."""
    values = {
        "version": version,
        # A tagged build clears the "unreleased" metadata.
        "metadata": "",
        # Built from the published module: there is no git tree, and the proxy gives no commit.
        "gitCommit": "",
        # The module zip is the tag's content, checked against go.sum: nothing local changed it.
        "gitTreeState": "clean",
    }
    stamps = [f"-X '{module}/internal/version.{key}={value}'" for key, value in values.items()]
    return " ".join(["-s", "-w", *stamps])


def helm3_kube_ldflags(tool: Tool) -> list[str]:
    """Helm 3's Makefile also stamps the Kubernetes version it assumes (from its client-go, v0.N →
    1.N); built without it, `helm template` would claim Kubernetes 1.20."""
    client_go = required_version(tool.module_dir, "k8s.io/client-go")
    minor = client_go.lstrip("v").split(".")[1]
    return [
        f"-X {HELM3_MODULE}/pkg/{package}.{name}={value}"
        for package in ("lint/rules", "chartutil")
        for name, value in (("k8sVersionMajor", "1"), ("k8sVersionMinor", minor))
    ]


def ldflags(tool: Tool) -> str:
    """Linker flags of one tool: no debug info, and helm's version stamp."""
    if tool.name == HELM3:
        return " ".join([helm_ldflags(tool.module, tool.module_version()), *helm3_kube_ldflags(tool)])
    return helm_ldflags(tool.module, tool.module_version()) if tool.name == HELM else "-s -w"


def go_build(go: Go, tool: Tool, out: Path, flags: str) -> None:
    """One `go build` of a tool's main package to `out`."""
    # Two jobs: the machine has two cores and other work beside this build.
    jobs = os.environ.get("GITOPS_BUILD_JOBS", "2")
    args = ["build", "-p", jobs, "-trimpath", "-ldflags", flags, "-o", str(out), tool.package]
    print(f"gitops: go {' '.join(args)}  (in {tool.module_dir.relative_to(HERE.parents[1])})", flush=True)
    go.run(*args, cwd=tool.module_dir)


def smoke(tool: Tool, exe: Path) -> None:
    """Refuse a binary that does not do its one job on a trivial input."""
    with tempfile.TemporaryDirectory(prefix="gitops-smoke-") as tmp:
        if tool.name in (HELM, HELM3):
            args, stdin = [str(exe), "version", "--template", "{{.Version}}"], ""
            expected: Any = tool.module_version()
        elif tool.name == PROMTOOL:
            rules = Path(tmp) / "rules.yaml"
            rules.write_text("groups:\n- name: g\n  rules:\n  - record: r\n    expr: sum(up)\n")
            args, stdin = [str(exe), "check", "rules", str(rules)], ""
            expected = f"Checking {rules}\n  SUCCESS: 1 rules found"
        elif tool.name == ARGOCD_LUA:
            script = Path(tmp) / "health.lua"
            script.write_text('hs = {}\nhs.status = "Healthy"\nhs.message = obj.kind\nreturn hs\n')
            args, stdin = [str(exe), str(script)], '{"kind": "Pod"}'
            expected = {"status": "Healthy", "message": "Pod"}
        else:
            args, stdin = [str(exe)], '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}'
            expected = {"status": "Current", "message": "Resource is always ready", "conditions": []}
        result = subprocess.run(
            args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    output = result.stdout.strip()
    with contextlib.suppress(ValueError):
        output = json.loads(output) if tool.name not in (HELM, HELM3, PROMTOOL) else output
    if result.returncode != 0 or output != expected:
        sys.exit(f"{exe} printed {result.stdout.strip()!r} (exit {result.returncode}), expected {expected!r}")


def install(tool: Tool, built: Path, version: str, go: Go, info: dict[str, Any]) -> Path:
    """Move a built binary into its cache directory atomically; return its final path."""
    dest = asset_dir(tool.name, version, go.version)
    staging = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.move(str(built), staging / tool.name)
    (staging / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    return dest / tool.name


def cached(tool: Tool, version: str, go: Go) -> Path | None:
    """The cached binary, if a previous build finished."""
    exe = asset_dir(tool.name, version, go.version) / tool.name
    return exe if os.access(exe, os.X_OK) else None


def build_tool(go: Go, tool: Tool, check_only: bool) -> Path | None:
    """Build one tool unless the cache has it."""
    version = tool.version()
    found = cached(tool, version, go)
    if check_only or found is not None:
        return found
    flags = ldflags(tool)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"gitops-{tool.name}-") as tmp:
        built = Path(tmp) / tool.name
        go_build(go, tool, built, flags)
        smoke(tool, built)
        info = {"module": tool.module, "version": version, "go": go.version, "ldflags": flags}
        found = install(tool, built, version, go, info)
    print(f"gitops: built {tool.name} {version} in {time.monotonic() - started:.0f} s", flush=True)
    return found


def build(check_only: bool, names: list[str]) -> int:
    """Build (or with check_only, only look up) the named binaries and print where each one is."""
    go = find_go("gitops-tools", "-mod=mod -buildvcs=false")
    with build_lock(cache_root()):
        paths = {name: build_tool(go, TOOLS[name], check_only) for name in names}
    for name, path in paths.items():
        print(f"{name:<12} {path or 'MISSING'}")
    return 0 if all(paths.values()) else 1


def sync_helm(version: str) -> int:
    """Point a helm wrapper at `version` (v4.x: helm/, v3.x: helm3/), with that release's go directive."""
    go = find_go("gitops-tools", "-mod=mod -buildvcs=false")
    env = {**go.env, "GOFLAGS": ""}
    tool = TOOLS[HELM3 if version.startswith("v3.") else HELM]
    module_dir = tool.module_dir
    module_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gitops-sync-") as tmp:
        fetched = json.loads(
            go.run("mod", "download", "-json", f"{tool.module}@{version}", cwd=Path(tmp), env=env)
        )
        release: dict[str, Any] = json.loads(go.run("mod", "edit", "-json", fetched["GoMod"], cwd=Path(tmp)))
    godebug = "".join(f"godebug {e['Key']}={e['Value']}\n\n" for e in release.get("GoDebug") or [])
    text = (
        f"// Generated by `tests/gitops/build.py sync-helm {version}`.\n"
        f"module bundle-operator.dev/gitops/{module_dir.name}\n\n"
        f"go {release['Go']}\n\n"
        f"{godebug}"
        f"tool {tool.package}\n\n"
        f"require {tool.module} {version}\n"
    )
    (module_dir / "go.mod").write_text(text)
    (module_dir / "go.sum").unlink(missing_ok=True)
    go.run("mod", "tidy", cwd=module_dir, env=env)
    print(f"gitops: wrote {module_dir / 'go.mod'} and go.sum")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="build nothing; exit 1 if a binary is missing")
    parser.add_argument("--only", action="append", choices=sorted(TOOLS), help="this tool only (repeatable)")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("sync-helm").add_argument("version")
    args = parser.parse_args(argv)
    if args.command == "sync-helm":
        return sync_helm(args.version)
    return build(args.check, args.only or list(TOOLS))


if __name__ == "__main__":
    sys.exit(main())
