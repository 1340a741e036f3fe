"""The registry example manifest is a valid Bundle spec, as users copy it."""

from __future__ import annotations

from pathlib import Path

import yaml

from bundle_operator.k8s.resources import BundleSpec

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "registry" / "bundle.yaml"


def test_the_registry_example_is_a_bundle_with_a_registry_source() -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    spec = BundleSpec.model_validate(manifest["spec"])
    assert spec.source.registry is not None
    assert (spec.source.registry.version, spec.source.registry.refresh_interval) == ("latest", "1h")
