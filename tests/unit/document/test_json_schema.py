"""The JSON Schemas in schemas/: the bundle document's and the CRDs' (kubeconform's layout), generated
from the models, checked in, named by every example's modeline, and true to the examples."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft4Validator, Draft202012Validator

from bundle_operator.document import parse_bundle_text
from bundle_operator.document.json_schema import bundle_schema, schema_text
from bundle_operator.document.models import SCHEMA_VERSIONS
from bundle_operator.k8s import kubeconform_schemas

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO / "schemas"
KUBECONFORM = SCHEMAS / "kubeconform"
# The examples an editor opens: bundle documents, and the registry example's Bundle resource.
MODELINE_EXAMPLES = sorted([*REPO.glob("examples/*.yaml"), *REPO.glob("examples/registry/*.yaml")])
MODELINE = re.compile(r"# yaml-language-server: \$schema=(\S+)\n")


def _validator(version: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"bundle-{version}.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Every bundle document in examples/: the files, and the documents Bundles carry inline."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(REPO.glob("examples/**/*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if isinstance(obj, dict) and "schema_version" in obj:
                found.append((str(path.relative_to(REPO)), obj))
            elif isinstance(obj, dict) and obj.get("kind") == "Bundle":
                inline = ((obj.get("spec") or {}).get("source") or {}).get("inline")
                if inline is not None:
                    found.append((f"{path.relative_to(REPO)} (inline)", inline))
    return found


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_the_checked_in_schemas_are_freshly_generated(version: str) -> None:
    on_disk = (SCHEMAS / f"bundle-{version}.json").read_text()
    assert on_disk == schema_text(version), (
        f"run `bundlectl schema {version} > schemas/bundle-{version}.json`"
    )


def test_every_example_document_validates_against_its_versions_schema() -> None:
    examples = _examples()
    assert len(examples) >= 5  # a reader that found nothing would pass
    for where, document in examples:
        errors = [e.message for e in _validator(document["schema_version"]).iter_errors(document)]
        assert not errors, f"{where}: {errors}"
        assert not parse_bundle_text(yaml.safe_dump(document)).blocking, where


def test_the_schema_refuses_what_the_format_refuses() -> None:
    base: dict[str, Any] = {"schema_version": "0.1.0", "name": "demo"}
    old, new = _validator("0.1.0"), _validator("0.2.0")
    assert old.is_valid(base) and not new.is_valid(base)  # each version names itself
    assert not old.is_valid({**base, "mcpz": []})  # an unknown field, as the models refuse it
    knowledge = {"knowledge_sets": [{"key": "k", "name": "K", "sources": {}}]}
    assert not old.is_valid({**base, **knowledge})  # 0.2.0's additions are not 0.1.0's
    assert new.is_valid({**base, "schema_version": "0.2.0", **knowledge})
    agent = {"key": "a", "name": "A", "instructions": "i", "model": "m", "knowledge_sets": ["k"]}
    assert not old.is_valid({**base, "agents": [agent]})
    mcp = {"key": "m", "name": "M", "type": "command", "command": "node", "runtime": "node"}
    assert old.is_valid({**base, "mcps": [mcp]})
    assert not old.is_valid({**base, "mcps": [{**mcp, "runtime": "ruby"}]})


def test_bundlectl_prints_the_schema_the_repo_keeps() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bundle_operator.cli", "schema", "0.1.0"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == (SCHEMAS / "bundle-0.1.0.json").read_text()
    assert json.loads(done.stdout)["$id"] == bundle_schema("0.1.0")["$id"]


def _schema_of(obj: dict[str, Any]) -> Path:
    """The schema file an example should name: its document version's, or its kind's."""
    if "schema_version" in obj:
        return SCHEMAS / f"bundle-{obj['schema_version']}.json"
    group, version = obj["apiVersion"].split("/")
    return KUBECONFORM / group / f"{obj['kind'].lower()}_{version}.json"


@pytest.mark.parametrize("path", MODELINE_EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_starts_with_the_modeline_of_its_schema(path: Path) -> None:
    text = path.read_text()
    obj = yaml.safe_load(text)
    expected = Path(os.path.relpath(_schema_of(obj), path.parent)).as_posix()
    match = MODELINE.match(text)
    assert match is not None, f"{path.name} must start with `# yaml-language-server: $schema={expected}`"
    assert match.group(1) == expected
    # The path resolves from the example's folder, as the editor resolves it, to a schema it meets.
    schema = json.loads((path.parent / match.group(1)).read_text())
    validator = Draft202012Validator(schema) if "schema_version" in obj else Draft4Validator(schema)
    assert not [e.message for e in validator.iter_errors(obj)]


def test_the_kubeconform_schemas_are_freshly_rendered() -> None:
    rendered = kubeconform_schemas.render()
    on_disk = {p.relative_to(KUBECONFORM).as_posix(): p.read_text() for p in KUBECONFORM.rglob("*.json")}
    assert (
        sorted(on_disk)
        == sorted(rendered)
        == [
            "bundle-operator.dev/bundle_v1alpha1.json",
            "bundle-operator.dev/bundleinstallation_v1alpha1.json",
            "bundle-operator.dev/endpoint_v1alpha1.json",
        ]
    )
    stale = [name for name, text in rendered.items() if on_disk[name] != text]
    assert not stale, f"{stale} are stale: run `make kubeconform-schemas`"


def _kind_validator(name: str) -> Draft4Validator:
    schema = json.loads((KUBECONFORM / "bundle-operator.dev" / name).read_text())
    Draft4Validator.check_schema(schema)  # kubeconform reads a schema without $schema as draft 4
    return Draft4Validator(schema)


def test_the_kubeconform_schemas_refuse_what_the_apiserver_refuses() -> None:
    installation = yaml.safe_load((REPO / "examples/k8s/github-triage-installation.yaml").read_text())
    validator = _kind_validator("bundleinstallation_v1alpha1.json")
    assert validator.is_valid(installation)
    spec = installation["spec"]
    typo = {**installation, "spec": {**spec, "activte": True}}
    assert [e.message for e in validator.iter_errors(typo)] == [
        "Additional properties are not allowed ('activte' was unexpected)"
    ]
    assert not validator.is_valid({**installation, "spec": {**spec, "deletionPolicy": "Keep"}})
    assert not validator.is_valid({**installation, "kind": "Bundle"})  # another kind's schema
    drift = {**spec["driftPolicy"], "interval": "5 minutes"}
    assert not validator.is_valid({**installation, "spec": {**spec, "driftPolicy": drift}})
    assert validator.is_valid({**installation, "metadata": {"name": "a", "labels": {"team": "x"}}})


def test_free_form_fields_of_the_crds_stay_free_in_their_schemas() -> None:
    bundle = yaml.safe_load((REPO / "examples/k8s/github-triage-bundle.yaml").read_text())
    validator = _kind_validator("bundle_v1alpha1.json")
    assert validator.is_valid(bundle)
    inline = bundle["spec"]["source"]["inline"]
    # An app's document is x-kubernetes-preserve-unknown-fields: any object passes, as in the apiserver.
    app = {"key": "tracker", "name": "Tracker", "document": {"anything": {"nested": [1, None]}}}
    assert validator.is_valid({**bundle, "spec": {"source": {"inline": {**inline, "apps": [app]}}}})
    # The document's own fields are strict, inline as in a file.
    assert not validator.is_valid({**bundle, "spec": {"source": {"inline": {**inline, "mcpz": []}}}})


def test_kubernetes_extensions_become_what_they_mean_in_json_schema() -> None:
    node = {
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": True},
            "note": {"type": "string", "nullable": True},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "extra": {
                "type": "object",
                "properties": {"known": {"type": "string"}},
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
        "x-kubernetes-validations": [{"rule": "self.port != 0", "message": "CEL is the apiserver's"}],
    }
    crd = {"spec": {"group": "example.dev", "names": {"kind": "Demo"}}}
    schema = kubeconform_schemas.kind_schema(crd, {"name": "v1", "schema": {"openAPIV3Schema": node}})
    assert "x-kubernetes" not in json.dumps(schema)
    validator = Draft4Validator(schema)
    base = {"apiVersion": "example.dev/v1", "kind": "Demo"}
    for good in ({"port": 8080}, {"port": "http"}, {"note": None}, {"extra": {"known": "a", "more": 1}}):
        assert validator.is_valid({**base, **good}), good
    for bad in ({"port": 1.5}, {"tags": ["a", "a"]}, {"extra": {"known": 1}}, {"other": 1}):
        assert not validator.is_valid({**base, **bad}), bad
    assert not validator.is_valid({**base, "apiVersion": "example.dev/v2"})
