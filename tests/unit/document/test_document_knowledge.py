"""Schema 0.2.0: knowledge sets with typed sources, apps and an agent's knowledge sets, as a user
meets them in analyze; 0.1.0 documents mean (and digest to) what they always did."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.document import parse_bundle_data, parse_bundle_text
from bundle_operator.document.models import Bundle
from bundle_operator.engine.analyze import analyze_offline
from bundle_operator.engine.desired import Inputs
from bundle_operator.engine.kinds.knowledge_set import desired_knowledge_set
from bundle_operator.engine.preview import Preview
from tests.documents import bundle_document
from tests.unit.document.builders import analyze, issues_with, only_issue

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# The examples whose substitute requirements need a mapping to analyze clean.
EXAMPLE_SUBSTITUTIONS: dict[str, dict[str, str]] = {
    "building-office.yaml": {"knowledge_source:s3:acme-bylaws": "s3:other-bucket"},
    "github-triage.yaml": {"model:gpt-4.1": "gpt-5"},
}

# Digests of the 0.1.0 examples as the operator computed them at 28061ff, before 0.2.0 existed.
DIGESTS_BEFORE_0_2_0 = {
    "gateway-curated.yaml": "sha256:babe44d3fdec85c6374041f953a437609b2bc5b3a8837b7f96841af831709251",
    "github-triage.yaml": "sha256:458a043e1dea3d2f3403a7cea776fdcedfd8986abadc67c1390d23e7a72a4b44",
    "postgres-data.yaml": "sha256:1281e18f99b3677e2931e18af8a3133d8abd09c7dd800f04a2a928869911cb53",
}

ACCESS_KEY = "AKIAEXAMPLEONLY00000"
SETUP = {"access_key": ACCESS_KEY}
MAPPED = {"knowledge_source:s3:acme-docs": "s3:dormagen-docs"}
SOURCES = "/knowledge_sets/0/sources"


def knowledge_doc() -> dict[str, Any]:
    """A valid 0.2.0 document: a statutes and an S3 source, an agent reading them, an app."""
    return bundle_document(
        "building-office",
        schema_version="0.2.0",
        setup=[{"key": "access_key", "label": "Access key", "type": "secret"}],
        mcps=[
            {
                "key": "permits",
                "name": "Permits",
                "type": "url",
                "endpoint_url": "https://permits.example.org/mcp",
            }
        ],
        knowledge_sets=[
            {
                "key": "law",
                "name": "Building law",
                "description": "Statutes and bylaws.",
                "data_description": "Building codes and municipal bylaws.",
                "sources": {
                    "statutes-1": {
                        "type": "statutes",
                        "laws": ["baugb", "bauo-nrw"],
                        "sync_schedule": "0 3 * * *",
                    },
                    "s3-1": {
                        "type": "s3",
                        "bucket": "acme-docs",
                        "prefix": "satzungen/",
                        "region": "eu-central-1",
                        "credentials": {"access_key_id": "${setup.access_key}"},
                    },
                },
            }
        ],
        agents=[
            {"key": "assistant", "name": "Permit assistant", "mcps": ["permits"], "knowledge_sets": ["law"]}
        ],
        apps=[
            {
                "key": "status",
                "name": "Request status",
                "mcps": ["permits"],
                "document": {
                    "root": "r",
                    "elements": {"r": {"type": "Card", "title": "Status"}},
                    "state": {},
                },
            }
        ],
        requires=[{"kind": "knowledge_source", "ref": "s3:acme-docs", "policy": "substitute"}],
    )


@pytest.fixture
def kdoc() -> dict[str, Any]:
    return knowledge_doc()


def check(
    document: Mapping[str, Any] | str,
    substitutions: Mapping[str, str] | None = None,
    setup: Mapping[str, object] | None = None,
) -> Preview:
    """Analyze offline (via YAML text, so lines are known) with the setup and the bucket mapped."""
    text = document if isinstance(document, str) else yaml.safe_dump(dict(document), sort_keys=False)
    return analyze_offline(
        parse_bundle_text(text),
        SETUP if setup is None else setup,
        MAPPED if substitutions is None else substitutions,
    )


def source(document: dict[str, Any], key: str) -> dict[str, Any]:
    sources: dict[str, dict[str, Any]] = document["knowledge_sets"][0]["sources"]
    return sources[key]


def codes(preview: Preview) -> list[str]:
    return [str(issue.code) for issue in preview.issues]


# --- the shipped examples ------------------------------------------------------------------------


def example_setup(example: Path) -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load((ROOT / "examples" / "setup" / example.name).read_text())
    return dict(loaded or {})


def digest_before_0_2_0(bundle: Bundle) -> str:
    """The digest as computed before 0.2.0: the model dump without the sections 0.2.0 added."""
    data = bundle.model_dump(mode="json", exclude_none=True)
    data.pop("knowledge_sets", None)
    data.pop("apps", None)
    for agent in data.get("agents", []):
        agent.pop("knowledge_sets", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def schema_version_of(example: Path) -> str:
    return str(yaml.safe_load(example.read_text())["schema_version"])


OLD_EXAMPLES = [e for e in EXAMPLES if schema_version_of(e) == "0.1.0"]


def test_the_knowledge_example_ships() -> None:
    names = {e.name for e in EXAMPLES}
    assert "building-office.yaml" in names
    assert schema_version_of(ROOT / "examples" / "building-office.yaml") == "0.2.0"
    assert set(DIGESTS_BEFORE_0_2_0) <= {e.name for e in OLD_EXAMPLES}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_parses_and_analyzes_without_blocking_issues(example: Path) -> None:
    parsed = parse_bundle_text(example.read_text())
    assert parsed.bundle is not None
    assert not parsed.blocking, [i.to_json() for i in parsed.issues]
    preview = analyze_offline(parsed, example_setup(example), EXAMPLE_SUBSTITUTIONS.get(example.name, {}))
    assert [i.to_json() for i in preview.issues if i.blocking] == []
    assert all(plan.action == "CREATE" for plan in preview.entities)


def test_the_knowledge_example_plans_its_set_and_app_and_needs_its_bucket_mapped() -> None:
    example = ROOT / "examples" / "building-office.yaml"
    parsed = parse_bundle_text(example.read_text())
    mapped = analyze_offline(parsed, example_setup(example), EXAMPLE_SUBSTITUTIONS[example.name])
    planned = [plan.entity for plan in mapped.entities]
    assert {"knowledge_set:building_law", "app:request_status", "agent:permit_assistant"} <= set(planned)
    assert planned.index("knowledge_set:building_law") < planned.index("agent:permit_assistant")
    assert issues_with(mapped, "tenant_address_as_written") == []
    unmapped = analyze_offline(parsed, example_setup(example), {})
    assert only_issue(unmapped, "substitution_required").path == "/requires/0"


@pytest.mark.parametrize("example", OLD_EXAMPLES, ids=lambda p: p.name)
def test_a_0_1_0_example_keeps_the_digest_it_had_before_0_2_0(example: Path) -> None:
    parsed = parse_bundle_text(example.read_text())
    assert parsed.bundle is not None
    assert parsed.digest == digest_before_0_2_0(parsed.bundle)
    if example.name in DIGESTS_BEFORE_0_2_0:
        assert parsed.digest == DIGESTS_BEFORE_0_2_0[example.name]


def test_a_0_1_0_document_keeps_its_digest(doc: dict[str, Any]) -> None:
    parsed = parse_bundle_data(doc)
    assert parsed.bundle is not None
    assert parsed.digest == digest_before_0_2_0(parsed.bundle)


def test_empty_0_2_0_sections_do_not_change_the_digest(kdoc: dict[str, Any]) -> None:
    bare = {k: v for k, v in kdoc.items() if k not in ("knowledge_sets", "apps", "requires")}
    bare["agents"] = [{k: v for k, v in bare["agents"][0].items() if k != "knowledge_sets"}]
    spelled = copy.deepcopy(bare)
    spelled["knowledge_sets"] = []
    spelled["apps"] = []
    spelled["agents"][0]["knowledge_sets"] = []
    assert parse_bundle_data(bare).digest == parse_bundle_data(spelled).digest


def test_source_order_does_not_change_the_digest_but_a_source_field_does(kdoc: dict[str, Any]) -> None:
    reordered = copy.deepcopy(kdoc)
    sources = reordered["knowledge_sets"][0]["sources"]
    reordered["knowledge_sets"][0]["sources"] = dict(reversed(list(sources.items())))
    assert parse_bundle_data(reordered).digest == parse_bundle_data(kdoc).digest
    changed = copy.deepcopy(kdoc)
    source(changed, "s3-1")["prefix"] = "other/"
    assert parse_bundle_data(changed).digest != parse_bundle_data(kdoc).digest


# --- schema versions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("use", "pointer"),
    [
        (
            lambda d: d.__setitem__(
                "knowledge_sets",
                [
                    {
                        "key": "law",
                        "name": "Law",
                        "sources": {"statutes-1": {"type": "statutes", "laws": ["baugb"]}},
                    }
                ],
            ),
            "/knowledge_sets",
        ),
        (lambda d: d.__setitem__("apps", [{"key": "status", "name": "Status", "document": {}}]), "/apps"),
        (lambda d: d["agents"][0].__setitem__("knowledge_sets", []), "/agents/0/knowledge_sets"),
    ],
)
def test_a_0_1_0_document_using_a_0_2_0_section_is_refused_at_it(
    doc: dict[str, Any], use: Any, pointer: str
) -> None:
    use(doc)
    issue = only_issue(analyze(doc), "newer_schema_field")
    assert (issue.path, issue.blocking) == (pointer, True)
    assert '"0.2.0"' in issue.message
    assert issue.line is not None
    doc["schema_version"] = "0.2.0"
    assert analyze(doc).issues == []


def test_a_0_1_0_document_using_every_0_2_0_section_names_each(kdoc: dict[str, Any]) -> None:
    kdoc["schema_version"] = "0.1.0"
    found = issues_with(check(kdoc), "newer_schema_field")
    assert sorted(i.path for i in found if i.path) == ["/agents/0/knowledge_sets", "/apps", "/knowledge_sets"]


@pytest.mark.parametrize("version", ["0.3.0", "1.0.0"])
def test_later_schema_versions_are_still_refused(kdoc: dict[str, Any], version: str) -> None:
    kdoc["schema_version"] = version
    preview = check(kdoc)
    assert codes(preview) == ["unsupported_schema_version"]
    assert preview.bundle is None


# --- knowledge sets and apps ---------------------------------------------------------------------


def test_a_0_2_0_document_with_sources_and_an_app_is_clean(kdoc: dict[str, Any]) -> None:
    preview = check(kdoc)
    assert preview.issues == []
    assert [plan.entity for plan in preview.entities] == [
        "mcp:permits",
        "knowledge_set:law",
        "agent:assistant",
        "app:status",
    ]
    # The secret field that only a credential uses is used.
    assert issues_with(preview, "unused_setup_field") == []


@pytest.mark.parametrize("document", ["{}", ["root"], 3])
def test_an_app_document_must_be_a_json_object(kdoc: dict[str, Any], document: object) -> None:
    kdoc["apps"][0]["document"] = document
    preview = check(kdoc)
    issue = only_issue(preview, "invalid_document")
    assert (issue.path, issue.entity) == ("/apps/0/document", "app:status")
    assert preview.bundle is None


def test_an_app_needs_a_document(kdoc: dict[str, Any]) -> None:
    del kdoc["apps"][0]["document"]
    assert only_issue(check(kdoc), "invalid_document").path == "/apps/0/document"


@pytest.mark.parametrize(
    ("key", "field", "value"),
    [
        ("statutes-1", "bucket", "acme-docs"),
        ("statutes-1", "urls", ["https://a.example"]),
        ("s3-1", "laws", ["baugb"]),
        ("s3-1", "host", "files.example"),
        ("s3-1", "port", 22),
    ],
)
def test_a_field_of_another_source_type_is_unknown(
    kdoc: dict[str, Any], key: str, field: str, value: object
) -> None:
    source(kdoc, key)[field] = value
    preview = check(kdoc)
    issue = only_issue(preview, "unknown_field")
    assert (issue.path, issue.entity) == (f"{SOURCES}/{key}/{field}", "knowledge_set:law")
    assert issue.line is not None


def test_an_unknown_source_type_is_refused(kdoc: dict[str, Any]) -> None:
    source(kdoc, "s3-1")["type"] = "ftp"
    issue = only_issue(check(kdoc), "invalid_document")
    assert issue.path == f"{SOURCES}/s3-1"
    assert "'s3'" in issue.message and "'ris'" in issue.message


@pytest.mark.parametrize(
    ("key", "pointer"),
    [
        ("S3-1", f"{SOURCES}/S3-1"),
        ("1s3", f"{SOURCES}/1s3"),
        ("s3_1", f"{SOURCES}/s3_1"),
        ("-s3", f"{SOURCES}/-s3"),
        ("s3 1", f"{SOURCES}/s3 1"),
        ("s3/1", f"{SOURCES}/s3~11"),
        ("s" * 64, f"{SOURCES}/{'s' * 64}"),
    ],
)
def test_a_source_key_outside_the_alphabet_is_refused_at_its_path(
    kdoc: dict[str, Any], key: str, pointer: str
) -> None:
    sources = kdoc["knowledge_sets"][0]["sources"]
    sources[key] = sources.pop("statutes-1")
    issue = only_issue(check(kdoc), "invalid_source")
    assert (issue.path, issue.entity, issue.blocking) == (pointer, "knowledge_set:law", True)
    assert "[a-z][a-z0-9-]*" in issue.message


def test_a_source_key_of_63_characters_is_fine(kdoc: dict[str, Any]) -> None:
    sources = kdoc["knowledge_sets"][0]["sources"]
    sources["a" + "0-" * 31] = sources.pop("statutes-1")
    assert check(kdoc).issues == []


@pytest.mark.parametrize(("key", "field"), [("s3-1", "bucket"), ("statutes-1", "laws")])
def test_a_missing_required_source_field_is_named(kdoc: dict[str, Any], key: str, field: str) -> None:
    del source(kdoc, key)[field]
    preview = check(kdoc)
    issue = only_issue(preview, "invalid_document")
    assert issue.path == f"{SOURCES}/{key}/{field}"
    assert "required" in issue.message
    assert preview.bundle is None


@pytest.mark.parametrize(("key", "field", "empty"), [("s3-1", "bucket", ""), ("statutes-1", "laws", [])])
def test_an_empty_required_source_field_blocks(
    kdoc: dict[str, Any], key: str, field: str, empty: object
) -> None:
    source(kdoc, key)[field] = empty
    issue = only_issue(check(kdoc), "invalid_source")
    assert (issue.path, issue.blocking) == (f"{SOURCES}/{key}/{field}", True)
    assert "must not be empty" in issue.message


def test_an_sftp_port_outside_the_range_blocks(kdoc: dict[str, Any]) -> None:
    kdoc["knowledge_sets"][0]["sources"]["sftp-1"] = {"type": "sftp", "host": "files.example", "port": 70000}
    kdoc["requires"].append({"kind": "knowledge_source", "ref": "sftp:files.example", "policy": "block"})
    issue = only_issue(check(kdoc), "invalid_source")
    assert issue.path == f"{SOURCES}/sftp-1/port"


@pytest.mark.parametrize("schedule", ["every day", "61 * * * *", "0 3 * *"])
def test_an_invalid_sync_schedule_is_named(kdoc: dict[str, Any], schedule: str) -> None:
    source(kdoc, "s3-1")["sync_schedule"] = schedule
    issue = only_issue(check(kdoc), "invalid_schedule")
    assert (issue.path, issue.entity) == (f"{SOURCES}/s3-1/sync_schedule", "knowledge_set:law")
    assert "'s3-1'" in issue.message


def test_a_literal_credential_is_refused_without_repeating_it(kdoc: dict[str, Any]) -> None:
    literal = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    source(kdoc, "s3-1")["credentials"]["secret_access_key"] = literal
    preview = check(kdoc)
    issue = only_issue(preview, "credential_literal")
    assert (issue.path, issue.blocking) == (f"{SOURCES}/s3-1/credentials/secret_access_key", True)
    assert "secret_access_key" in issue.message
    assert literal not in json.dumps(preview.to_json())


def test_a_credential_from_a_non_secret_setup_field_is_refused(kdoc: dict[str, Any]) -> None:
    kdoc["setup"].append({"key": "bucket_user", "label": "Bucket user", "type": "string"})
    source(kdoc, "s3-1")["credentials"]["secret_access_key"] = "${setup.bucket_user}"
    preview = check(kdoc, setup={**SETUP, "bucket_user": "reader"})
    issue = only_issue(preview, "credential_not_secret_field")
    assert issue.path == f"{SOURCES}/s3-1/credentials/secret_access_key"
    assert "bucket_user" in issue.message


def test_a_credential_naming_an_undeclared_setup_key_is_refused(kdoc: dict[str, Any]) -> None:
    source(kdoc, "s3-1")["credentials"]["secret_access_key"] = "${setup.nope}"
    issue = only_issue(check(kdoc), "unknown_setup_reference")
    assert (issue.path, issue.blocking) == (f"{SOURCES}/s3-1/credentials/secret_access_key", True)


def test_a_website_source_warns_that_it_crawls_as_written(kdoc: dict[str, Any]) -> None:
    kdoc["knowledge_sets"][0]["sources"]["website-1"] = {"type": "website", "urls": ["https://acme.example/"]}
    preview = check(kdoc)
    issue = only_issue(preview, "source_crawled_as_written")
    assert (issue.severity, issue.path) == ("warning", f"{SOURCES}/website-1/urls")
    assert not preview.blocking


TENANT_SOURCES = [
    ({"type": "s3", "bucket": "acme-docs", "prefix": "p/"}, "bucket", "s3:acme-docs"),
    ({"type": "sftp", "host": "files.acme.example", "port": 22}, "host", "sftp:files.acme.example"),
    ({"type": "smb", "server": "fs.acme.local", "share": "docs"}, "server", "smb:fs.acme.local"),
    (
        {"type": "webdav", "base_url": "https://dav.acme.example/d"},
        "base_url",
        "webdav:https://dav.acme.example/d",
    ),
    (
        {"type": "nextcloud", "base_url": "https://cloud.acme.example"},
        "base_url",
        "nextcloud:https://cloud.acme.example",
    ),
    ({"type": "ris", "host": "ris.acme.example"}, "host", "ris:ris.acme.example"),
]


def single_source_doc(spec: dict[str, Any], requires: list[dict[str, str]]) -> dict[str, Any]:
    document = knowledge_doc()
    document["setup"] = []
    document["knowledge_sets"][0]["sources"] = {"src-1": spec}
    document["requires"] = requires
    return document


@pytest.mark.parametrize(("spec", "field", "ref"), TENANT_SOURCES, ids=lambda v: str(v))
def test_a_tenant_address_not_declared_as_a_requirement_warns(
    spec: dict[str, Any], field: str, ref: str
) -> None:
    preview = check(single_source_doc(spec, []), substitutions={}, setup={})
    issue = only_issue(preview, "tenant_address_as_written")
    assert (issue.severity, issue.path) == ("warning", f"{SOURCES}/src-1/{field}")
    assert not preview.blocking
    declared = single_source_doc(spec, [{"kind": "knowledge_source", "ref": ref, "policy": "substitute"}])
    type_ = spec["type"]
    mapped = check(declared, substitutions={f"knowledge_source:{ref}": f"{type_}:elsewhere"}, setup={})
    assert mapped.issues == []


@pytest.mark.parametrize(
    "spec", [{"type": "statutes", "laws": ["baugb"]}, {"type": "onedrive"}], ids=["statutes", "onedrive"]
)
def test_a_public_source_travels_without_a_warning(spec: dict[str, Any]) -> None:
    assert check(single_source_doc(spec, []), substitutions={}, setup={}).issues == []


def test_a_requirement_for_another_bucket_does_not_silence_the_warning(kdoc: dict[str, Any]) -> None:
    source(kdoc, "s3-1")["bucket"] = "acme-other"
    issue = only_issue(check(kdoc), "tenant_address_as_written")
    assert issue.path == f"{SOURCES}/s3-1/bucket"


def test_an_agent_naming_an_undeclared_knowledge_set_is_refused(kdoc: dict[str, Any]) -> None:
    kdoc["agents"][0]["knowledge_sets"] = ["law", "unknown"]
    issue = only_issue(check(kdoc), "unknown_reference")
    assert (issue.path, issue.entity) == ("/agents/0/knowledge_sets/1", "agent:assistant")
    assert "knowledge set 'unknown'" in issue.message


def test_an_app_naming_an_undeclared_mcp_is_refused(kdoc: dict[str, Any]) -> None:
    kdoc["apps"][0]["mcps"] = ["permits", "unknown"]
    issue = only_issue(check(kdoc), "unknown_reference")
    assert (issue.path, issue.entity) == ("/apps/0/mcps/1", "app:status")


def test_a_key_shared_by_a_knowledge_set_and_an_agent_is_refused(kdoc: dict[str, Any]) -> None:
    kdoc["agents"][0]["key"] = "law"
    issue = only_issue(check(kdoc), "duplicate_key")
    assert (issue.path, issue.entity) == ("/agents/0/key", "agent:law")
    assert "knowledge_set 'law'" in issue.message


SOURCE_LINES = """\
schema_version: "0.2.0"
name: kit
setup:
  - key: access_key
    label: Access key
    type: secret
