"""docs/how-to/registry-and-mcpb.md run as written: the docs runner's cluster scene, plus what the
page's blocks need besides it: a .mcpb archive (the python echo test server, as echo.mcpb) and an
MCP Registry that publishes it (the stub registry, its CA as registry-ca.pem, its URL in
REGISTRY_URL), whose CA the scene's operator trusts as a private registry's (SSL_CERT_FILE)."""

from __future__ import annotations

import shutil

import pytest

from tests.docs.blocks import read_pages
from tests.docs.conftest import docs_github, open_scene  # noqa: F401 (fixtures this test uses)
from tests.docs.runner import run_blocks
from tests.docs.scenes import ROOT, OpenScene
from tests.fixtures.mcpb_servers.build import McpbServers
from tests.registry_stub import StubRegistry

pytestmark = pytest.mark.e2e

PAGE = "how-to/registry-and-mcpb.md"  # docs/how-to/registry-and-mcpb.md
SCENE = "tested-by tests/e2e/test_docs_registry_and_mcpb.py"


def test_the_registry_and_mcpb_guide_runs_as_written(
    open_scene: OpenScene,  # noqa: F811
    mcpb_servers: McpbServers,
    registry: StubRegistry,
) -> None:
    (page,) = [page for page in read_pages(ROOT / "docs") if page.name == PAGE]
    blocks = page.runnable(SCENE)
    assert len(blocks) >= 12, f"{PAGE} hands this test {len(blocks)} blocks"
    # The scene's operator trusts the registry's CA alone, as the chart's operator.trustedCA makes it.
    scene = open_scene("cluster", PAGE, operator_env={"SSL_CERT_FILE": str(registry.tls.ca_file)})
    archive = mcpb_servers.python.path
    shutil.copyfile(archive, scene.cwd / "echo.mcpb")
    shutil.copyfile(registry.tls.ca_file, scene.cwd / "registry-ca.pem")
    registry.publish("io.github.example/echo", "1.0.0", archive.read_bytes())
    scene.env["REGISTRY_URL"] = registry.url
    failure = run_blocks(blocks, scene)
    assert failure is None, failure
