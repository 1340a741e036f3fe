"""What the validating webhook answers, request by request (DESIGN.md §9.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bundle_operator.k8s.webhook.admission import admission_response, review
from tests.documents import bundle_document

pytestmark = pytest.mark.anyio

TOKEN = "ghp_" + "A1b2C3d4" * 5  # a literal credential: never repeated in an answer
GOOD = bundle_document(
    "kit",
    setup=[
        {"key": "token", "label": "Token", "type": "secret"},
        {"key": "org", "label": "Org", "type": "string"},
    ],
    mcps=[
        {"key": "gh", "name": "GitHub", "type": "command", "command": "npx", "env": {"T": "${setup.token}"}}
    ],
    agents=[{"key": "bot", "name": "Bot", "mcps": ["gh"]}],
)


class Bundles:
    """Bundles by name, as the API server would return them."""

    def __init__(self, **bundles: dict[str, Any]) -> None:
        self.bundles = bundles

    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        assert plural == "bundles"
        return self.bundles.get(name)


def request(kind: str, spec: Any, operation: str = "CREATE", **extra: Any) -> dict[str, Any]:
    obj = {
        "apiVersion": "bundle-operator.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x"},
        "spec": spec,
    }
    return {
        "uid": "u-1",
        "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": kind},
        "namespace": "team",
        "operation": operation,
        "object": obj,
        **extra,
    }


def inline(document: dict[str, Any]) -> dict[str, Any]:
    return {"source": {"inline": document}}


async def test_a_bundle_analyze_accepts_is_admitted_without_its_setup_values() -> None:
    verdict = await review(request("Bundle", inline(GOOD)), Bundles())
    assert verdict.allowed and verdict.causes == []


async def test_blocking_issues_are_refused_with_code_and_path_in_every_cause() -> None:
    broken = bundle_document(
        "kit", agents=[{"key": "bot", "name": "Bot", "mcps": ["nowhere"], "skills": ["none"]}]
    )
    verdict = await review(request("Bundle", inline(broken)), Bundles())
    assert not verdict.allowed
    assert [(c["reason"], c["field"]) for c in verdict.causes] == [
        ("unknown_reference", "/agents/0/mcps/0"),
        ("unknown_reference", "/agents/0/skills/0"),
    ]
    assert all(c["message"].startswith(c["reason"] + ": ") for c in verdict.causes)
    answer = admission_response("u-1", verdict)["response"]
    assert answer["allowed"] is False and answer["uid"] == "u-1"
    assert answer["status"]["code"] == 422 and answer["status"]["reason"] == "Invalid"
    assert answer["status"]["message"].startswith("unknown_reference at /agents/0/mcps/0: ")


async def test_a_literal_credential_is_refused_without_its_value() -> None:
    leaky = bundle_document(
        "kit",
        mcps=[
            {
                "key": "gh",
                "name": "GitHub",
                "type": "command",
                "command": "npx",
                "env": {"GITHUB_TOKEN": TOKEN},
            }
        ],
    )
    verdict = await review(request("Bundle", inline(leaky)), Bundles())
    assert not verdict.allowed
    assert "credential_literal" in [c["reason"] for c in verdict.causes]
    assert TOKEN not in json.dumps(admission_response("u-1", verdict))


async def test_warnings_are_admitted_and_returned_for_kubectl() -> None:
    unused = bundle_document("kit", setup=[{"key": "org", "label": "Org", "type": "string"}])
    verdict = await review(request("Bundle", inline(unused)), Bundles())
    assert verdict.allowed, verdict.causes
    assert verdict.warnings == [
        "unused_setup_field at /setup/0/key: setup field 'org' is declared but nothing refers to it"
    ]
    assert admission_response("u-1", verdict)["response"]["warnings"] == verdict.warnings


async def test_an_inline_document_over_the_size_limit_is_refused() -> None:
    content = "---\nname: s\ndescription: d\n---\n" + "x" * 6000
    huge = bundle_document(
        "kit", skills=[{"key": f"s{i}", "source_type": "inline", "content": content} for i in range(1000)]
    )
    verdict = await review(request("Bundle", inline(huge)), Bundles())
    assert [c["reason"] for c in verdict.causes] == ["document_too_large"]


async def test_other_sources_get_shape_checks_only() -> None:
    ref = {"source": {"configMapRef": {"name": "doc", "key": "bundle.yaml"}}}
    assert (await review(request("Bundle", ref), Bundles())).allowed
    both = {"source": {"inline": GOOD, "configMapRef": {"name": "doc", "key": "bundle.yaml"}}}
    verdict = await review(request("Bundle", both), Bundles())
    assert not verdict.allowed and verdict.causes[0]["reason"] == "invalid_source"


async def test_deletes_status_and_metadata_only_updates_are_never_judged() -> None:
    broken = inline(bundle_document("kit", agents=[{"key": "bot", "name": "Bot", "mcps": ["nowhere"]}]))
    for operation in ("DELETE", "CONNECT"):
        assert (await review(request("Bundle", broken, operation), Bundles())).allowed
    status = request("Bundle", broken, "UPDATE", subResource="status")
    assert (await review(status, Bundles())).allowed
    old = request("Bundle", broken)["object"]
    finalizer_gone = request("Bundle", broken, "UPDATE", oldObject=old)
    assert (await review(finalizer_gone, Bundles())).allowed


def installation(*setup: dict[str, Any]) -> dict[str, Any]:
    return {"bundleRef": {"name": "kit"}, "workspace": "team", "setup": list(setup)}


RESOLVED = {
    "status": {
        "setupFields": [
            {"key": "token", "label": "Token", "type": "secret", "required": True},
            {"key": "org", "label": "Org", "type": "string", "required": False},
        ]
    }
}


async def test_an_installation_is_refused_for_what_is_known_wrong_without_the_platform() -> None:
    ref = {"secretKeyRef": {"name": "creds", "key": "token"}}
    both = installation({"key": "token", "value": "hunter2hunter2", **ref})
    twice = installation({"key": "org", "value": "a"}, {"key": "org", "value": "b"})
    verdict = await review(request("BundleInstallation", both), Bundles(kit=RESOLVED))
    assert [(c["reason"], c["field"]) for c in verdict.causes] == [("invalid_setup", "/spec/setup/0")]
    assert "hunter2hunter2" not in json.dumps(admission_response("u", verdict))
    verdict = await review(request("BundleInstallation", twice), Bundles(kit=RESOLVED))
    assert [(c["reason"], c["field"]) for c in verdict.causes] == [("duplicate_setup_key", "/spec/setup/1")]
    unknown = installation({"key": "region", "value": "eu"}, {"key": "token", "value": "s3cr3t-value"})
    verdict = await review(request("BundleInstallation", unknown), Bundles(kit=RESOLVED))
    assert [(c["reason"], c["field"]) for c in verdict.causes] == [
        ("unknown_setup_key", "/spec/setup/0"),
        ("secret_as_value", "/spec/setup/1"),
    ]
    assert "s3cr3t-value" not in json.dumps(admission_response("u", verdict))


async def test_an_installation_of_a_bundle_not_there_yet_is_admitted() -> None:
    unknown = installation({"key": "region", "value": "eu"})
    assert (await review(request("BundleInstallation", unknown), Bundles())).allowed
    assert (await review(request("BundleInstallation", unknown), Bundles(kit={"status": {}}))).allowed


async def test_an_endpoint_gets_shape_checks() -> None:
    good = {"installationRef": {"name": "inst"}, "credentialsSecretName": "key"}
    assert (await review(request("Endpoint", good), Bundles())).allowed
    verdict = await review(request("Endpoint", {"installationRef": {}}), Bundles())
    assert not verdict.allowed and verdict.causes[0]["reason"] == "invalid_spec"
