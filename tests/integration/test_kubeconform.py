"""kubeconform, as `make kubeconform` builds it, with schemas/kubeconform/ as its schema location:
examples/k8s/ and the chart's rendered output (each values file of charts/bundle-operator/ci/) pass
`-strict`, and a BundleInstallation with a misspelled field fails naming the field.

No network here, so kubeconform's default location (the Kubernetes schemas it downloads) is out of
reach: core kinds are skipped with -ignore-missing-schemas, and the test checks they are the only
ones skipped."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gitops.tools import helm_binary
from tests.kubeconform_tool import kubeconform_binary

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "bundle-operator"
VALUES_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
LOCATION = (
    str(REPO / "schemas" / "kubeconform") + "/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json"
)
GROUP = "bundle-operator.dev"
OUR_KINDS = {"Bundle", "BundleInstallation", "Endpoint"}


def kubeconform(*args: str) -> subprocess.CompletedProcess[str]:
    """kubeconform -strict with our schema location and core kinds skipped; it must not touch the network."""
    command = [str(kubeconform_binary()), "-strict", "-ignore-missing-schemas", "-schema-location", LOCATION]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60, check=False)


def verdicts(*paths: Path) -> list[dict[str, Any]]:
    """kubeconform's verdict on every resource in `paths` (JSON output, skipped ones included)."""
    done = kubeconform("-output", "json", "-verbose", *map(str, paths))
    resources: list[dict[str, Any]] = json.loads(done.stdout)["resources"]
    return resources


def assert_ours_valid_and_only_core_skipped(resources: list[dict[str, Any]]) -> None:
    for found in resources:
        ours = found["version"].startswith(f"{GROUP}/")
        expected = "statusValid" if ours else "statusSkipped"
        assert found["status"] == expected, found
        assert not ours or found["kind"] in OUR_KINDS, found


def test_the_example_manifests_pass_strict_validation() -> None:
    paths = [REPO / "examples" / "k8s", REPO / "examples" / "registry"]
    done = kubeconform("-summary", *map(str, paths))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == (
        "Summary: 4 resources found in 4 files - Valid: 3, Invalid: 0, Errors: 0, Skipped: 1"
    )
    resources = verdicts(*paths)
    assert_ours_valid_and_only_core_skipped(resources)
    assert sorted(r["kind"] for r in resources) == ["Bundle", "Bundle", "BundleInstallation", "Secret"]


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_the_rendered_chart_passes_strict_validation(values: Path, tmp_path: Path) -> None:
    rendered = subprocess.run(
        [str(helm_binary()), "template", "bo", str(CHART), "-n", "ops", "--include-crds", "-f", str(values)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
    ).stdout
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(rendered)
    done = kubeconform("-summary", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    resources = verdicts(manifest)
    assert len(resources) == sum(1 for doc in yaml.safe_load_all(rendered) if doc)
    assert_ours_valid_and_only_core_skipped(resources)
    if values.name == "bundles-values.yaml":
        # The values that declare Bundles, installations and an Endpoint: all three kinds are checked.
        assert {r["kind"] for r in resources if r["status"] == "statusValid"} == OUR_KINDS


def test_a_misspelled_field_fails_naming_it(tmp_path: Path) -> None:
    installation = yaml.safe_load((REPO / "examples/k8s/github-triage-installation.yaml").read_text())
    installation["spec"]["driftPolicy"]["intervall"] = "1m"
    broken = tmp_path / "installation.yaml"
    broken.write_text(yaml.safe_dump(installation))
    done = kubeconform("-summary", str(broken))
    assert done.returncode == 1
    assert f"{broken} - BundleInstallation github-triage is invalid" in done.stdout
    assert "at '/spec/driftPolicy': additional properties 'intervall' not allowed" in done.stdout
    assert "Summary: 1 resource found in 1 file - Valid: 0, Invalid: 1, Errors: 0, Skipped: 0" in done.stdout


def test_a_value_the_crd_refuses_fails_too(tmp_path: Path) -> None:
    installation = yaml.safe_load((REPO / "examples/k8s/github-triage-installation.yaml").read_text())
    installation["spec"]["deletionPolicy"] = "Keep"
    broken = tmp_path / "installation.yaml"
    broken.write_text(yaml.safe_dump(installation))
    [found] = verdicts(broken)
    assert found["status"] == "statusInvalid"
    assert [e["path"] for e in found["validationErrors"]] == ["/spec/deletionPolicy"]
