"""The scenes as fixtures: `offline` and `checkout` on this machine alone, `platform` with a fresh
reference platform per page, `cluster` with the e2e tests' control plane and, per page, a fresh
namespace, platform and operator."""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl
from tests.docs import scenes
from tests.docs.scenes import OpenScene, Scene

# The SKILL.md files the e2e tests' GitHub stand-in serves; the control plane, kubectl and the CRDs
# are the session's (tests/control_plane.py), shared with the e2e tests.
from tests.e2e.conftest import GITHUB_FILES
from tests.e2e.operator_harness import QUICK_REFRESH, solo_operator
from tests.integration.platform.platform_harness import TOKEN, GitHubStub, github_stub, start_platform
from tests.mcp_members import Members, members_thread
from tests.oauth_issuer import StubIssuer, stub_issuer


@pytest.fixture(scope="session")
def docs_github() -> Iterator[GitHubStub]:
    """The GitHub stand-in the e2e platform uses, serving the examples' SKILL.md files."""
    with github_stub(GITHUB_FILES) as stub:
        yield stub


@pytest.fixture(scope="session")
def docs_members() -> Iterator[Members]:
    """Two MCP servers a page's gateway can serve: the e2e tests' weather and notes members."""
    with members_thread() as members:
        yield members


@pytest.fixture(scope="session")
def docs_issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubIssuer]:
    """An OAuth issuer on loopback (HTTPS with its own CA) whose token endpoint mints tokens."""
    with stub_issuer(tmp_path_factory.mktemp("docs-issuer")) as issuer:
        yield issuer


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:28].strip("-")


@pytest.fixture
def open_scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenScene]:
    """``open_scene(scene, page)``: a scene for one page's blocks, stopped after the test."""
    with ExitStack() as stack:

        def opened(name: str, page: str, *, operator_env: Mapping[str, str] | None = None) -> Scene:
            if name == "checkout":
                return scenes.checkout(tmp_path / "checkout")
            scene = scenes.offline(tmp_path / name)
            scene.name = name
            if name == "offline":
                return scene
            github: GitHubStub = request.getfixturevalue("docs_github")
            members: Members = request.getfixturevalue("docs_members")
            issuer: StubIssuer = request.getfixturevalue("docs_issuer")
            ca_file = str(issuer.tls.ca_file)
            platform = start_platform(
                tmp_path / "platform.db", "--token", TOKEN, "--github-base-url", github.url,
                "--allow-private-issuers", log=tmp_path / "platform.log", env={"SSL_CERT_FILE": ca_file},
            )  # fmt: skip
            stack.callback(platform.stop)
            scene.env.update({"BUNDLE_PLATFORM_URL": platform.url, "BUNDLE_PLATFORM_TOKEN": TOKEN})
            # What gateway pages need besides the platform: MCP servers to serve, an OAuth issuer.
            scene.env.update(
                {
                    "WEATHER_MCP_URL": members.url("weather"),
                    "NOTES_MCP_URL": members.url("notes"),
                    "OAUTH_ISSUER_URL": issuer.url,
                    "OAUTH_CA_FILE": ca_file,
                }
            )
            scene.notes.append(f"platform log: {platform.log}")
            if name == "platform":
                return scene
            cluster: DevCluster = request.getfixturevalue("devcluster")
            request.getfixturevalue("crds")
            admin: Kubectl = request.getfixturevalue("kubectl")
            # e2e-solo-*: the e2e session's operator, when one runs, leaves it to this page's own.
            namespace = f"e2e-solo-docs-{_slug(page)}-{secrets.token_hex(2)}"
            admin.run("create", "namespace", namespace)
            stack.callback(admin.run, "delete", "namespace", namespace, "--wait=false", check=False)
            kubeconfig = tmp_path / "kubeconfig"
            shutil.copyfile(cluster.kubeconfig, kubeconfig)
            Kubectl(admin.binary, kubeconfig).run(
                "config", "set-context", "--current", "--namespace", namespace
            )
            token_file = tmp_path / "platform-token"
            token_file.write_text(TOKEN)
            log = tmp_path / "operator.log"
            stack.enter_context(
                solo_operator(
                    cluster.kubeconfig, platform.url, log, namespace,
                    extra=("--platform-token-file", str(token_file)),
                    env={**QUICK_REFRESH, **(operator_env or {})},
                )
            )  # fmt: skip
            scene.env["KUBECONFIG"] = str(kubeconfig)
            scene.notes.append(f"operator log: {log}")
            return scene

        yield opened
