"""docs/how-to/upgrade.md run as written: the docs runner's cluster scene, plus what an upgrade
starts from: a Helm release of the chart in the scene's namespace (revision 1) and a Ready
installation (examples/k8s/). The control plane has no kubelet, so the release's Deployment never
runs a pod: the scene's own operator stands in for it, and the page waits for no rollout."""

from __future__ import annotations

import subprocess

import pytest

from tests.docs.blocks import page_of
from tests.docs.runner import run_blocks
from tests.docs.scenes import ROOT, OpenScene, Scene

pytestmark = pytest.mark.e2e

PAGE = "how-to/upgrade.md"  # docs/how-to/upgrade.md
SCENE = "tested-by tests/docs/test_upgrade_page.py"


def run(scene: Scene, *argv: str) -> str:
    """A command in the scene's folder and environment; its output."""
    done = subprocess.run(argv, cwd=scene.cwd, env=scene.env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
    return done.stdout


def test_the_upgrade_guide_runs_as_written(open_scene: OpenScene) -> None:
    page = page_of(PAGE, (ROOT / "docs" / PAGE).read_text())
    blocks = page.runnable(SCENE)
    assert len(blocks) == 5, f"{PAGE} hands this test {len(blocks)} blocks"
    scene = open_scene("cluster", PAGE)
    namespace = run(scene, "kubectl", "config", "view", "--minify", "-o", "jsonpath={..namespace}")
    # Only namespaced objects: no cluster-wide webhook or admission policy left to a pod that never runs.
    run(
        scene, "helm", "install", "bundle-operator", "charts/bundle-operator",
        "--set", f"watchNamespaces={{{namespace}}}", "--set", "webhook.enabled=false",
        "--set", "finalizerPolicy.enabled=false", "--set", f"platform.url={scene.env['BUNDLE_PLATFORM_URL']}",
    )  # fmt: skip
    try:
        run(scene, "kubectl", "apply", "-f", "examples/k8s/")
        run(scene, "kubectl", "wait", "--for=condition=Ready", "bi/github-triage", "--timeout=2m")
        failure = run_blocks(blocks, scene)
    finally:
        run(scene, "helm", "uninstall", "bundle-operator")
    assert failure is None, failure
