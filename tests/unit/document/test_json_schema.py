"""The bundle document's JSON Schema: generated from the models, checked in, and true to the examples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from bundle_operator.document import parse_bundle_text
from bundle_operator.document.json_schema import bundle_schema, schema_text
from bundle_operator.document.models import SCHEMA_VERSIONS

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO / "schemas"


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
