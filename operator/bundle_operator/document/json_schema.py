"""The bundle document's JSON Schema, per schema version, from the document's own models.

Editors (``# yaml-language-server: $schema=...``) and linters read it; the models stay the one
definition. A 0.1.0 document has none of 0.2.0's additions (knowledge sets, apps, an agent's
knowledge sets), so its schema leaves them out. The schema checks shapes only: keys, references and
the other rules that span entities are analyze's (``bundlectl analyze``). Every property carries
its field's ``About`` text as its description, which editors show on hover.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel

from bundle_operator.document import models
from bundle_operator.document.models import SCHEMA_VERSION, SCHEMA_VERSIONS, Bundle, field_about

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# What 0.2.0 added, by (definition, property); a definition named None is the document itself.
ADDED_IN_0_2_0: tuple[tuple[str | None, str], ...] = (
    (None, "knowledge_sets"),
    (None, "apps"),
    ("Agent", "knowledge_sets"),
)


def bundle_schema(version: str) -> dict[str, Any]:
    """The JSON Schema of a bundle document of ``version`` (one of ``SCHEMA_VERSIONS``)."""
    if version not in SCHEMA_VERSIONS:
        raise ValueError(f"schema version must be one of {', '.join(SCHEMA_VERSIONS)}")
    schema = copy.deepcopy(Bundle.model_json_schema())
    schema["properties"]["schema_version"] = {"const": version, "type": "string", "title": "Schema Version"}
    _describe(schema)
    if version == SCHEMA_VERSION:
        for where, name in ADDED_IN_0_2_0:
            target = schema if where is None else schema["$defs"][where]
            target["properties"].pop(name, None)
        _prune(schema)
    return {
        "$schema": DRAFT,
        "$id": f"https://bundle-operator.dev/schemas/bundle-{version}.json",
        "title": f"bundle document, schema_version {version}",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def _describe(schema: dict[str, Any]) -> None:
    """Give each property the description its model field carries; the models are named as their $defs."""
    found = {
        name: value
        for name, value in vars(models).items()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == models.__name__
    }
    nodes: list[tuple[dict[str, Any], type[BaseModel]]] = [(schema, Bundle)]
    nodes += [(node, found[name]) for name, node in schema.get("$defs", {}).items() if name in found]
    for node, model in nodes:
        for name, prop in node.get("properties", {}).items():
            info = model.model_fields.get(name)
            text = field_about(info) if info is not None else None
            if text is not None:
                prop["description"] = text


def _prune(schema: dict[str, Any]) -> None:
    """Drop the definitions nothing refers to any more."""
    defs = schema.get("$defs", {})
    while True:
        text = json.dumps({k: v for k, v in schema.items() if k != "$defs"}) + json.dumps(defs)
        unused = [name for name in defs if f'"#/$defs/{name}"' not in text]
        if not unused:
            return
        for name in unused:
            del defs[name]


def schema_text(version: str) -> str:
    """The schema as the checked-in file holds it: indented JSON, one trailing newline."""
    return json.dumps(bundle_schema(version), indent=2, ensure_ascii=False) + "\n"
