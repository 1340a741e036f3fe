"""The reference pages made from schemas (the CRDs, the Helm values, the platform API) miss no field.

Each test walks its schema on its own, not through the renderer, and looks for every field's anchor
on the page: `name`{#anchor} for a field, [`name`](#anchor) plus a heading {#anchor} for one with
fields of its own. Anchors follow reference/index.md: the path lowercased, each run of characters
other than letters, digits and _ one "-".
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import markdown
import pytest
import yaml
from pydantic import BaseModel

from bundle_operator.docgen import api_pages, crd_pages, helm_pages
from bundle_operator.docgen._schema_tables import render_fields
from bundle_operator.k8s import crdgen, resources
from bundle_operator.platform.openapi_build import build

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "bundle-operator"
CRD_PAGES = crd_pages.pages()
HELM_PAGE = helm_pages.pages()["reference/helm-values.md"]
API_PAGE = api_pages.pages()["reference/platform-api.md"]

KINDS = {
    "reference/bundle.md": (crdgen.bundle_crd, resources.BundleSpec),
    "reference/bundleinstallation.md": (crdgen.installation_crd, resources.BundleInstallationSpec),
    "reference/endpoint.md": (crdgen.endpoint_crd, resources.EndpointSpec),
}


def slug(path: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", path.lower()).strip("-")


def walk(schema: Mapping[str, Any], path: str, defs: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(path, name, schema) of every property below `schema`, through items, map values and $refs."""
    if "$ref" in schema:
        schema = {
            **defs[schema["$ref"].rsplit("/", 1)[-1]],
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
    for name, child in (schema.get("properties") or {}).items():
        child_path = f"{path}.{name}" if path else name
        yield child_path, name, child
        yield from walk(child, child_path, defs)
    if isinstance(schema.get("items"), Mapping):
        yield from walk(schema["items"], f"{path}[]", defs)
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from walk(schema["additionalProperties"], f"{path}.*", defs)


def row_of(page: str, name: str, anchor: str) -> str:
    """The table row of the field, found by its name and anchor."""
    for line in page.splitlines():
        if line.startswith(f"| `{name}`{{#{anchor}}} |") or line.startswith(f"| [`{name}`](#{anchor}) |"):
            return line
    raise AssertionError(f"no row for {name} with anchor #{anchor}")


def crd_root(make: Any) -> Mapping[str, Any]:
    root: Mapping[str, Any] = make()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return root


@pytest.mark.parametrize("page", sorted(KINDS))
def test_every_spec_and_status_field_of_the_crd_is_on_its_page(page: str) -> None:
    text = CRD_PAGES[page]
    root = crd_root(KINDS[page][0])
    fields = [field for part in ("spec", "status") for field in walk(root["properties"][part], part, {})]
    assert len(fields) > 10
    for path, name, schema in fields:
        line = row_of(text, name, slug(path))
        if "properties" in schema or "properties" in schema.get("items", {}):
            assert f" {{#{slug(path)}}}\n" in text, f"{path} has no section"
        for value in schema.get("enum", []):
            assert f"`{value}`" in line, f"{path}: enum value {value} missing"
        if "pattern" in schema:
            assert f"`{schema['pattern']}`" in line, f"{path}: pattern missing"
        rules = schema.get("x-kubernetes-validations", []) + schema.get("items", {}).get(
            "x-kubernetes-validations", []
        )
        for rule in rules:
            assert rule["message"].replace("_", "\\_") in text, f"{path}: rule message missing"


@pytest.mark.parametrize("page", sorted(KINDS))
def test_crd_defaults_show_in_the_default_column(page: str) -> None:
    text = CRD_PAGES[page]
    root = crd_root(KINDS[page][0])
    defaults = 0
    for path, name, schema in walk(root["properties"]["spec"], "spec", {}):
        found = re.search(r"Default: (.+)\.$", schema.get("description", ""))
        if found:
            defaults += 1
            cells = row_of(text, name, slug(path)).split(" | ")
            assert cells[2] == f"`{found[1]}`", f"{path}: default {found[1]} not in its column"
            assert "Default:" not in cells[3]
    assert defaults > 0


def test_an_enum_and_a_default_show_as_a_reader_sees_them() -> None:
    line = row_of(CRD_PAGES["reference/bundleinstallation.md"], "mode", "spec-driftpolicy-mode")
    assert "| string | `Warn` |" in line
    assert "One of `Warn`, `Correct`, `Disabled`." in line


@pytest.mark.parametrize("page", sorted(KINDS))
def test_crd_page_names_the_resource_and_its_printer_columns(page: str) -> None:
    text = CRD_PAGES[page]
    crd = KINDS[page][0]()
    names = crd["spec"]["names"]
    assert f"| Short names | `{names['shortNames'][0]}` |" in text
    assert f"| Group/version | `{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}` |" in text
    for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]:
        assert f"`{column['jsonPath']}`" in text


@pytest.mark.parametrize("page", sorted(KINDS))
def test_crd_page_example_is_a_valid_resource(page: str) -> None:
    block = re.search(r"```yaml\n(.*?)```", CRD_PAGES[page], re.DOTALL)
    assert block is not None
    manifest = yaml.safe_load(textwrap.dedent(block[1]))  # a folded example is indented
    model: type[BaseModel] = KINDS[page][1]
    assert manifest["kind"] == crd_root(KINDS[page][0])["properties"]["kind"]["description"].rstrip(".")
    model.model_validate(manifest["spec"])


