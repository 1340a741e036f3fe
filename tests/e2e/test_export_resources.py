"""`bundlectl export --as-resource`: a workspace as a Bundle and a BundleInstallation that the real
kube-apiserver accepts (server-side dry run against the CRDs), with secrets only as secretKeyRefs."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from bundle_operator.devcluster import Kubectl
from tests.integration.platform.platform_harness import PlatformProcess

ROOT = Path(__file__).resolve().parents[2]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
TRIAGE = str(ROOT / "examples" / "github-triage.yaml")
TRIAGE_SETUP = ROOT / "examples" / "setup" / "github-triage.yaml"


def bundlectl(platform: PlatformProcess, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BUNDLE_PLATFORM_URL": platform.url}
    env.pop("BUNDLE_PLATFORM_TOKEN", None)
    return subprocess.run([BUNDLECTL, *args], capture_output=True, text=True, cwd=cwd, env=env, check=False)


def test_exported_resources_pass_a_server_side_dry_run(
    kubectl: Kubectl, crds: None, namespace: str, platform: PlatformProcess, tmp_path: Path
) -> None:
    workspace = f"gitops-{uuid.uuid4().hex[:10]}"
    done = bundlectl(
        platform,
        tmp_path,
        "install",
        TRIAGE,
        "--setup-file",
        str(TRIAGE_SETUP),
        "--substitute",
        "model:gpt-4.1=gpt-5",
        "--workspace",
        workspace,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    out = tmp_path / "gitops.yaml"
    done = bundlectl(
        platform,
        tmp_path,
        "export",
        "--workspace",
        workspace,
        "--name",
        "triage-export",
        "--as-resource",
        "--namespace",
        namespace,
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    bundle, installation = list(yaml.safe_load_all(text))

    assert bundle["kind"] == "Bundle" and installation["kind"] == "BundleInstallation"
    assert bundle["metadata"] == {"name": "triage-export", "namespace": namespace}
    document = bundle["spec"]["source"]["inline"]
    assert document["name"] == "triage-export"
    assert {"kind": "model", "ref": "gpt-5", "policy": "substitute"} in document["requires"]
    spec = installation["spec"]
    assert spec["bundleRef"] == {"name": "triage-export"} and spec["workspace"] == workspace
    assert spec["substitutions"] == {"model:gpt-5": "gpt-5"}
    # Every secret field of the document comes from the derived Secret, by key; no value anywhere.
    secret_fields = [f["key"] for f in document["setup"] if f["type"] == "secret"]
    assert secret_fields and [s["key"] for s in spec["setup"]] == secret_fields
    assert all(
        s == {"key": s["key"], "secretKeyRef": {"name": "triage-export-setup", "key": s["key"]}}
        for s in spec["setup"]
    )
    for value in yaml.safe_load(TRIAGE_SETUP.read_text()).values():
        if isinstance(value, str) and len(value) >= 8:
            assert value not in text, "a setup value leaked into the manifests"
    assert "kubectl create secret generic triage-export-setup" in text

    applied = kubectl.run("apply", "--server-side", "--dry-run=server", "-f", str(out))
    assert "bundle.bundle-operator.dev/triage-export serverside-applied (server dry run)" in applied.stdout
    assert (
        "bundleinstallation.bundle-operator.dev/triage-export serverside-applied (server dry run)"
        in applied.stdout
    )
    # A dry run writes nothing.
    assert kubectl.get_or_none("bundles.bundle-operator.dev", "triage-export", namespace) is None


def test_an_exported_knowledge_bundle_passes_the_crds_typed_sources(
    kubectl: Kubectl, crds: None, namespace: str, platform: PlatformProcess, tmp_path: Path
) -> None:
    workspace = f"gitops-{uuid.uuid4().hex[:10]}"
    office = ROOT / "examples" / "building-office.yaml"
    setup = ROOT / "examples" / "setup" / "building-office.yaml"
    mapped = "knowledge_source:s3:acme-bylaws=s3:dormagen-bylaws"
    done = bundlectl(
        platform, tmp_path, "install", str(office), "--setup-file", str(setup), "--substitute", mapped,
        "--workspace", workspace,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "gitops.yaml"
    done = bundlectl(
        platform, tmp_path, "export", "--workspace", workspace, "--name", "office-export", "--as-resource",
        "--namespace", namespace, "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    bundle, installation = list(yaml.safe_load_all(text))
    document = bundle["spec"]["source"]["inline"]
    assert document["schema_version"] == "0.2.0"
    assert document["knowledge_sets"][0]["sources"]["s3-1"]["bucket"] == "dormagen-bylaws"
    # The tenant address and the default model the agents run (required since seed 004's export
    # lists every model) map to themselves, so the installation does not stall on a substitution.
    assert installation["spec"]["substitutions"] == {
        "knowledge_source:s3:dormagen-bylaws": "s3:dormagen-bylaws",
        "model:default": "default",
    }
    for value in yaml.safe_load(setup.read_text()).values():
        assert value not in text, "a setup value leaked into the manifests"
    applied = kubectl.run("apply", "--server-side", "--dry-run=server", "-f", str(out))
    assert "bundle.bundle-operator.dev/office-export serverside-applied (server dry run)" in applied.stdout
