"""Build the container image with buildah, and its Python 3.11 base from Debian's packages.

``python scripts/image.py base``  makes ``localhost/python-base:bookworm`` with mmdebstrap (once: the
root filesystem is cached in ~/.cache/bundle-operator/image/, keyed by what goes into it).
``python scripts/image.py build`` builds the Dockerfile into ``$IMAGE`` on ``$BASE_IMAGE``: ``auto``
(the default) takes the pinned official base when it is in local storage or can be pulled, else
the local base, made when missing. buildah and mmdebstrap come from Debian's packages, installed
here when missing (as root, which the machines this runs on are).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("BUNDLE_OPERATOR_CACHE", Path.home() / ".cache" / "bundle-operator")) / "image"

LOCAL_BASE = os.environ.get("IMAGE_LOCAL_BASE", "localhost/python-base:bookworm")
SUITE = "bookworm"
# What the official python:3.11-slim image has that the operator and the platform use: Python with
# its venv module, CA certificates for https platforms and registries, /etc/services and time zones.
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates", "netbase", "tzdata")
# As slim as the official base: no manuals, docs (but their licences) or translations.
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)
BASE_KEY_LABEL = "dev.bundle-operator.base-key"
BUILD_CA_PATH = "/run/build-ca/ca.crt"
PULL_TIMEOUT = float(os.environ.get("IMAGE_PULL_TIMEOUT", "120"))


def say(message: str) -> None:
    print(f"image: {message}", flush=True)


def run(*argv: str, quiet: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command; its output streams through unless quiet (then it comes back)."""
    if not quiet:
        say("$ " + " ".join(argv))
    return subprocess.run(
        argv, check=False, text=True, timeout=timeout, capture_output=quiet, stdin=subprocess.DEVNULL
    )


def ensure_tool(command: str, package: str) -> None:
    """Install a Debian package for a missing command; say how when that is not possible here."""
    if shutil.which(command):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit(
            f"image: {command} is missing; install Debian's {package} package (apt-get install {package})"
        )
    say(f"installing {package} from Debian's packages")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            sys.exit(f"image: `{' '.join(argv)}` failed ({done.returncode})")
    if not shutil.which(command):
        sys.exit(f"image: {package} is installed but {command} is not on PATH")


def image_exists(name: str) -> bool:
    return run("buildah", "inspect", "--type", "image", name, quiet=True).returncode == 0


def image_label(name: str, label: str) -> str | None:
    done = run(
        "buildah", "inspect", "--type", "image", "--format", "{{json .OCIv1.Config.Labels}}", name, quiet=True
    )
    if done.returncode != 0:
        return None
    labels = json.loads(done.stdout or "null") or {}
    value = labels.get(label)
    return value if isinstance(value, str) else None


def apt_sources() -> Path:
    """The machine's own Debian sources, so the base comes from wherever this machine gets packages."""
    configured = os.environ.get("IMAGE_BASE_SOURCES")
    candidates = [Path(configured)] if configured else []
    candidates += [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]
    for path in candidates:
        if path.is_file() and path.read_text().strip():
            return path
    sys.exit("image: no Debian sources found; set IMAGE_BASE_SOURCES to a sources.list (one-line or deb822)")


