"""docs/how-to/registry-and-mcpb.md run as written: the docs runner's cluster scene, plus what the
page's blocks need besides it: a .mcpb archive (the python echo test server, as echo.mcpb) and an
MCP Registry that publishes it (the stub registry, its CA as registry-ca.pem, its URL in
REGISTRY_URL), whose CA the scene's operator trusts as a private registry's (SSL_CERT_FILE)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import page_of
from tests.docs.runner import run_blocks
from tests.docs.scenes import ROOT, OpenScene
from tests.fixtures.mcpb_servers.build import McpbServers
from tests.registry_stub import StubRegistry, stub_registry

pytestmark = pytest.mark.e2e

PAGE = "how-to/registry-and-mcpb.md"  # docs/how-to/registry-and-mcpb.md
SCENE = "tested-by tests/docs/test_registry_and_mcpb_page.py"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[StubRegistry]:
    """The stub MCP Registry over HTTPS with a throwaway CA, as the e2e tests run it."""
    (tmp_path / "registry").mkdir()
    with stub_registry(tmp_path / "registry") as running:
        yield running


def test_the_registry_and_mcpb_guide_runs_as_written(
    open_scene: OpenScene,
    mcpb_servers: McpbServers,
    registry: StubRegistry,
) -> None:
    page = page_of(PAGE, (ROOT / "docs" / PAGE).read_text())
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
