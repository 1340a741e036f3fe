"""The platform API page, from the OpenAPI document the code builds (platform/openapi_build.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bundle_operator.docgen._cells import one_line
from bundle_operator.docgen._schema_tables import (
    Schema,
    anchor,
    code,
    code_spans,
    escape,
    field_type,
    render_fields,
    schema_rules,
)
from bundle_operator.platform.openapi_build import build

# pydantic names a generic page model Page_<Item>_; all share one shape, described once.
_PAGE = re.compile(r"^Page_(?P<item>.+)_$")


def schema_anchor(name: str) -> str:
    """``AgentCreate`` -> ``schema-agentcreate``."""
    return anchor(f"schema-{name}")


def operation_anchor(operation_id: str) -> str:
    """``create_agents`` -> ``op-create_agents``."""
    return anchor(f"op-{operation_id}")


def _link(path: str, ref: str | None) -> str | None:
    if ref is None:
        return None
    page = _PAGE.match(ref)
    if page:
        item = page["item"]
        return f"[page](#schema-pages) of [{item}](#{schema_anchor(item)})"
    return f"[{ref}](#{schema_anchor(ref)})"


def _markdown(text: str) -> str:
    """The document's Markdown fit for Python-Markdown: a blank line before each list, < and > as text."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("- ") and lines and lines[-1] and not lines[-1].startswith(("- ", "  ")):
            lines.append("")
        lines.append(line)
    joined = "\n".join(lines)
    out: list[str] = []
    last = 0
    for start, end in code_spans(joined):
        out.append(joined[last:start].replace("<", "&lt;").replace(">", "&gt;"))
        out.append(joined[start:end])
        last = end
    out.append(joined[last:].replace("<", "&lt;").replace(">", "&gt;"))
    return "".join(out).strip() + "\n"


def _cell(text: str) -> str:
    return escape(one_line(text))


def _parameters(operation: Mapping[str, Any], defs: Mapping[str, Schema]) -> str:
    params = operation.get("parameters") or []
    if not params:
        return ""
    lines = ["**Parameters**\n", "| Name | In | Type | Description |", "|---|---|---|---|"]
    for param in params:
        kind = field_type(param["schema"], defs, linker=_link) + (" (required)" if param["required"] else "")
        notes = ([_cell(param["description"])] if param.get("description") else []) + schema_rules(
            param["schema"], defs
        )
        lines.append(f"| {code(param['name'])} | {param['in']} | {kind} | {'<br>'.join(notes)} |")
    return "\n".join(lines) + "\n"


def _body(content: Mapping[str, Any], defs: Mapping[str, Schema]) -> str:
    """What a request or response carries: its media type and schema, linked."""
    parts = []
    for media, entry in content.items():
        schema = entry.get("schema", {})
        if schema.get("format") == "binary":
            parts.append(f"{code(media)}: the raw bytes")
        else:
            parts.append(f"{code(media)}: {field_type(schema, defs, linker=_link)}")
    return "; ".join(parts)


def _responses(operation: Mapping[str, Any], defs: Mapping[str, Schema]) -> str:
    lines = ["**Responses**\n", "| Status | Meaning | Body |", "|---|---|---|"]
    for status, response in operation["responses"].items():
        body = _body(response.get("content", {}), defs) or "none"
        headers = ", ".join(code(name) for name in response.get("headers", {}))
        if headers:
            body += f"; header {headers}"
        lines.append(f"| {code(status)} | {_cell(response['description'])} | {body} |")
    return "\n".join(lines) + "\n"


def _operation(method: str, path: str, operation: Mapping[str, Any], defs: Mapping[str, Schema]) -> str:
    parts = [
        f"### {code(f'{method.upper()} {path}')} {{#{operation_anchor(operation['operationId'])}}}\n",
        f"{_cell(operation['summary'])}. Operation id {code(operation['operationId'])}"
        + ("; no token needed." if operation.get("security") == [] else ".")
        + "\n",
        _parameters(operation, defs),
    ]
    body = operation.get("requestBody")
    if body:
        parts.append(f"**Request body**: {_body(body['content'], defs)}.\n")
    parts.append(_responses(operation, defs))
    return "\n".join(part for part in parts if part)


def _routes(document: Mapping[str, Any], defs: Mapping[str, Schema]) -> str:
    by_tag: dict[str, list[str]] = {}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            by_tag.setdefault(operation["tags"][0], []).append(_operation(method, path, operation, defs))
    sections = []
    for tag, operations in by_tag.items():
        sections.append(f"## {tag} {{#{anchor(tag)}}}\n\n" + "\n".join(operations))
    return "\n".join(sections)


def _pages_section(defs: Mapping[str, Schema]) -> str:
    lines = [
        "### Pages {#schema-pages}\n",
        "A list route answers one page, an object of two fields, both always present: `items`, an "
        "array of this page's entities, and `next_cursor`, a string to send as `cursor` for the next "
        "page, or null on the last page. The page models by their items:\n",
        "| Schema | Items |",
        "|---|---|",
    ]
    for name, schema in defs.items():
        page = _PAGE.match(name)
        if page is None:
            continue
        item_ref = schema["properties"]["items"]["items"]["$ref"].rsplit("/", 1)[-1]
        lines.append(f"| {code(name)}{{#{schema_anchor(name)}}} | {_link('', item_ref)} |")
    return "\n".join(lines) + "\n"


def _schemas(defs: Mapping[str, Schema]) -> str:
    sections = [
        "## Schemas {#schemas}\n\n"
        "The bodies the routes take and answer, from the same pydantic models the operator sends "
        "and the reference platform validates with.\n"
    ]
    for name, schema in defs.items():
        if _PAGE.match(name):
            continue
        sections.append(
            render_fields(
                schema, defs, path=name, title=code(name), level=3, linker=_link, anchor_prefix="schema-"
            )
        )
    sections.append(_pages_section(defs))
    return "\n".join(sections)


def platform_api_page() -> str:
    """reference/platform-api.md."""
    document = build()
    info = document["info"]
    defs: Mapping[str, Schema] = document["components"]["schemas"]
    header = (
        "# Platform API\n\n"
        "<!-- Generated by `make docs-reference` from the OpenAPI document that"
        " operator/bundle_operator/platform/openapi_build.py builds; do not edit. -->\n\n"
        f"The HTTP API the operator and `bundlectl` install into: {info['title']} "
        f"{code(info['version'])} (OpenAPI {document['openapi']}). The reference platform "
        "(`bundlectl platform serve`) serves it; the committed OpenAPI document is "
        "`operator/bundle_operator/platform/openapi.yaml`. Every route is listed under its "
        "collection, with its parameters, request body and responses, and the schemas follow. "
        "With a token configured, each request sends `Authorization: Bearer <token>`.\n\n"
        "## Conventions {#conventions}\n\n"
    )
    return header + _markdown(info["description"]) + "\n" + _routes(document, defs) + "\n" + _schemas(defs)


def pages() -> dict[str, str]:
    """reference/platform-api.md."""
    return {"reference/platform-api.md": platform_api_page()}
