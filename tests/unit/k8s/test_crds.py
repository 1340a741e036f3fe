"""The checked-in CRDs: fresh, structural, described, and typed down to the inline document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.k8s import crdgen

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "crds"
INLINE = "spec.source.inline"
# The only subtrees whose content the apiserver keeps unchecked: free-form payloads of the format
# and a setup default, which may be a string, a number or a boolean.
FREE_FORM = {
    f"{INLINE}.setup[].default",
    f"{INLINE}.policies[].config",
    # An app's definition is an opaque JSON object (schema 0.2.0).
    f"{INLINE}.apps[].document",
    # The values of the map, each kept as written, null included (a null removes the member's key).
    f"{INLINE}.gateway.tools[].override_annotations{{}}",
}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}
NOT_STRUCTURAL = {"$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "default"}
# `nullable` is structural; it is allowed only where a null means something to the operator.
NULLABLE = {f"{INLINE}.gateway.tools[].override_annotations{{}}"}


def load(name: str) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load((CRDS / name).read_text())
    return crd


KINDS = ("bundles", "bundleinstallations", "endpoints")


@pytest.fixture(scope="module", params=KINDS)
def crd(request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(f"{request.param}.bundle-operator.dev.yaml")


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path: `a.b` for properties, `a[]` for items, `a{}` for map values."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}" if path else name)
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def node_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    return dict(walk(schema))[path]


def test_checked_in_crds_are_freshly_generated() -> None:
    rendered = crdgen.render()
    on_disk = {path.name: path.read_text() for path in CRDS.glob("*.yaml")}
    stale = sorted(
        name for name in rendered.keys() | on_disk.keys() if rendered.get(name) != on_disk.get(name)
    )
    assert not stale, f"crds/ is stale ({', '.join(stale)}): run `make crds` and commit the result"


def test_rendering_is_deterministic() -> None:
    assert crdgen.render() == crdgen.render()


def test_names_scope_and_subresources(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    expected = {
        "Bundle": ("bundles", "bdl"),
        "BundleInstallation": ("bundleinstallations", "bi"),
        "Endpoint": ("endpoints", "bep"),
    }[spec["names"]["kind"]]
    assert (spec["names"]["plural"], spec["names"]["shortNames"]) == (expected[0], [expected[1]])
    assert crd["metadata"]["name"] == f"{expected[0]}.bundle-operator.dev"
    assert spec["names"]["categories"] == ["bundles"]
    assert (spec["group"], spec["scope"]) == ("bundle-operator.dev", "Namespaced")
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_schema_is_structural(crd: dict[str, Any]) -> None:
    problems = []
    for path, node in walk(schema_of(crd)):
        where = path or "<root>"
        if NOT_STRUCTURAL & node.keys():
            problems.append(f"{where}: {sorted(NOT_STRUCTURAL & node.keys())}")
        untyped_ok = node.get("x-kubernetes-preserve-unknown-fields") or node.get(
            "x-kubernetes-int-or-string"
        )
        if node.get("type") not in TYPES and not untyped_ok:
            problems.append(f"{where}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{where}: properties and additionalProperties together")
        if isinstance(node.get("additionalProperties"), bool):
            problems.append(f"{where}: additionalProperties is a bool")
        if node.get("type") == "array" and "items" not in node:
            problems.append(f"{where}: an array without items")
        if node.get("nullable") and where not in NULLABLE:
            problems.append(f"{where}: nullable, where a null would only be pruned or refused")
        if node.get("x-kubernetes-list-type") == "map":
            keys = node.get("x-kubernetes-list-map-keys", [])
            if not keys or not set(keys) <= set(node["items"].get("required", [])):
                problems.append(f"{where}: list-map keys {keys} are not required item fields")
    assert not problems, "\n".join(problems)


def test_every_field_has_a_description(crd: dict[str, Any]) -> None:
    undescribed = [
        f"{path}.{name}" if path else name
        for path, node in walk(schema_of(crd))
        for name, child in node.get("properties", {}).items()
        if not child.get("description", "").strip()
    ]
    # The apiserver allows nothing on metadata but its type; kubectl explain describes it anyway.
    assert undescribed == ["metadata"]
    assert schema_of(crd)["properties"]["metadata"] == {"type": "object"}


def test_unknown_fields_are_kept_only_in_free_form_payloads() -> None:
    preserved = {
        path
        for name in KINDS
        for path, node in walk(schema_of(load(f"{name}.bundle-operator.dev.yaml")))
        if node.get("x-kubernetes-preserve-unknown-fields")
    }
    assert preserved == FREE_FORM


def test_every_cel_rule_has_a_message_and_a_bounded_cost(crd: dict[str, Any]) -> None:
    for path, node in walk(schema_of(crd)):
        for rule in node.get("x-kubernetes-validations", []):
            assert rule["message"], f"{path}: {rule['rule']}"
        # The apiserver estimates a rule's cost times the list's size: unbounded lists are refused.
        if node.get("type") == "array" and any(
            "x-kubernetes-validations" in n for _, n in walk(node["items"])
        ):
            assert "maxItems" in node, path


def rules(node: dict[str, Any]) -> dict[str, str]:
    return {rule["message"]: rule["rule"] for rule in node.get("x-kubernetes-validations", [])}


def test_cross_field_rules_sit_on_the_parents() -> None:
    bundle = schema_of(load("bundles.bundle-operator.dev.yaml"))
    one_source = "exactly one source: inline, configMapRef, url, mcpb or registry"
    assert one_source in rules(node_at(bundle, "spec.source"))
    mcpb = rules(node_at(bundle, "spec.source.mcpb"))
    assert set(mcpb) == {"exactly one archive: url, configMapRef or secretRef", "mcpb.url requires sha256"}

    installation = schema_of(load("bundleinstallations.bundle-operator.dev.yaml"))
    assert rules(node_at(installation, "spec.setup[]")) == {
        "exactly one of value or secretKeyRef": "has(self.value) != has(self.secretKeyRef)"
    }
    for field in ("workspace", "bundleRef"):
        [(message, rule)] = rules(node_at(installation, f"spec.{field}")).items()
        assert rule == "self == oldSelf"
        assert message == f"{field} cannot change; create a new BundleInstallation"


def test_endpoint_rules_keep_its_reference_and_auth_mode_and_its_name_a_url_segment() -> None:
    endpoint = schema_of(load("endpoints.bundle-operator.dev.yaml"))
    [(message, rule)] = rules(node_at(endpoint, "spec.installationRef")).items()
    assert (message, rule) == ("installationRef cannot change; create a new Endpoint", "self == oldSelf")
    spec_rules = rules(node_at(endpoint, "spec"))
    assert "credentialsSecretName is required when auth.mode is ApiKey (the default)" in spec_rules
    [transition] = [rule for rule in spec_rules.values() if "oldSelf" in rule]
    assert "auth.mode" in transition
    [name_rule] = rules(endpoint).values()
    assert name_rule == "self.metadata.name.matches('^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$')"
    members = node_at(endpoint, "status.members")
    assert (members["x-kubernetes-list-type"], members["x-kubernetes-list-map-keys"]) == ("map", ["name"])
    assert set(node_at(endpoint, "status")["properties"]) == {
        "observedGeneration",
        "url",
        "presentedTools",
        "withheldTools",
        "members",
        "conditions",
    }
    assert set(node_at(endpoint, "spec")["properties"]) == {
        "installationRef",
        "auth",
        "profile",
        "enabled",
        "rateLimit",
        "allowedOrigins",
        "credentialsSecretName",
    }
    assert node_at(endpoint, "spec.auth.mode")["enum"] == ["ApiKey", "OAuth"]
    assert set(node_at(endpoint, "spec.auth.oauth")["properties"]) == {
        "issuer",
        "audience",
        "requiredScopes",
        "toolScopes",
    }
    assert "auth.oauth (at least its issuer) is required when auth.mode is OAuth" in spec_rules
    assert "auth.oauth is only for auth.mode OAuth" in spec_rules
    assert node_at(endpoint, "spec.profile")["enum"] == ["Default", "ChatGPT"]


def test_a_map_keeps_its_size_bound_so_the_api_server_refuses_a_larger_one() -> None:
    endpoint = schema_of(load("endpoints.bundle-operator.dev.yaml"))
    assert node_at(endpoint, "spec.auth.oauth.toolScopes")["maxProperties"] == 256


def test_keyed_lists_are_list_maps() -> None:
    installation = schema_of(load("bundleinstallations.bundle-operator.dev.yaml"))
    setup = node_at(installation, "spec.setup")
    assert (setup["x-kubernetes-list-type"], setup["x-kubernetes-list-map-keys"]) == ("map", ["key"])
    assert setup["maxItems"] == 200
    for name in KINDS:
        conditions = node_at(schema_of(load(f"{name}.bundle-operator.dev.yaml")), "status.conditions")
        assert conditions["x-kubernetes-list-map-keys"] == ["type"]
        assert {"type", "status"} <= set(conditions["items"]["required"])


def test_inline_document_is_typed_with_its_own_field_names() -> None:
    inline = node_at(schema_of(load("bundles.bundle-operator.dev.yaml")), INLINE)
    assert inline["required"] == ["schema_version", "name"]
    assert "schema_version" in inline["properties"]
    mcp = inline["properties"]["mcps"]["items"]
    assert mcp["properties"]["type"]["enum"] == ["command", "docker", "url"]
    assert mcp["required"] == ["key", "name", "type"]
    assert {"command", "image", "endpoint_url", "context_secret"} <= mcp["properties"].keys()
    assert "Only with type url." in mcp["properties"]["endpoint_url"]["description"]
    skill = inline["properties"]["skills"]["items"]
    assert skill["properties"]["source_type"]["enum"] == ["inline", "github"]
    # No length cap on text: a 1 MB skill must fit.
    assert "maxLength" not in skill["properties"]["content"]


PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def is_json_type(value: object, kind: str) -> bool:
    """Whether YAML parsed `value` as the JSON type `kind` (a bool is not a number)."""
    return isinstance(value, PYTHON_TYPES[kind]) and not (
        kind in ("integer", "number") and isinstance(value, bool)
    )


def conforms(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """What the apiserver's structural validation would refuse in `value` (types, enums, fields)."""
    if schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in schema:
        return []
    kind = schema["type"]
    if not is_json_type(value, kind):
        return [f"{path}: not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} not in {schema['enum']}"]
    if kind == "array":
        return [
            error for i, item in enumerate(value) for error in conforms(item, schema["items"], f"{path}/{i}")
        ]
    if kind != "object" or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    errors = [f"{path}: {name} is required" for name in schema.get("required", []) if name not in value]
    for name, item in value.items():
        child = schema.get("properties", {}).get(name) or schema.get("additionalProperties")
        errors += conforms(item, child, f"{path}/{name}") if child else [f"{path}: unknown field {name}"]
    return errors


