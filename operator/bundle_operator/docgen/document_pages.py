"""The bundle document's reference pages (reference/document-<version>.md), rendered from its JSON Schema.

Each field is one table row, its full path shown, with the anchor ``_schema_tables.anchor`` makes of
that path (the other reference pages' rule), so other pages can link to it. Unlike
``_schema_tables``' tables, a field of a union keeps each variant's own description, and names and
syntax in descriptions show as code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_operator.docgen._schema_tables import anchor, code, escape
from bundle_operator.document import parse_bundle_text
from bundle_operator.document.json_schema import bundle_schema
from bundle_operator.document.models import LATEST_SCHEMA_VERSION, SCHEMA_VERSION, SCHEMA_VERSIONS

Schema = dict[str, Any]
# The pages quote a real example at generation time; docgen runs in a checkout.
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def page_path(version: str) -> str:
    """Where the page of ``version`` lives under docs/."""
    return f"reference/document-{version}.md"


@dataclass
class Form:
    """A field as one variant of a union (or the only form) declares it."""

    variant: str | None
    schema: Schema
    required: bool


@dataclass
class Row:
    """One field of the document, at its path, in every form that declares it."""

    path: str
    forms: list[Form] = field(default_factory=list)
    tag: bool = False  # the field that tells a union's variants apart
    only: str | None = None  # "`type` `command`, `docker`" when not every variant has it


class FieldWalker:
    """Walks a bundle JSON Schema into rows, depth first, in the schema's property order."""

    def __init__(self, schema: Schema) -> None:
        self.defs: dict[str, Schema] = schema.get("$defs", {})
        self.rows: list[Row] = []
        self._object(schema, "")

    def resolve(self, node: Schema) -> Schema:
        """The node, with a ``$ref`` followed and an optional (``X | None``) unwrapped."""
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self.resolve(self.defs[ref.rsplit("/", 1)[-1]])
        present = [alt for alt in node.get("anyOf", []) if alt.get("type") != "null"]
        if len(present) == 1:
            return self.resolve(present[0])
        return node

    def is_ref_to(self, node: Schema, name: str) -> bool:
        """Whether ``node`` (or its one non-null alternative) refers to definition ``name``."""
        present = [alt for alt in node.get("anyOf", []) if alt.get("type") != "null"] or [node]
        return len(present) == 1 and present[0].get("$ref") == f"#/$defs/{name}"

    def _object(self, node: Schema, prefix: str) -> None:
        required = set(node.get("required", []))
        for name, prop in node.get("properties", {}).items():
            row = Row(prefix + name, [Form(None, prop, name in required)])
            self.rows.append(row)
            self._children(prop, row.path)

    def _union(self, node: Schema, prefix: str) -> None:
        tag = node["discriminator"]["propertyName"]
        variants = [self.resolve(alt) for alt in node["oneOf"]]
        labels = [str(variant["properties"][tag]["const"]) for variant in variants]
        merged: dict[str, Row] = {}
        for label, variant in zip(labels, variants, strict=True):
            required = set(variant.get("required", []))
            for name, prop in variant["properties"].items():
                row = merged.setdefault(name, Row(prefix + name, tag=name == tag))
                row.forms.append(Form(label, prop, name in required))
        # The tag first: it says which of the fields after it apply.
        for row in sorted(merged.values(), key=lambda row: not row.tag):
            if len(row.forms) < len(variants):
                row.only = f"`{tag}` " + ", ".join(f"`{form.variant}`" for form in row.forms)
            self.rows.append(row)
            for form in row.forms:
                self._children(form.schema, row.path)

    def _children(self, prop: Schema, path: str) -> None:
        node = self.resolve(prop)
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            self._contained(node["items"], f"{path}[].")
        elif node.get("type") == "object" and "properties" in node:
            self._object(node, f"{path}.")
        elif node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
            self._contained(node["additionalProperties"], f"{path}.*.")

    def _contained(self, item: Schema, prefix: str) -> None:
        if "oneOf" in item and "discriminator" in item:
            self._union(item, prefix)
            return
        node = self.resolve(item)
        if node.get("type") == "object" and "properties" in node:
            self._object(node, prefix)

    def type_of(self, prop: Schema) -> str:
        """The field's type in words: ``array of string``, ``map of string to object``."""
        if self.is_ref_to(prop, "JsonValue") or not prop:
            return "JSON value"
        present = [alt for alt in prop.get("anyOf", []) if alt.get("type") != "null"]
        if len(present) > 1:
            return " or ".join(self.type_of(alt) for alt in present)
        node = self.resolve(prop)
        if node is not prop:
            return self.type_of(node)
        if "oneOf" in node:
            return "object"
        kind = node.get("type")
        if kind == "array":
            return f"array of {self.type_of(node.get('items', {}))}"
        if kind == "object" and isinstance(node.get("additionalProperties"), dict):
            return f"map of string to {self.type_of(node['additionalProperties'])}"
        return str(kind) if kind else "JSON value"

    def checks_of(self, prop: Schema) -> list[str]:
        """What the schema itself checks of the value, as Markdown."""
        node = self.resolve(prop)
        found: list[str] = []
        if "const" in node:
            found.append(f"exactly {code(node['const'])}")
        if "enum" in node:
            found.append("one of " + ", ".join(code(value) for value in node["enum"]))
        for key, words in _BOUNDS:
            if key in node:
                found.append(words.format(code(node[key]) if key == "pattern" else node[key]))
        return found


