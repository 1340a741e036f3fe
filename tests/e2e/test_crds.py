"""The operator's CRDs on a real apiserver: what they accept, what they refuse and with which message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.devcluster import Kubectl, wait_until
from tests.documents import bundle_document

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
MANIFESTS = Path(__file__).resolve().parent / "manifests"
GROUP = "bundle-operator.dev"


@pytest.fixture(scope="module")
def crds(kubectl: Kubectl) -> None:
    """crds/ applied and established (applying again, as other modules do, changes nothing)."""
    kubectl.apply(CRDS, server_side=True)
    for plural in ("bundles", "bundleinstallations", "endpoints"):
        kubectl.wait_for_condition("crd", f"{plural}.{GROUP}", "Established", timeout=30)


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((MANIFESTS / name).read_text())
    return loaded


def refused(kubectl: Kubectl, source: Path | dict[str, Any], namespace: str) -> str:
    """Apply something the apiserver must refuse; what kubectl printed."""
    result = kubectl.apply(source, namespace=namespace, check=False)
    assert result.returncode != 0, result.stdout
    return result.stderr


def flat(text: str) -> str:
    """Text with its line wrapping undone, as a reader takes it in."""
    return " ".join(text.split())


def test_valid_bundle_keeps_the_document_as_written(kubectl: Kubectl, crds: None, namespace: str) -> None:
    example = yaml.safe_load((ROOT / "examples" / "github-triage.yaml").read_text())
    assert manifest("crd-bundle-valid.yaml")["spec"]["source"]["inline"] == example

    kubectl.apply(MANIFESTS / "crd-bundle-valid.yaml", namespace=namespace)

    stored = kubectl.get("bundle", "github-triage", namespace)
    # Nothing pruned and nothing defaulted: the operator reads the document the user wrote.
    assert stored["spec"]["source"]["inline"] == example


def test_valid_installation_is_accepted(kubectl: Kubectl, crds: None, namespace: str) -> None:
    kubectl.apply(MANIFESTS / "crd-installation-valid.yaml", namespace=namespace)

    stored = kubectl.get("bundleinstallation", "github-triage", namespace)
    assert stored["spec"] == manifest("crd-installation-valid.yaml")["spec"]


def test_two_sources_are_refused(kubectl: Kubectl, crds: None, namespace: str) -> None:
    stderr = refused(kubectl, MANIFESTS / "crd-bundle-two-sources.yaml", namespace)

    assert "exactly one source: inline, configMapRef, url, mcpb or registry" in stderr
    assert kubectl.get_or_none("bundle", "two-sources", namespace) is None


def test_mcpb_url_without_sha256_is_refused(kubectl: Kubectl, crds: None, namespace: str) -> None:
    bundle = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Bundle",
        "metadata": {"name": "unpinned"},
        "spec": {"source": {"mcpb": {"url": "https://bundles.example/triage.mcpb"}}},
    }
    assert "mcpb.url requires sha256" in refused(kubectl, bundle, namespace)


def test_setup_item_with_value_and_secret_is_refused(kubectl: Kubectl, crds: None, namespace: str) -> None:
    stderr = refused(kubectl, MANIFESTS / "crd-installation-setup-both.yaml", namespace)

    assert "exactly one of value or secretKeyRef" in stderr


def test_workspace_cannot_change(kubectl: Kubectl, crds: None, namespace: str) -> None:
    kubectl.apply(MANIFESTS / "crd-installation-valid.yaml", namespace=namespace)

    stderr = refused(kubectl, MANIFESTS / "crd-installation-other-workspace.yaml", namespace)

    assert "workspace cannot change; create a new BundleInstallation" in stderr
    assert kubectl.get("bi", "github-triage", namespace)["spec"]["workspace"] == "acme"


def test_unknown_field_in_the_inline_document_is_refused(
    kubectl: Kubectl, crds: None, namespace: str
) -> None:
    bundle = manifest("crd-bundle-valid.yaml")
    bundle["spec"]["source"]["inline"]["mcps"][0]["comand"] = "npx"

    stderr = refused(kubectl, bundle, namespace)

    assert 'unknown field "spec.source.inline.mcps[0].comand"' in stderr


def test_explain_shows_descriptions(kubectl: Kubectl, crds: None) -> None:
    def explain(field: str) -> str | None:
        # The OpenAPI document of a new CRD is published a moment after it is established.
        result = kubectl.run("explain", field, check=False)
        return flat(result.stdout) if result.returncode == 0 else None

    drift = wait_until(lambda: explain("bundleinstallation.spec.driftPolicy"), 30, "explain driftPolicy")
    assert "How often the platform is compared with what was installed" in drift
    assert "How often to check, e.g. 30s, 5m, 1h. Default: 5m." in drift
    assert "Warn reports drift; Correct writes back what drifted" in drift

    mcps = wait_until(lambda: explain("bundle.spec.source.inline.mcps"), 30, "explain inline.mcps")
    assert "MCP servers: command (a runtime such as npx), docker (an image) or url" in mcps
    assert "endpoint_url" in mcps
    assert "The remote MCP server's URL. Only with type url." in mcps


def test_short_names_and_the_category_list_both_kinds(kubectl: Kubectl, crds: None, namespace: str) -> None:
    kubectl.apply(MANIFESTS / "crd-bundle-valid.yaml", namespace=namespace)
    kubectl.apply(MANIFESTS / "crd-installation-valid.yaml", namespace=namespace)
    both = [f"bundle.{GROUP}/github-triage", f"bundleinstallation.{GROUP}/github-triage"]

    short = kubectl.run("get", "bdl,bi", "-n", namespace, "-o", "name").stdout.split()
    assert short == both
    # `bundles` is the category before it is the plural: it lists installations too.
    category = kubectl.run("get", "bundles", "-n", namespace, "-o", "name").stdout.split()
    assert sorted(category) == both


def test_printer_columns_show_readiness_and_version(kubectl: Kubectl, crds: None, namespace: str) -> None:
    kubectl.apply(MANIFESTS / "crd-bundle-valid.yaml", namespace=namespace)
    digest = "sha256:" + "ab" * 32
    status = {
        "observedGeneration": 1,
        "digest": digest,
        "bundleName": "github-triage",
        "version": "1.4.0",
        "entities": {"mcps": 1, "skills": 2, "agents": 1, "channels": 1, "automations": 1, "policies": 2},
        "setupFields": [{"key": "org", "label": "GitHub organization", "type": "string", "required": True}],
        "issues": [{"severity": "Warning", "code": "unused_setup", "path": "/setup/1", "message": "unused"}],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Analyzed",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    kubectl.run(
        "patch", "bundle", "github-triage", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    assert kubectl.get("bdl", "github-triage", namespace)["status"] == status

    header, row = (line.split() for line in kubectl.run("get", "bdl", "-n", namespace).stdout.splitlines())
    assert header == ["NAME", "READY", "REASON", "VERSION", "AGE"]
    assert row[:4] == ["github-triage", "True", "Analyzed", "1.4.0"]
    header, row = (
        line.split() for line in kubectl.run("get", "bdl", "-n", namespace, "-o", "wide").stdout.splitlines()
    )
    assert header[-2:] == ["BUNDLE", "DIGEST"]
    assert row[-2:] == ["github-triage", digest]


def test_a_one_megabyte_inline_bundle_is_accepted(kubectl: Kubectl, crds: None, namespace: str) -> None:
    content = "---\nname: big\ndescription: A large skill.\n---\n" + "Lorem ipsum dolor sit amet.\n" * 37_500
    assert len(content) > 1_000_000
    bundle = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Bundle",
        "metadata": {"name": "big"},
        "spec": {
            "source": {
                "inline": bundle_document(
                    "big", version=None, skills=[{"key": "big", "source_type": "inline", "content": content}]
                )
            }
        },
    }
    # Server-side: client-side apply copies the object into an annotation, capped at 256 KiB.
    kubectl.apply(bundle, namespace=namespace, server_side=True)

    stored = kubectl.get("bundle", "big", namespace)
    assert stored["spec"]["source"]["inline"]["skills"][0]["content"] == content
