"""Renders a JSON Schema (a CRD's, the chart's values schema, an OpenAPI schema) as Markdown field tables.

``render_fields(schema, defs, path=..., title=..., level=..., linker=..., anchor_prefix=...)`` is the
usual call: a heading for the object (with its description and rules) and a table of its fields,
then a heading one level lower for each field that has fields of its own, titled with its full
path. Tables are field | type | default | description, validation inside the description cell.
``field_rows`` gives the same fields as data (``FieldRow``), depth first, for a page laid out
otherwise; ``render_table`` renders any list of them; ``field_type`` and ``schema_rules`` describe
one schema (a parameter's); ``escape`` and ``code`` put text in a cell (with ``_cells``' helpers).

``$ref``s are followed into `defs` (or shown as links where `linker` says so); ``X or null`` reads
as X, nullable; a union of objects (a discriminated one) is read as one object with every variant's
fields, each saying which discriminator values it goes with.

Paths join names with dots; an array's items add ``[]`` and a map's values ``*``
(``spec.setup[].key``, ``toolScopes.*``). ``anchor(path)`` is a field's HTML id on the page: the
path lowercased, each run of characters other than letters, digits and ``_`` made one ``-``
(``spec-setup-key``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bundle_operator.docgen._cells import fenced, one_line

Schema = Mapping[str, Any]

Linker = Callable[[str, str | None], str | None]
"""(field path, name of the definition its schema refers to or None) -> Markdown for its type cell,
shown instead of expanding its fields (a link to where they are); None expands them in place."""


@dataclass(frozen=True)
class FieldRow:
    """One field of a schema, ready to render."""

    path: str
    name: str
    parent: str  # the path of the object that lists it ("" for the schema's own fields)
    type: str  # Markdown: "string", "array of object", "map of string", or a link
    required: bool
    default: str | None  # the default as written in YAML or JSON, None when there is none
    description: str  # plain text as the schema has it (``code`` in backticks allowed)
    rules: tuple[str, ...]  # validation, one Markdown sentence each
    group: bool  # it has fields of its own, listed under its own heading
    anchor: str  # its HTML id: anchor(anchor_prefix + path)


def anchor(path: str) -> str:
    """``spec.setup[].secretKeyRef`` -> ``spec-setup-secretkeyref``."""
    return re.sub(r"[^a-z0-9_]+", "-", path.lower()).strip("-")


def code(value: object) -> str:
    """A value as inline code: strings as written, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return fenced(text) if text else '`""`'


_TICKS = re.compile(r"`+")
_SPECIAL = re.compile(r"([\\`*_\[\]{}|])")


def escape(text: str) -> str:
    """Plain text as Markdown that shows it as written; backtick code spans stay code."""
    out: list[str] = []
    last = 0
    for start, end in code_spans(text):
        out.append(_escape_plain(text[last:start]))
        out.append(text[start:end])
        last = end
    out.append(_escape_plain(text[last:]))
    return "".join(out)


def code_spans(text: str) -> list[tuple[int, int]]:
    """Where the code spans are: a run of backticks up to the next run of the same length, with
    something between them (as Markdown reads them); one pass over the runs, whatever the text."""
    runs = [(match.start(), match.end()) for match in _TICKS.finditer(text)]
    following: list[int | None] = [None] * len(runs)  # the next run of the same length, by index
    latest: dict[int, int] = {}
    for index in range(len(runs) - 1, -1, -1):
        length = runs[index][1] - runs[index][0]
        following[index] = latest.get(length)
        latest[length] = index
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(runs):
        closing = following[index]
        if closing is None:
            index += 1
            continue
        spans.append((runs[index][0], runs[closing][1]))
        index = closing + 1
    return spans