def test_the_example_bundle_fits_the_inline_schema() -> None:
    inline = node_at(schema_of(load("bundles.bundle-operator.dev.yaml")), INLINE)
    example = yaml.safe_load((ROOT / "examples" / "github-triage.yaml").read_text())
    assert conforms(example, inline) == []
    misspelled = {**example, "mcps": [{**example["mcps"][0], "comand": "npx"}]}
    assert conforms(misspelled, inline) == ["/mcps/0: unknown field comand"]


def test_printer_columns_show_readiness_version_and_age() -> None:
    def columns(name: str) -> list[tuple[str, str, int]]:
        version = load(f"{name}.bundle-operator.dev.yaml")["spec"]["versions"][0]
        return [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]]

    ready = '.status.conditions[?(@.type=="Ready")]'
    assert columns("bundles") == [
        ("Ready", f"{ready}.status", 0),
        ("Reason", f"{ready}.reason", 0),
        ("Version", ".status.version", 0),
        ("Age", ".metadata.creationTimestamp", 0),
        ("Bundle", ".status.bundleName", 1),
        ("Digest", ".status.digest", 1),
    ]
    assert columns("bundleinstallations") == [
        ("Ready", f"{ready}.status", 0),
        ("Reason", f"{ready}.reason", 0),
        ("Version", ".status.installedVersion", 0),
        ("Plan", ".status.plan.summary", 0),
        ("Age", ".metadata.creationTimestamp", 0),
        ("Workspace", ".spec.workspace", 1),
        ("Bundle", ".spec.bundleRef.name", 1),
    ]
    assert columns("endpoints") == [
        ("Ready", f"{ready}.status", 0),
        ("Reason", f"{ready}.reason", 0),
        ("Age", ".metadata.creationTimestamp", 0),
        ("URL", ".status.url", 1),
        ("Installation", ".spec.installationRef.name", 1),
    ]


def test_main_writes_every_file(tmp_path: Path) -> None:
    assert crdgen.main([str(tmp_path)]) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(crdgen.render())
