"""The chart ships the repository's CRDs byte for byte, and its values schema knows every spec field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
CHART = ROOT / "charts" / "bundle-operator"


def test_the_chart_crds_are_the_repository_crds_byte_for_byte() -> None:
    ours = sorted(path.name for path in CRDS.glob("*.yaml"))
    chart = sorted(path.name for path in (CHART / "crds").iterdir())
    assert ours, "crds/ is empty"
    assert chart == ours, "charts/bundle-operator/crds/ holds other files than crds/: run make crds"
    for name in ours:
        assert (CHART / "crds" / name).read_bytes() == (CRDS / name).read_bytes(), (
            f"charts/bundle-operator/crds/{name} differs from crds/{name}: run make crds"
        )


def crd_spec(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / f"{plural}.bundle-operator.dev.yaml").read_text())
    spec: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("values_key", "plural"),
    [("bundles", "bundles"), ("installations", "bundleinstallations"), ("endpoints", "endpoints")],
)
def test_the_values_schema_allows_exactly_the_crd_spec_fields(values_key: str, plural: str) -> None:
    # The schema refuses unknown spec fields (the API server would silently prune a misspelled one),
    # so it must follow every field the CRD gains.
    schema = json.loads((CHART / "values.schema.json").read_text())
    spec = schema["properties"][values_key]["items"]["properties"]["spec"]
    crd = crd_spec(plural)
    assert set(spec["properties"]) == set(crd["properties"])
    assert spec["additionalProperties"] is False
    # Only installations are less strict than the CRD: their workspace defaults from the values.
    required = set(crd.get("required", [])) - ({"workspace"} if plural == "bundleinstallations" else set())
    assert set(spec.get("required", [])) == required
    if plural == "bundles":
        sources = spec["properties"]["source"]["properties"]
        assert set(sources) == set(crd["properties"]["source"]["properties"])