def _escape_plain(text: str) -> str:
    text = _SPECIAL.sub(r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


# ------------------------------------------------------------------------------------------- walk


class _Walker:
    def __init__(self, defs: Mapping[str, Schema], linker: Linker | None, anchor_prefix: str = "") -> None:
        self.defs = defs
        self.linker = linker
        self.anchor_prefix = anchor_prefix
        # A group field's path -> the object holding its fields and the path they hang under.
        self.groups: dict[str, tuple[Schema, str]] = {}

    def resolve(self, schema: Schema) -> tuple[Schema, str | None]:
        """The schema a $ref points to, the referring node's own keys winning; and the ref's name."""
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema, None
        name = ref.rsplit("/", 1)[-1]
        target, _ = self.resolve(self.defs[name])
        own = {key: value for key, value in schema.items() if key != "$ref"}
        return {**target, **own}, name

    def unwrap(self, schema: Schema) -> tuple[Schema, str | None, bool]:
        """The schema with its $ref and its union opened: (schema, ref name, nullable).

        ``X or null`` is X, nullable; a union of objects is one object with every variant's fields.
        """
        schema, name = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            alternatives = schema.get(key)
            if not isinstance(alternatives, list):
                continue
            present = [alt for alt in alternatives if alt.get("type") != "null"]
            nullable = len(present) < len(alternatives)
            own = {k: v for k, v in schema.items() if k not in (key, "discriminator")}
            if len(present) == 1 and nullable:
                inner, inner_name = self.resolve(present[0])
                return {**inner, **own}, inner_name or name, True
            merged = self._merged(present, (schema.get("discriminator") or {}).get("propertyName"))
            if merged is not None:
                return {**merged, **own}, name, nullable
        return schema, name, False

    def _merged(self, alternatives: Sequence[Schema], key: str | None) -> Schema | None:
        """Variants of an object (a discriminated union) as one object; None when they are not all objects.

        A field only some variants have says which (``x-only-with``); the discriminator lists every tag.
        """
        if len(alternatives) < 2 or any(
            self.link("", alt.get("$ref", "").rsplit("/", 1)[-1] or None) for alt in alternatives
        ):
            return None
        variants = [self.resolve(alt)[0] for alt in alternatives]
        if not all(isinstance(variant.get("properties"), Mapping) for variant in variants):
            return None
        tags = [_tags(variant, key) for variant in variants]
        every = [tag for found in tags for tag in found]
        properties: dict[str, Schema] = {}
        owners: dict[str, list[object]] = {}
        required: dict[str, bool] = {}
        for variant, found in zip(variants, tags, strict=True):
            for name, prop in variant["properties"].items():
                properties.setdefault(name, prop)
                owners.setdefault(name, []).extend(found)
                required[name] = required.get(name, True) and name in variant.get("required", ())
        if key is not None and key in properties and every:
            tag = {k: v for k, v in properties[key].items() if k not in ("const", "enum")}
            properties[key] = {**tag, "enum": every}
        for name, found in owners.items():
            if key is not None and name != key and every and found != every:
                properties[name] = {**properties[name], "x-only-with": (key, found)}
        return {"type": "object", "properties": properties, "required": [n for n, r in required.items() if r]}

    def link(self, path: str, name: str | None) -> str | None:
        if self.linker is None:
            return None
        return self.linker(path, name)

    def container(self, schema: Schema, path: str) -> tuple[Schema, str] | None:
        """The object whose properties are this field's fields, and their path prefix; None for a leaf."""
        node, name, _ = self.unwrap(schema)
        if self.link(path, name) is not None:
            return None
        if isinstance(node.get("properties"), Mapping) and node["properties"]:
            return node, path
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, Mapping):
            found = self.container(items, f"{path}[]")
            return found
        values = node.get("additionalProperties")
        if isinstance(values, Mapping) and not node.get("properties"):
            return self.container(values, f"{path}.*")
        return None

    def type_of(self, schema: Schema, path: str) -> str:
        node, name, nullable = self.unwrap(schema)
        linked = self.link(path, name)
        text = linked if linked is not None else self._bare_type(node, path)
        return f"{text} or null" if nullable else text

    def _bare_type(self, node: Schema, path: str) -> str:
        alternatives = node.get("oneOf") or node.get("anyOf")
        if isinstance(alternatives, list) and all(_typed(alt) for alt in alternatives):
            return " or ".join(self.type_of(alt, path) for alt in alternatives)
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(str(k) for k in kind)
        if kind == "array":
            items = node.get("items")
            return (
                "array" if not isinstance(items, Mapping) else f"array of {self.type_of(items, f'{path}[]')}"
            )
        values = node.get("additionalProperties")
        if kind == "object" or node.get("properties") or isinstance(values, Mapping):
            if isinstance(values, Mapping) and values and not node.get("properties"):
                return f"map of {self.type_of(values, f'{path}.*')}"
            return "object"
        if isinstance(kind, str):
            return kind
        if "enum" in node or "const" in node:
            sample = node["enum"][0] if "enum" in node else node["const"]
            return _json_type(sample)
        return "any"

    def rows(self, schema: Schema, path: str, out: list[FieldRow]) -> None:
        """Append the fields of the object `schema` (at `path`), each followed by its own fields."""
        node, _, _ = self.unwrap(schema)
        properties: Mapping[str, Schema] = node.get("properties") or {}
        required = set(node.get("required") or ())
        for name, raw in properties.items():
            child_path = f"{path}.{name}" if path else name
            field, _, _ = self.unwrap(raw)
            inner = self.container(raw, child_path)
            default = raw["default"] if "default" in raw else field.get("default")
            out.append(
                FieldRow(
                    path=child_path,
                    name=name,
                    parent=path,
                    type=self.type_of(raw, child_path),
                    required=name in required,
                    default=None if default is None else _default(default),
                    description=str(raw.get("description") or field.get("description") or ""),
                    rules=tuple(self.rules(field)),
                    group=inner is not None,
                    anchor=anchor(self.anchor_prefix + child_path),
                )
            )
            if inner is not None:
                self.groups[child_path] = inner
                self.rows(inner[0], inner[1], out)

    def rules(self, node: Schema) -> list[str]:
        """The node's validation as sentences; an array's or a map's scalar items' rules too."""
        found = _own_rules(node)
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, Mapping):
            found += [f"Each item: {_lower_first(rule)}" for rule in self._inner_rules(items)]
        values = node.get("additionalProperties")
        if isinstance(values, Mapping) and not node.get("properties"):
            found += [f"Each value: {_lower_first(rule)}" for rule in self._inner_rules(values)]
        return found

    def _inner_rules(self, schema: Schema) -> list[str]:
        """An item's or a map value's rules; an object's own only, its fields have rows of their own."""
        inner, _, _ = self.unwrap(schema)
        return _own_rules(inner) if inner.get("properties") else self.rules(inner)


