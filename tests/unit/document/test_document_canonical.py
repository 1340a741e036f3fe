"""One bundle, one digest: YAML or JSON, any key order, defaults written out or not."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import yaml

from bundle_operator.document import canonical_json, parse_bundle_text


def digest_of(text: str) -> str:
    result = parse_bundle_text(text)
    assert result.digest is not None, [i.to_json() for i in result.issues]
    return result.digest


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def test_yaml_and_json_with_any_key_order_have_one_digest(doc: dict[str, Any]) -> None:
    expected = digest_of(yaml.safe_dump(doc, sort_keys=False))
    assert expected.startswith("sha256:") and len(expected) == len("sha256:") + 64
    for seed in range(5):
        variant = shuffled(doc, random.Random(seed))
        assert digest_of(json.dumps(variant)) == expected
        assert digest_of(json.dumps(variant, indent=4)) == expected
        assert (
            digest_of(yaml.safe_dump(variant, sort_keys=False, default_flow_style=seed % 2 == 0)) == expected
        )


def test_explicit_defaults_do_not_change_the_digest(doc: dict[str, Any]) -> None:
    expected = digest_of(json.dumps(doc))
    explicit = copy.deepcopy(doc)
    explicit["setup"][0]["required"] = True
    explicit["channels"][0]["enabled"] = False
    explicit["automations"][0]["timezone"] = "UTC"
    explicit["agents"][0]["description"] = None
    explicit["requires"] = []
    assert digest_of(json.dumps(explicit)) == expected


def test_comments_and_quoting_do_not_change_the_digest() -> None:
    a = 'schema_version: "0.1.0"\nname: x\ndescription: hello\n'
    b = "# a comment\nschema_version: '0.1.0'   # pinned\nname: \"x\"\ndescription: >-\n  hello\n"
    assert digest_of(a) == digest_of(b)


def test_any_content_change_changes_the_digest(doc: dict[str, Any]) -> None:
    base = digest_of(json.dumps(doc))
    for mutate in (
        lambda d: d.__setitem__("version", "1.0.1"),
        lambda d: d["mcps"][0]["args"].reverse(),  # argument order matters
        lambda d: d["agents"][0].__setitem__("instructions", "x"),
        lambda d: d["policies"][0]["config"].__setitem__("limit_usd", 51),
    ):
        changed = copy.deepcopy(doc)
        mutate(changed)
        assert digest_of(json.dumps(changed)) != base


def test_canonical_json_is_sorted_and_compact(doc: dict[str, Any]) -> None:
    result = parse_bundle_text(json.dumps(doc))
    assert result.bundle is not None
    text = canonical_json(result.bundle)
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert data["channels"][0]["enabled"] is False  # defaults are written out
    assert "description" not in data["agents"][0]  # absent optionals are left out