knowledge_sets:
  - key: law
    name: Law
    sources:
      s3-1:
        type: s3
        bucket: acme-docs
        sync_schedule: "61 * * * *"
        credentials:
          access_key_id: AKIAIOSFODNN7EXAMPLE
          secret_access_key: ${setup.access_key}
      website-1:
        type: website
        urls: [https://acme.example/]
        bucket: acme-docs
requires:
  - {kind: knowledge_source, ref: "s3:acme-docs", policy: substitute}
"""


def test_source_issues_point_at_their_own_lines() -> None:
    refused = check(SOURCE_LINES)
    issue = only_issue(refused, "unknown_field")
    assert (issue.path, issue.line) == (f"{SOURCES}/website-1/bucket", 21)
    preview = check(SOURCE_LINES.replace("        bucket: acme-docs\nrequires", "requires"))
    found = {(str(i.code), i.path): i.line for i in preview.issues}
    assert found[("invalid_schedule", f"{SOURCES}/s3-1/sync_schedule")] == 14
    assert found[("credential_literal", f"{SOURCES}/s3-1/credentials/access_key_id")] == 16
    assert found[("source_crawled_as_written", f"{SOURCES}/website-1/urls")] == 20


# --- substitutions of knowledge source requirements ----------------------------------------------


@pytest.mark.parametrize("mapped", ["sftp:acme-docs", "s3:", "s3:   ", "dormagen-docs", ":dormagen-docs"])
def test_a_knowledge_source_substitution_of_the_wrong_shape_is_refused(
    kdoc: dict[str, Any], mapped: str
) -> None:
    preview = check(kdoc, substitutions={"knowledge_source:s3:acme-docs": mapped})
    issue = only_issue(preview, "substitution_invalid")
    assert (issue.path, issue.blocking) == ("/requires/0", True)


def test_a_substitution_that_changes_the_source_type_names_the_type(kdoc: dict[str, Any]) -> None:
    preview = check(kdoc, substitutions={"knowledge_source:s3:acme-docs": "sftp:files.example"})
    assert "'s3'" in only_issue(preview, "substitution_invalid").message


def test_a_substitute_knowledge_source_without_a_mapping_blocks(kdoc: dict[str, Any]) -> None:
    preview = check(kdoc, substitutions={})
    issue = only_issue(preview, "substitution_required")
    assert (issue.path, issue.blocking) == ("/requires/0", True)
    assert "knowledge_source:s3:acme-docs" in issue.message


def test_a_well_shaped_knowledge_source_substitution_raises_nothing(kdoc: dict[str, Any]) -> None:
    assert check(kdoc, substitutions={"knowledge_source:s3:acme-docs": "s3:dormagen-docs"}).issues == []


# --- the desired state of a knowledge set --------------------------------------------------------


def inputs(**extra: Any) -> Inputs:
    parsed = parse_bundle_data(knowledge_doc())
    assert parsed.bundle is not None
    return Inputs(bundle=parsed.bundle, setup=SETUP, secret_fields=frozenset({"access_key"}), **extra)


def test_a_substitution_replaces_the_bucket_alone() -> None:
    given = inputs(substitutions=MAPPED)
    desired = desired_knowledge_set(given.bundle.knowledge_sets[0], given)
    assert desired.entity == "knowledge_set:law"
    assert desired.spec["set"] == {
        "name": "Building law",
        "description": "Statutes and bylaws.",
        "data_description": "Building codes and municipal bylaws.",
    }
    assert desired.spec["sources"]["s3-1"] == {
        "type": "s3",
        "bucket": "dormagen-docs",
        "prefix": "satzungen/",
        "region": "eu-central-1",
        "endpoint": None,
        "sync_schedule": None,
        "credentials": ["access_key_id"],
    }
    assert desired.spec["sources"]["statutes-1"] == {
        "type": "statutes",
        "laws": ["baugb", "bauo-nrw"],
        "sync_schedule": "0 3 * * *",
        "credentials": [],
    }


def test_without_a_substitution_the_bucket_installs_as_written() -> None:
    given = inputs()
    desired = desired_knowledge_set(given.bundle.knowledge_sets[0], given)
    assert desired.spec["sources"]["s3-1"]["bucket"] == "acme-docs"


def test_a_stripped_requirement_drops_the_source_and_its_credentials() -> None:
    given = inputs(stripped=frozenset({"knowledge_source:s3:acme-docs"}))
    desired = desired_knowledge_set(given.bundle.knowledge_sets[0], given)
    assert list(desired.spec["sources"]) == ["statutes-1"]
    assert desired.secrets == {}


def test_credential_values_travel_as_secrets_and_the_spec_holds_only_their_names() -> None:
    given = inputs(substitutions=MAPPED)
    desired = desired_knowledge_set(given.bundle.knowledge_sets[0], given)
    assert desired.secrets == {"source:s3-1:access_key_id": ACCESS_KEY}
    assert desired.spec["sources"]["s3-1"]["credentials"] == ["access_key_id"]
    assert ACCESS_KEY not in json.dumps(desired.spec)
    assert "${setup" not in json.dumps(desired.spec)


@pytest.mark.parametrize(
    ("added", "where"),
    [
        (
            {
                "type": "website",
                "urls": ["https://ok.example/a", "https://x.example/feed?access_token=tok-1234567890"],
            },
            "urls/1",
        ),
        ({"type": "webdav", "base_url": "https://svc:Hunter2-pw@dav.example/remote.php"}, "base_url"),
    ],
)
def test_a_source_url_carrying_a_credential_is_refused_without_repeating_it(
    kdoc: dict[str, Any], added: dict[str, Any], where: str
) -> None:
    source_map = kdoc["knowledge_sets"][0]["sources"]
    source_map["extra-1"] = added
    preview = check(kdoc)
    issue = only_issue(preview, "credential_literal")
    assert issue.path == f"{SOURCES}/extra-1/{where}" and issue.blocking
    shown_json = json.dumps(preview.to_json())
    assert "Hunter2" not in shown_json and "tok-1234567890" not in shown_json


def test_a_source_url_must_be_http(kdoc: dict[str, Any]) -> None:
    kdoc["knowledge_sets"][0]["sources"]["dav-1"] = {"type": "nextcloud", "base_url": "ftp://files.example"}
    issue = only_issue(check(kdoc), "invalid_url")
    assert issue.path == f"{SOURCES}/dav-1/base_url"