def _tags(variant: Schema, key: str | None) -> list[object]:
    """The discriminator values that choose this variant (its ``const`` or ``enum``)."""
    if key is None:
        return []
    prop = (variant.get("properties") or {}).get(key) or {}
    if "const" in prop:
        return [prop["const"]]
    return list(prop.get("enum") or [])


def _typed(alt: Schema) -> bool:
    return any(key in alt for key in ("type", "$ref", "enum", "const", "anyOf", "oneOf"))


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def _default(value: object) -> str:
    """A default as a user writes it: strings bare, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _span(low: object, high: object, unit: str) -> str | None:
    if low is not None and high is not None:
        return f"{low} to {high} {unit}"
    bound = low if low is not None else high
    if bound is None:
        return None
    # "at least 1 character", "at most 2 characters"
    word = {"characters": "character", "items": "item", "entries": "entry"}[unit] if bound == 1 else unit
    return f"{'at least' if low is not None else 'at most'} {bound} {word}"


def _own_rules(node: Schema) -> list[str]:
    """The validation keywords of one node, each as a sentence."""
    found: list[str] = []
    if "enum" in node:
        found.append("One of " + ", ".join(code(value) for value in node["enum"]) + ".")
    if "const" in node:
        found.append(f"Always {code(node['const'])}.")
    if "pattern" in node:
        found.append(f"Matches {code(node['pattern'])}.")
    if "format" in node:
        found.append(f"Format {code(node['format'])}.")
    for low_key, high_key, unit in (
        ("minLength", "maxLength", "characters"),
        ("minItems", "maxItems", "items"),
        ("minProperties", "maxProperties", "entries"),
    ):
        span = _span(node.get(low_key), node.get(high_key), unit)
        if span:
            found.append(span[0].upper() + span[1:] + ".")
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if low is not None or high is not None:
        found.append(_range(node))
    if node.get("uniqueItems"):
        found.append("Items are unique.")
    names = node.get("propertyNames")
    if isinstance(names, Mapping):
        found += [f"Each key: {_lower_first(rule)}" for rule in _own_rules(names)]
    patterns = node.get("patternProperties")
    if isinstance(patterns, Mapping):
        found.append("Keys match " + " or ".join(code(pattern) for pattern in patterns) + ".")
    if node.get("x-kubernetes-list-type") == "map":
        keys = ", ".join(code(key) for key in node.get("x-kubernetes-list-map-keys", []))
        found.append(f"A list keyed by {keys}: one item per key.")
    elif node.get("x-kubernetes-list-type") == "set":
        found.append("Items are unique.")
    for rule in node.get("x-kubernetes-validations") or ():
        found.append(f"{escape(str(rule.get('message') or rule['rule']))} (checked by the API server).")
    for key, word in (("oneOf", "Exactly one"), ("anyOf", "At least one")):
        alternatives = node.get(key)
        if isinstance(alternatives, list) and alternatives and not any(map(_typed, alternatives)):
            names_ = [name for alt in alternatives for name in alt.get("required", ())]
            if names_:
                found.append(f"{word} of " + ", ".join(code(name) for name in names_) + ".")
    only = node.get("x-only-with")
    if only is not None:
        key, tags = only
        found.append(f"Only with {code(key)} " + " or ".join(code(tag) for tag in tags) + ".")
    if node.get("writeOnly"):
        found.append("Write-only: never returned.")
    if node.get("readOnly"):
        found.append("Read-only.")
    return found


def _range(node: Schema) -> str:
    low_key = "minimum" if "minimum" in node else "exclusiveMinimum"
    high_key = "maximum" if "maximum" in node else "exclusiveMaximum"
    parts = []
    if low_key in node:
        parts.append(f"{'at least' if low_key == 'minimum' else 'more than'} {node[low_key]}")
    if high_key in node:
        parts.append(f"{'at most' if high_key == 'maximum' else 'less than'} {node[high_key]}")
    text = " and ".join(parts)
    return text[0].upper() + text[1:] + "."


def field_rows(
    schema: Schema,
    defs: Mapping[str, Schema] | None = None,
    *,
    path: str = "",
    linker: Linker | None = None,
    anchor_prefix: str = "",
) -> list[FieldRow]:
    """Every field below the object `schema` (at `path`), depth first, each before its own fields.

    `defs` are the definitions a ``$ref`` may name (by their last path segment); `linker` decides
    which fields are shown as links instead of expanded; `anchor_prefix` goes before each path in
    its anchor (``schema-`` makes ``Agent.name`` ``schema-agent-name``).
    """
    out: list[FieldRow] = []
    _Walker(defs or {}, linker, anchor_prefix).rows(schema, path, out)
    return out


def field_type(
    schema: Schema, defs: Mapping[str, Schema] | None = None, *, linker: Linker | None = None
) -> str:
    """The Markdown type of one schema, as the type column shows it (a parameter's, a body's)."""
    return _Walker(defs or {}, linker).type_of(schema, "")


def schema_rules(schema: Schema, defs: Mapping[str, Schema] | None = None) -> list[str]:
    """The validation of the object `schema` itself (e.g. CEL rules across its fields), as sentences."""
    walker = _Walker(defs or {}, None)
    return walker.rules(walker.unwrap(schema)[0])


# ----------------------------------------------------------------------------------------- render


def render_table(rows: Sequence[FieldRow]) -> str:
    """One table of fields: field | type | default | description; the default column only if one has one."""
    with_default = any(row.default is not None for row in rows)
    head = ["Field", "Type", *(["Default"] if with_default else []), "Description"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        name = f"[{code(row.name)}](#{row.anchor})" if row.group else f"{code(row.name)}{{#{row.anchor}}}"
        kind = row.type + (" (required)" if row.required else "")
        cells = [name, kind]
        if with_default:
            cells.append("" if row.default is None else code(row.default))
        text = [escape(one_line(row.description))] if row.description else []
        cells.append("<br>".join(text + list(row.rules)))
        lines.append("| " + " | ".join(cell.replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def render_fields(
    schema: Schema,
    defs: Mapping[str, Schema] | None = None,
    *,
    path: str = "",
    title: str | None = None,
    level: int = 2,
    linker: Linker | None = None,
    anchor_prefix: str = "",
) -> str:
    """Markdown for the object `schema` and every field below it.

    A heading (level `level`, titled `title` or the path in code, with the id ``anchor(path)``) with
    the schema's description, rules and a table of its fields; then a heading one level lower for
    each field that has fields of its own, titled with its full path, with its own table.
    """
    walker = _Walker(defs or {}, linker, anchor_prefix)
    rows: list[FieldRow] = []
    walker.rows(schema, path, rows)
    root, _, _ = walker.unwrap(schema)
    root_id = anchor(anchor_prefix + (path or title or ""))
    ids = [root_id] + [row.anchor for row in rows]
    clashes = sorted({name for name in ids if ids.count(name) > 1})
    if clashes:
        raise ValueError(f"fields share an anchor: {clashes}")
    sections = [
        _section(
            "#" * level,
            title or code(path),
            root_id,
            str(root.get("description") or ""),
            walker.rules(root),
            [row for row in rows if row.parent == path],
        )
    ]
    for group in (row for row in rows if row.group):
        prefix = walker.groups[group.path][1]
        intro = f"{group.type}{', required' if group.required else ''}."
        sections.append(
            _section(
                "#" * (level + 1),
                code(group.path),
                group.anchor,
                group.description,
                [intro[0].upper() + intro[1:], *group.rules],
                [row for row in rows if row.parent == prefix],
            )
        )
    return "\n".join(sections)


def _section(
    hashes: str, title: str, id_: str, description: str, rules: Sequence[str], rows: Sequence[FieldRow]
) -> str:
    parts = [f"{hashes} {title} {{#{id_}}}\n"]
    if description:
        parts.append(escape(description.strip()) + "\n")
    if rules:
        parts.append("".join(f"- {rule}\n" for rule in rules))
    if rows:
        parts.append(render_table(rows))
    return "\n".join(parts)