def base_key(sources: Path) -> str:
    """What the base is made of: suite, packages, excludes and the sources they come from."""
    digest = hashlib.sha256()
    for part in (SUITE, *BASE_PACKAGES, *DPKG_EXCLUDES, sources.read_text()):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def make_base() -> str:
    """``localhost/python-base:bookworm`` from Debian's packages; made again only when its inputs change."""
    ensure_tool("buildah", "buildah")
    sources = apt_sources()
    key = base_key(sources)
    if image_label(LOCAL_BASE, BASE_KEY_LABEL) == key:
        say(f"{LOCAL_BASE} is up to date (base key {key})")
        return LOCAL_BASE
    CACHE.mkdir(parents=True, exist_ok=True)
    rootfs = CACHE / f"python-base-{SUITE}-{key}.tar"
    if not rootfs.is_file():
        ensure_tool("mmdebstrap", "mmdebstrap")
        for stale in CACHE.glob(f"python-base-{SUITE}-*.tar"):
            stale.unlink()
        started = time.monotonic()
        partial = rootfs.with_suffix(".tar.partial")
        argv = ["mmdebstrap", "--quiet", "--variant=essential", "--include=" + ",".join(BASE_PACKAGES)]
        argv += [f"--dpkgopt={option}" for option in DPKG_EXCLUDES]
        argv += ["--format=tar", SUITE, str(partial), str(sources)]
        if run(*argv).returncode != 0:
            partial.unlink(missing_ok=True)
            sys.exit("image: mmdebstrap failed")
        partial.rename(rootfs)
        say(f"root filesystem made in {time.monotonic() - started:.0f} s: {rootfs}")
    with tempfile.TemporaryDirectory(prefix="python-base-") as context:
        try:
            os.link(rootfs, Path(context) / "rootfs.tar")
        except OSError:  # another filesystem
            shutil.copy(rootfs, Path(context) / "rootfs.tar")
        (Path(context) / "Containerfile").write_text(
            "FROM scratch\n"
            "ADD rootfs.tar /\n"
            f'LABEL {BASE_KEY_LABEL}="{key}" org.opencontainers.image.description="Python 3.11 from Debian '
            f'{SUITE} packages (mmdebstrap), the local base of bundle-operator"\n'
            "ENV LANG=C.UTF-8\n"
            'CMD ["python3"]\n'
        )
        done = run("buildah", "build", "--isolation", "chroot", "--quiet", "--tag", LOCAL_BASE, context)
        if done.returncode != 0:
            sys.exit(f"image: importing the base into {LOCAL_BASE} failed")
    say(f"made {LOCAL_BASE} (base key {key})")
    return LOCAL_BASE


def official_base() -> str:
    """The default of the Dockerfile's ``ARG BASE_IMAGE``: the pinned official base."""
    match = re.search(r"^ARG BASE_IMAGE=(\S+)$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    if match is None:
        sys.exit("image: the Dockerfile has no `ARG BASE_IMAGE=` default")
    return match.group(1)


def choose_base(requested: str) -> str:
    """``auto``: the official base when present or pullable, else the local one from Debian's packages."""
    if requested not in ("", "auto"):
        return requested
    official = official_base()
    if image_exists(official):
        return official
    try:
        pulled = run("buildah", "pull", "--quiet", official, quiet=True, timeout=PULL_TIMEOUT)
    except subprocess.TimeoutExpired:
        pulled = None
    if pulled is not None and pulled.returncode == 0:
        return official
    reason = "timed out" if pulled is None else (pulled.stderr.strip().splitlines() or ["failed"])[-1]
    say(f"the official base cannot be pulled ({reason[:200]}); using the local base from Debian's packages")
    return make_base()


def ca_bundle() -> Path | None:
    """The CA bundle this machine's pip trusts (a TLS-inspecting proxy's CA among them), if any."""
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def build(image: str, requested_base: str) -> None:
    """The Dockerfile built into ``image``; layers are cached, so an unchanged rebuild takes seconds."""
    ensure_tool("buildah", "buildah")
    base = choose_base(requested_base)
    argv = ["buildah", "build", "--isolation", "chroot", "--layers", "--pull=never"]
    argv += ["--build-arg", f"BASE_IMAGE={base}", "--tag", image]
    bundle = ca_bundle()
    if bundle is not None:
        # A build secret: mounted for the RUN steps that ask for it, never part of a layer, and unlike
        # buildah's --volume it leaves the layer cache on.
        argv += [
            "--secret",
            f"id=build-ca,src={bundle.resolve()}",
            "--build-arg",
            f"PIP_CERT={BUILD_CA_PATH}",
        ]
    argv += ["--file", str(ROOT / "Dockerfile"), str(ROOT)]
    started = time.monotonic()
    if run(*argv).returncode != 0:
        sys.exit(f"image: building {image} failed")
    listed = run("buildah", "images", "--format", "{{.Size}} {{.ID}}", image, quiet=True)
    say(
        f"built {image} on {base} in {time.monotonic() - started:.0f} s"
        f" (size and id: {listed.stdout.strip()})"
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["base"]:
        make_base()
        return 0
    if argv[:1] == ["build"]:
        build(os.environ.get("IMAGE", "localhost/bundle-operator:dev"), os.environ.get("BASE_IMAGE", "auto"))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
