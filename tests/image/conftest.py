"""Fixtures of the image tests: the image `make image` built, and a control plane of their own.

The chart's operator watches every namespace, so these tests do not share the e2e session's
control plane (whose operator watches every namespace too): they start one per module.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_operator.devcluster import Kubectl
from tests.control_plane import control_plane
from tests.e2e.conftest import GITHUB_FILES
from tests.e2e.operator_harness import apply_crds
from tests.image.kubelet import Cluster
from tests.integration.platform.platform_harness import github_stub

# What the embedded platform's extra --github-base-url names: the GitHub stand-in, as its pods see it.
GITHUB_HOST = "raw.github.test"
GITHUB_PORT = 80

DEFAULT_IMAGE = "localhost/bundle-operator:dev"


@pytest.fixture(scope="session")
def image() -> str:
    """The image under test (``$IMAGE``, as `make image` names it); the tests fail without it."""
    name = os.environ.get("IMAGE", DEFAULT_IMAGE)
    found = subprocess.run(["buildah", "inspect", "--type", "image", name], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.fail(f"the image tests need {name}: run `make image` (make test does)")
    return name


@pytest.fixture(scope="module")
def image_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane for one module, its CRDs applied, and the socket its pods reach it by."""
    with control_plane(tmp_path_factory.mktemp("image-devcluster")) as running:
        kubectl = Kubectl(running.binaries.kubectl, running.kubeconfig)
        apply_crds(kubectl)
        port = int(running.server.rsplit(":", 1)[1])
        # Unix socket paths are limited to 108 bytes: keep the pods' files under a short path.
        workdir = Path("/tmp") / f"bo-pods-{os.getpid()}-{port}"
        cluster = Cluster(kubectl, port, running.ca_cert, workdir).start()
        try:
            with github_stub(GITHUB_FILES) as stub:
                cluster.expose_host(GITHUB_HOST, GITHUB_PORT, int(stub.url.rsplit(":", 1)[1]))
                yield cluster
        finally:
            cluster.stop()