_BOUNDS = (
    ("pattern", "matches {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minimum", "at least {}"),
    ("maximum", "at most {}"),
    ("minItems", "at least {} entries"),
    ("maxItems", "at most {} entries"),
)


# Words that are names or syntax, shown as code: a word holding a placeholder, a <part>, a pattern's
# brackets or a dunder anywhere, or one that is a flag, a snake_case name or a spec path. Anchored or
# bounded so that no pattern backtracks over a long word.
_CODE_MARK = re.compile(r"\$\{|\{\{|<\w+>|\[[^\[\]\s]*\]|__")
_CODE_NAME = re.compile(r"\A(?:--[a-z][\w-]*|[a-z]+(?:_[a-z0-9]+)+|spec\.[\w.]+)\Z")
_TRAILING = ".,;:)"


def _word(word: str) -> str:
    """One whitespace-free word, as code when it is a name or syntax, else escaped."""
    before = "(" if word.startswith("(") else ""
    rest = word[len(before) :]
    core = rest.rstrip(_TRAILING)
    after = rest[len(core) :]
    if core and "`" not in core and (_CODE_MARK.search(core) or _CODE_NAME.search(core)):
        return f"{escape(before)}`{core}`{escape(after)}"
    return escape(word)


def md_text(text: str) -> str:
    """Plain text (with ``code`` spans in docstring style) as Markdown safe inside a table cell."""
    parts = text.replace("\n", " ").split("``")
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f"`{part}`")
        else:
            out.append(
                "".join(_word(piece) if piece.strip() else piece for piece in re.split(r"(\s+)", part))
            )
    return "".join(out)


def _merged(forms: list[Form], cell: Callable[[Form], str]) -> str:
    """One cell for every form: the value when the forms agree, else each variant's value."""
    values = [(form.variant, cell(form)) for form in forms]
    if len({value for _, value in values}) == 1:
        return values[0][1]
    grouped: dict[str, list[str]] = {}
    for variant, value in values:
        grouped.setdefault(value, []).append(str(variant))
    return "<br>".join(
        f"{', '.join(f'`{name}`' for name in names)}: {value}" for value, names in grouped.items()
    )


def _presence(walker: FieldWalker, form: Form) -> str:
    """Required, or optional with the value it has when left out."""
    if form.required:
        return "**required**"
    if "default" in form.schema:
        default = form.schema["default"]
        return "optional" if default is None else f"optional, default {code(default)}"
    # pydantic leaves a default_factory's value out of the schema: an empty list or map.
    empty = {"array": "[]", "object": "{}"}.get(str(walker.resolve(form.schema).get("type")))
    return "optional" if empty is None else f"optional, default `{empty}`"


