"""The bundle document's reference pages: every field of the JSON Schema on its page, with a
description and a stable anchor; 0.2.0's additions marked; a valid example; the pages current."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from bundle_operator.docgen.document_pages import pages
from bundle_operator.document import models, parse_bundle_text
from bundle_operator.document.issues import Code
from bundle_operator.document.models import SCHEMA_VERSIONS, field_about

REPO = Path(__file__).resolve().parents[3]
PAGES = pages()


def _schema(version: str) -> dict[str, Any]:
    return json.loads((REPO / "schemas" / f"bundle-{version}.json").read_text(encoding="utf-8"))


def _page(version: str) -> str:
    return PAGES[f"reference/document-{version}.md"]


def _properties(schema: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every property of the schema by its path (``mcps[].artifact.digest``), as each variant declares it."""
    defs = schema["$defs"]
    found: dict[str, list[dict[str, Any]]] = {}

    def visit(node: dict[str, Any], prefix: str) -> None:
        if "$ref" in node:
            visit(defs[node["$ref"].rsplit("/", 1)[-1]], prefix)
        for alternative in node.get("anyOf", []) + node.get("oneOf", []):
            visit(alternative, prefix)
        if isinstance(node.get("items"), dict):
            visit(node["items"], f"{prefix}[]")
        if isinstance(node.get("additionalProperties"), dict):
            visit(node["additionalProperties"], f"{prefix}.*")
        for name, prop in node.get("properties", {}).items():
            path = f"{prefix}.{name}" if prefix else name
            found.setdefault(path, []).append(prop)
            visit(prop, path)

    visit(schema, "")
    return found


def _anchor(path: str) -> str:
    # The form each page documents at its top.
    return path.replace("[]", "").replace(".*", "").replace(".", "-")


def _row(page: str, path: str) -> str:
    start = f'| <a id="{_anchor(path)}"></a>`{path}` |'
    rows = [line for line in page.splitlines() if line.startswith(start)]
    assert len(rows) == 1, f"{path}: {len(rows)} rows on the page"
    return rows[0]


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_property_of_the_schema_has_a_row_with_a_description_on_its_page(version: str) -> None:
    properties = _properties(_schema(version))
    assert len(properties) > 100  # a walk that found nothing would pass
    page = _page(version)
    for path in properties:
        cell = _row(page, path).rstrip(" |").rsplit(" | ", 1)[-1]
        description = re.sub(r"^(\*\*New in [0-9.]+\.\*\*)? ?(Only with [^.]*\.)?", "", cell)
        assert description.strip(), f"{path} has no description on the page"


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_property_in_the_schema_has_a_description(version: str) -> None:
    lacking = [
        path
        for path, declared in _properties(_schema(version)).items()
        for prop in declared
        if not str(prop.get("description", "")).strip()
    ]
    assert not lacking, f"fields without a description: {', '.join(sorted(set(lacking)))}"


def test_every_field_of_the_document_models_carries_a_description() -> None:
    found = [
        value
        for value in vars(models).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == models.__name__
    ]
    assert len(found) > 20
    lacking = [
        f"{model.__name__}.{name}"
        for model in found
        for name, info in model.model_fields.items()
        if not (field_about(info) or "").strip()
    ]
    assert not lacking, f"give these an About(...): {', '.join(lacking)}"


def test_every_issue_code_a_description_names_is_one_analyze_reports() -> None:
    texts = [
        prop.get("description", "")
        for declared in _properties(_schema("0.2.0")).values()
        for prop in declared
    ]
    named = {code for text in texts for code in re.findall(r"\(([a-z]+(?:_[a-z]+)+)[ )]", text)}
    assert len(named) > 10
    assert not named - {code.value for code in Code}, "descriptions name codes analyze never reports"


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_anchor_is_unique_and_the_documented_one_resolves(version: str) -> None:
    page = _page(version)
    anchors = re.findall(r'<a id="([^"]+)"></a>', page)
    assert len(anchors) == len(set(anchors))
    assert "mcps-artifact-digest" in anchors
    assert f"document-{version}.md#mcps-artifact-digest" in page  # the form is told at the top


def test_the_0_2_0_page_marks_what_0_2_0_added_and_the_0_1_0_page_marks_nothing() -> None:
    older, newer = _properties(_schema("0.1.0")), _properties(_schema("0.2.0"))
    added = [path for path in newer if path not in older]
    roots = [
        p for p in added if not any(p != top and p.startswith(top) and p[len(top)] in ".[" for top in added)
    ]
    assert sorted(roots) == ["agents[].knowledge_sets", "apps", "knowledge_sets"]
    page = _page("0.2.0")
    for path in newer:
        assert ("**New in 0.2.0.**" in _row(page, path)) == (path in roots), path
    for section in ("knowledge_sets", "apps"):
        assert f"## `{section}` (new in 0.2.0)" in page
    assert "New in" not in _page("0.1.0")


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_the_example_is_a_valid_document_of_the_pages_version_quoted_from_examples(version: str) -> None:
    page = _page(version)
    named = re.search(r"`examples/([^`]+\.yaml)`, a complete", page)
    assert named is not None
    block = re.search(r"^```yaml\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    assert block is not None
    assert block.group(1) == (REPO / "examples" / named.group(1)).read_text(encoding="utf-8")
    assert yaml.safe_load(block.group(1))["schema_version"] == version
    assert not parse_bundle_text(block.group(1)).blocking


@pytest.mark.parametrize("path", sorted(PAGES))
def test_the_committed_page_is_current(path: str) -> None:
    committed = REPO / "docs" / path
    assert committed.read_text(encoding="utf-8") == PAGES[path], (
        f"docs/{path} is stale: run `make docs-reference`"
    )