def test_every_chart_value_is_on_the_helm_page_with_its_default() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    seen = 0
    for path, name, _ in walk(schema, "", schema["definitions"]):
        if re.match(r"^(bundles|installations|endpoints)\[\]\.spec\.", path):
            continue  # the resource's spec: on the CRD pages, linked from the spec row
        seen += 1
        line = row_of(HELM_PAGE, name, slug(path))
        default: Any = values
        for part in path.split("."):
            default = default.get(part) if isinstance(default, dict) else None
        if default is not None and not isinstance(default, dict):
            shown = default if isinstance(default, str) and default else json.dumps(default)
            assert f"| `{shown}` |" in line, f"{path}: default {shown!r} missing"
    assert seen > 80
    assert "[Bundle spec](bundle.md#spec)" in row_of(HELM_PAGE, "spec", "bundles-spec")


def test_every_route_is_on_the_api_page_with_its_parameters_and_statuses() -> None:
    document = build()
    sections = [section for section in re.split(r"\n(?=### )", API_PAGE) if section.startswith("### ")]
    by_anchor = {section.splitlines()[0].rsplit("{#", 1)[1].rstrip("}"): section for section in sections}
    count = 0
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            count += 1
            section = by_anchor[slug(f"op-{operation['operationId']}")]
            assert section.startswith(f"### `{method.upper()} {path}`")
            for param in operation.get("parameters", []):
                assert f"| `{param['name']}` | {param['in']} |" in section
            for status in operation["responses"]:
                assert f"| `{status}` |" in section
            if "requestBody" in operation:
                assert "**Request body**" in section
    assert count > 90


def test_every_schema_and_its_fields_are_on_the_api_page() -> None:
    defs = build()["components"]["schemas"]
    for name, schema in defs.items():
        assert f"{{#{slug(f'schema-{name}')}}}" in API_PAGE, f"{name} missing"
        if name.startswith("Page_"):
            continue  # one shape for all: items and next_cursor, described once
        for path, field, _ in walk(schema, name, defs):
            if "." in path.removeprefix(f"{name}.").replace("[]", "").replace(".*", ""):
                continue  # below a referenced schema: on that schema's own table
            row_of(API_PAGE, field, slug(f"schema-{path}"))


@pytest.mark.parametrize(
    "page",
    [*sorted(CRD_PAGES), "reference/helm-values.md", "reference/platform-api.md"],
)
def test_no_two_things_on_a_page_share_an_anchor(page: str) -> None:
    text = {**CRD_PAGES, "reference/helm-values.md": HELM_PAGE, "reference/platform-api.md": API_PAGE}[page]
    ids = re.findall(r"\{#([^}]+)\}", text)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_a_description_shows_as_written_inside_its_table_cell() -> None:
    schema = {
        "type": "object",
        "properties": {
            "env": {
                "type": "object",
                "description": "Values may use ${setup.<key>}; a|b, *stars* and {braces} stay text.",
                "additionalProperties": {"type": "string", "pattern": "^(a|b)$"},
            }
        },
    }
    html = markdown.markdown(render_fields(schema, path="spec"), extensions=["tables", "attr_list", "toc"])
    cell = re.search(
        r'<td><code id="spec-env">env</code></td>\s*<td>map of string</td>\s*<td>(.*?)</td>', html
    )
    assert cell is not None, html
    assert cell[1] == (
        "Values may use ${setup.&lt;key&gt;}; a|b, *stars* and {braces} stay text."
        "<br>Each value: matches <code>^(a|b)$</code>."
    )


def test_unions_and_bounds_read_as_sentences() -> None:
    schema = {
        "type": "object",
        "required": ["setup"],
        "properties": {
            "setup": {
                "type": "array",
                "maxItems": 200,
                "items": {
                    "type": "object",
                    "oneOf": [{"required": ["value"]}, {"required": ["secretKeyRef"]}],
                    "properties": {"value": {"type": "string"}, "secretKeyRef": {"$ref": "#/$defs/Ref"}},
                },
            },
            "port": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, {"type": "null"}]},
        },
        "$defs": {"Ref": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}}},
    }
    text = render_fields(schema, schema["$defs"], path="spec")
    setup = "At most 200 items.<br>Each item: exactly one of `value`, `secretKeyRef`."
    assert f"| [`setup`](#spec-setup) | array of object (required) | {setup} |" in text
    assert "- Each item: exactly one of `value`, `secretKeyRef`." in text
    assert "| `port`{#spec-port} | integer or null | At least 1 and at most 65535. |" in text
    assert "| `name`{#spec-setup-secretkeyref-name} | string | At least 1 character. |" in text


def test_a_discriminated_union_lists_each_variants_fields_once() -> None:
    defs = {
        "Command": {
            "type": "object",
            "required": ["type", "command"],
            "properties": {"type": {"const": "command"}, "command": {"type": "string"}},
        },
        "Url": {
            "type": "object",
            "required": ["type", "endpoint_url"],
            "properties": {"type": {"const": "url"}, "endpoint_url": {"type": "string"}},
        },
    }
    schema = {
        "type": "object",
        "properties": {
            "mcps": {
                "type": "array",
                "items": {
                    "oneOf": [{"$ref": "#/$defs/Command"}, {"$ref": "#/$defs/Url"}],
                    "discriminator": {"propertyName": "type"},
                },
            }
        },
    }
    text = render_fields(schema, defs, title="Document")
    assert "| `type`{#mcps-type} | string (required) | One of `command`, `url`. |" in text
    assert "| `command`{#mcps-command} | string (required) | Only with `type` `command`. |" in text
    assert "| `endpoint_url`{#mcps-endpoint_url} | string (required) | Only with `type` `url`. |" in text