@dataclass(frozen=True)
class Page:
    """The rows of one version, with what the page needs besides them."""

    version: str
    walker: FieldWalker
    new: frozenset[str]  # paths this version added

    @property
    def rows(self) -> list[Row]:
        """Every field, in page order."""
        return self.walker.rows

    @property
    def added(self) -> list[str]:
        """The new fields that are not inside another new field, in page order."""
        return [row.path for row in self.rows if row.path in self.new and not self._in_new(row.path)]

    def _in_new(self, path: str) -> bool:
        return any(_under(path, top) for top in self.new)


def field_rows(version: str) -> list[Row]:
    """Every field of ``version``'s document, in page order."""
    return FieldWalker(bundle_schema(version)).rows


def _page(version: str) -> Page:
    walker = FieldWalker(bundle_schema(version))
    new: frozenset[str] = frozenset()
    if version != SCHEMA_VERSION:
        older = {row.path for row in field_rows(SCHEMA_VERSION)}
        new = frozenset(row.path for row in walker.rows if row.path not in older)
    anchors = [anchor(row.path) for row in walker.rows]
    if len(set(anchors)) != len(anchors):
        raise ValueError("two fields of the bundle document would share an anchor")
    return Page(version, walker, new)


def _description(page: Page, row: Row) -> str:
    if row.tag:
        text = "<br>".join(md_text(str(form.schema.get("description", ""))) for form in row.forms)
    else:
        text = _merged(row.forms, lambda form: md_text(str(form.schema.get("description", ""))))
    if row.only is not None:
        text = f"Only with {row.only}. {text}"
    if row.path in page.added:
        text = f"**New in {page.version}.** {text}"
    if "." not in row.path and row.path in _sections(page):
        text += f" Its fields: [below](#section-{row.path})."
    return text


def _table(page: Page, rows: list[Row]) -> list[str]:
    walker = page.walker
    lines = ["| Field | Value | Description |", "|---|---|---|"]
    for row in rows:
        path = f'<a id="{anchor(row.path)}"></a>`{row.path}`'
        kind = _merged(row.forms, lambda form: walker.type_of(form.schema))
        presence = _merged(row.forms, lambda form: _presence(walker, form))
        if row.tag:
            checks = "one of " + ", ".join(code(form.variant) for form in row.forms)
        else:
            checks = _merged(row.forms, lambda form: "; ".join(walker.checks_of(form.schema)))
        value = "<br>".join(part for part in (kind, presence, checks) if part)
        lines.append(f"| {path} | {value} | {_description(page, row)} |")
    return lines


def _sections(page: Page) -> dict[str, list[Row]]:
    """Top-level field -> the rows under it, for the fields that have any."""
    found: dict[str, list[Row]] = {}
    for row in page.rows:
        top = re.split(r"[.\[]", row.path, maxsplit=1)[0]
        if top != row.path:
            found.setdefault(top, []).append(row)
    return found


def _section_intro(page: Page, name: str) -> list[str]:
    """What an entry of the section is: its model's description, or one line per variant."""
    top = bundle_schema(page.version)["properties"][name]
    node = page.walker.resolve(top)
    item = node.get("items") or node
    if "oneOf" in item:
        tag = item["discriminator"]["propertyName"]
        lines = [f"Each entry is one of these, told apart by `{tag}`:", ""]
        for alt in item["oneOf"]:
            variant = page.walker.resolve(alt)
            label = variant["properties"][tag]["const"]
            lines.append(f"- `{tag}: {label}`: {md_text(str(variant.get('description', '')))}")
        return [*lines, ""]
    described = page.walker.resolve(item).get("description")
    return [md_text(str(described)), ""] if described else []


def example_file(version: str) -> Path:
    """The shortest example in examples/ written in ``version`` that analyze accepts."""
    candidates = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        parsed = parse_bundle_text(text)
        if parsed.bundle is not None and parsed.bundle.schema_version == version and not parsed.blocking:
            candidates.append((len(text), path.name, path))
    if not candidates:
        raise ValueError(f"examples/ holds no valid document of schema {version}")
    return min(candidates)[2]


