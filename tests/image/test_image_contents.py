"""The built image itself: its config, what its root filesystem holds and lacks, and both programs
run from it with buildah (chroot isolation) as uid 65532."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.image.kubelet import ImageRoot

pytestmark = pytest.mark.image

USER = "65532:65532"


@pytest.fixture(scope="module")
def root(image: str) -> Iterator[ImageRoot]:
    mounted = ImageRoot(image)
    try:
        yield mounted
    finally:
        mounted.remove()


@pytest.fixture(scope="module")
def config(image: str) -> dict[str, Any]:
    inspected = subprocess.run(
        ["buildah", "inspect", "--type", "image", image], capture_output=True, text=True, check=True
    )
    found: dict[str, Any] = json.loads(inspected.stdout)["OCIv1"]["config"]
    return found


def in_image(root: ImageRoot, *argv: str, user: str = USER) -> subprocess.CompletedProcess[str]:
    """A command in the image's root filesystem, as buildah runs it (chroot isolation)."""
    return subprocess.run(
        ["buildah", "run", "--isolation", "chroot", "--user", user, root.container, "--", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_the_config_runs_the_operator_as_uid_65532(config: dict[str, Any]) -> None:
    assert config["User"] == USER
    assert config["Entrypoint"] == ["python", "-m", "bundle_operator"]
    assert config["Cmd"] == ["--all-namespaces", "--metrics-port", "9090", "--health-port", "8081"]
    assert set(config["ExposedPorts"]) == {"9090/tcp", "8081/tcp"}
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PATH"].startswith("/opt/venv/bin:") and env["HOME"] == "/tmp"
    assert not [name for name in env if name.startswith("PIP_")], "no build setting reaches the runtime"
    assert "PIP_CERT" not in json.dumps(config)
    assert config["Labels"]["org.opencontainers.image.base.name"], "the base the image was built on"


def test_it_holds_no_sources_tests_git_compiler_pip_or_build_leftovers(root: ImageRoot) -> None:
    fs = root.rootfs
    for absent in (
        "src",
        "wheels",
        "opt/build-tools",
        "run/build-ca",
        "root/.cache",
        "tmp/.cache",
        "opt/venv/bin/pip",
        "usr/bin/gcc",
        "usr/bin/cc",
        "usr/bin/make",
    ):
        assert not (fs / absent).exists(), f"/{absent} is in the image"
    site = next((fs / "opt/venv/lib").glob("python3.*/site-packages"))
    assert not list(site.glob("pip")) and not list(site.glob("setuptools")), "pip or setuptools in the venv"
    assert (site / "bundle_operator" / "__main__.py").is_file()
    assert not list(fs.rglob(".git")), "a git directory in the image"
    assert not list((site / "bundle_operator").rglob("test_*.py")), "tests in the package"


def test_uid_65532_has_a_name_and_both_programs_start(root: ImageRoot) -> None:
    who = in_image(
        root, "python", "-c", "import getpass, os; print(getpass.getuser(), os.getuid(), os.getgid())"
    )
    assert who.returncode == 0, who.stderr
    assert who.stdout.split() == ["nonroot", "65532", "65532"]
    operator = in_image(root, "python", "-m", "bundle_operator", "--help")
    assert operator.returncode == 0 and "--platform-url" in operator.stdout, operator.stderr
    platform = in_image(root, "bundlectl", "platform", "serve", "--help")
    assert platform.returncode == 0 and "--db" in platform.stdout, platform.stderr


def test_the_root_filesystem_is_not_writable_by_the_runtime_user(root: ImageRoot) -> None:
    """Only /data (the platform's database) and /tmp are the user's; the venv and /etc are root's."""
    paths = "('/opt/venv', '/etc', '/usr', '/data', '/tmp')"
    probe = f"import os; print(' '.join(p for p in {paths} if os.access(p, os.W_OK)))"
    done = in_image(root, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["/data", "/tmp"]
    owner = Path(root.rootfs / "data").stat()
    assert (owner.st_uid, owner.st_gid) == (65532, 65532)