def _under(path: str, top: str) -> bool:
    """Whether ``path`` is a field inside the field ``top``."""
    return path != top and path.startswith(top) and path[len(top)] in ".["


def _intro(page: Page) -> list[str]:
    version = page.version
    other = next(v for v in SCHEMA_VERSIONS if v != version)
    lists = next(row.path for row in page.rows if row.path.count("[]") > 1)
    maps = next((row.path for row in page.rows if ".*." in row.path), None)
    deep = maps or lists
    keys = "" if maps is None else f" and `*` for every key of a map (`{maps}`)"
    if version == SCHEMA_VERSION:
        versions = (
            f"Schema {LATEST_SCHEMA_VERSION} adds knowledge sets and apps and reads every {version} "
            f"document unchanged: see [Bundle document {other}](document-{other}.md). A {version} "
            f"document that uses one of its fields is refused (`newer_schema_field`)."
        )
    else:
        listed = ", ".join(f"[`{path}`](#{anchor(path)})" for path in page.added)
        versions = (
            f"Schema {version} adds {listed}, marked **New in {version}** below (with every field inside "
            "them); every other field is "
            f"as in [Bundle document {other}](document-{other}.md), and a {other} document still reads "
            "and means the same."
        )
    return [
        f"# Bundle document {version}",
        "",
        "A bundle document is one YAML or JSON file that says what to install into an agent platform: "
        "MCP servers, skills, agents and what reaches them, and the setup values the person installing "
        "it supplies. Entities refer to each other by `key`; credentials never travel in the document, "
        "only `${setup.<key>}` references to `secret` setup fields. See [Bundles](../concepts/bundles.md) "
        "for how a document gets to a cluster.",
        "",
        versions,
        "",
        "This page is generated from the operator's document models, the ones `bundlectl analyze` and "
        f"the operator read. The same descriptions are in the JSON Schema `schemas/bundle-{version}.json` "
        f"(`bundlectl schema {version}` prints it), which editors show on hover: see "
        "[Schemas for editors and linters](schemas.md).",
        "",
        "## Reading the tables",
        "",
        f"- **Field** is the field's path: `[]` stands for every entry of a list (`{lists}`){keys}.",
        "- **Value** is the field's type; **required**, or optional with the value it has when left "
        "out; and what the JSON Schema itself checks (the allowed values), which editors flag as you type.",
        "- **Description** says what the field means and the rules `bundlectl analyze` and the operator "
        "check beyond the schema, before anything is installed, each with the code of the issue it "
        "raises in parentheses (see [Issue codes](issue-codes.md)).",
        "- A field not listed is refused (`unknown_field`), and so is a value of another type: nothing "
        'is converted, so quote text that YAML would read as a number or a boolean (`version: "1.0"`).',
        "- **Anchors**: every field has one, its path without `[]`"
        + (" and `.*`" if maps else "")
        + ", dots made dashes: "
        f"`document-{version}.md#mcps-artifact-digest` links `mcps[].artifact.digest` and "
        f"`document-{version}.md#{anchor(deep)}` links `{deep}`.",
        "",
    ]


def render(version: str) -> str:
    """The reference page of schema ``version``."""
    page = _page(version)
    sections = _sections(page)
    example = example_file(version)
    lines = _intro(page)
    lines += [
        "## Example",
        "",
        f"`examples/{example.name}`, a complete {version} document:",
        "",
        "```yaml",
        example.read_text(encoding="utf-8").rstrip("\n"),
        "```",
        "",
        "## Top level",
        "",
        *_table(page, [row for row in page.rows if "." not in row.path and "[" not in row.path]),
        "",
    ]
    for name, rows in sections.items():
        suffix = f" (new in {version})" if name in page.new else ""
        lines += [f"## `{name}`{suffix} {{#section-{name}}}", "", *_section_intro(page, name)]
        lines += [*_table(page, rows), ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """One page per schema version."""
    return {page_path(version): render(version) for version in SCHEMA_VERSIONS}
