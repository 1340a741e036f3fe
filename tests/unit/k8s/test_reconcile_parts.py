"""The pure pieces the reconcilers are built from: kstatus conditions, setup values from Secrets,
the state record's encoding, drift intervals, and kopf's diff base without the inline document."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from typing import Any

import kopf
import pytest

from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.record import Record, secret_hash
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.diff_base import SpecDiffBase
from bundle_operator.k8s.installation.drift_clock import parse_interval
from bundle_operator.k8s.installation.setup import SetupProblem, read_setup, referenced_secrets
from bundle_operator.k8s.installation.state import (
    decode_record,
    encode_record,
    projected_size,
    state_secret_name,
)
from bundle_operator.k8s.resources import BundleInstallationSpec
from tests.documents import bundle_document

BUNDLE = parse_bundle_text(
    """
schema_version: "0.1.0"
name: demo
setup:
  - {key: token, label: Token, type: secret}
  - {key: org, label: Org, type: string}
mcps:
  - key: api
    name: API
    type: url
    endpoint_url: https://mcp.example.com/api
    headers: {Authorization: "Bearer ${setup.token}"}
agents:
  - {key: bot, name: Bot, mcps: [api]}
"""
).bundle
assert BUNDLE is not None


class Secrets:
    """Secrets by name, as the API returns them (data base64)."""

    def __init__(self, **secrets: dict[str, bytes]) -> None:
        self.secrets = {
            name: {"data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
            for name, data in secrets.items()
        }

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.secrets.get(name)


def spec(*setup: dict[str, Any]) -> BundleInstallationSpec:
    return BundleInstallationSpec.model_validate(
        {"bundleRef": {"name": "demo"}, "workspace": "ws", "setup": setup}
    )


def test_last_transition_time_moves_only_when_the_status_changes() -> None:
    first = cond.merge_conditions(None, cond.ready("Installed", "ok"), 1, now="2026-01-01T00:00:00Z")
    same = cond.merge_conditions(first, cond.ready("Installed", "still ok"), 2, now="2026-01-02T00:00:00Z")
    ready = next(c for c in same if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert ready["message"] == "still ok" and ready["observedGeneration"] == 2
    flipped = cond.merge_conditions(same, cond.stalled("Blocked", "fix it"), 3, now="2026-01-03T00:00:00Z")
    ready = next(c for c in flipped if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["lastTransitionTime"] == "2026-01-03T00:00:00Z"
    # Other conditions are kept, and the kstatus ones come first.
    with_domain = cond.merge_conditions(flipped, [cond.true("Drifted", "DriftDetected", "x")], 3)
    assert [c["type"] for c in with_domain][:3] == ["Ready", "Reconciling", "Stalled"]
    assert {c["type"] for c in with_domain} == {"Ready", "Reconciling", "Stalled", "Drifted"}


def test_setup_values_come_from_secrets_and_literals() -> None:
    secrets = Secrets(creds={"token": b"s3cr3t-token-value"})
    values = asyncio.run(
        read_setup(
            spec(
                {"key": "token", "secretKeyRef": {"name": "creds", "key": "token"}},
                {"key": "org", "value": "acme"},
            ),
            BUNDLE,
            "ns",
            secrets,
        )
    )
    assert values == {"token": "s3cr3t-token-value", "org": "acme"}


@pytest.mark.parametrize(
    ("item", "reason", "named"),
    [
        ({"key": "token", "value": "literal-token"}, "SecretValueInSpec", "spec.setup[key=token]"),
        (
            {"key": "token", "secretKeyRef": {"name": "missing", "key": "token"}},
            "SecretNotFound",
            "'missing'",
        ),
        ({"key": "token", "secretKeyRef": {"name": "creds", "key": "other"}}, "SecretKeyNotFound", "'other'"),
        (
            {"key": "token", "secretKeyRef": {"name": "binary", "key": "token"}},
            "InvalidSecretValue",
            "'binary'",
        ),
    ],
)
def test_a_setup_value_that_cannot_be_had_names_the_field_never_the_value(
    item: dict[str, Any], reason: str, named: str
) -> None:
    secrets = Secrets(creds={"token": b"x"}, binary={"token": b"\xff\xfe"})
    with pytest.raises(SetupProblem) as problem:
        asyncio.run(read_setup(spec(item), BUNDLE, "ns", secrets))
    assert problem.value.reason == reason
    assert named in problem.value.message
    assert "literal-token" not in problem.value.message


def test_referenced_secrets_cover_setup_and_the_platform_token() -> None:
    raw = {
        "setup": [{"key": "a", "secretKeyRef": {"name": "one", "key": "k"}}, {"key": "b", "value": "v"}],
        "platform": {"url": "https://p", "tokenSecretRef": {"name": "two", "key": "token"}},
    }
    assert referenced_secrets(raw) == {"one", "two"}
    assert referenced_secrets({"setup": "not a list of objects"}) == set()


def test_the_record_round_trips_compressed_with_its_hmac_key() -> None:
    record = Record(installation="k8s/ns/name/uid", workspace="ws")
    hashed = secret_hash(record, "value")
    encoded = encode_record(record)
    back = decode_record({"record.json.gz": base64.b64encode(encoded).decode()})
    assert back == record and secret_hash(back, "value") == hashed
    # A record written by an operator that stored it uncompressed still reads.
    plain = json.dumps(record.model_dump(mode="json")).encode()
    assert decode_record({"record.json": base64.b64encode(plain).decode()}) == record
    # The key differs per record: one value hashes differently in two installations.
    assert secret_hash(Record(installation="other", workspace="ws"), "value") != hashed
    assert "value" not in encoded.decode("latin-1")


def test_projected_size_grows_with_what_will_be_written() -> None:
    record = Record(installation="i", workspace="w")
    small = projected_size(record, [{"content": "a"}])
    large = projected_size(record, [{"content": secrets.token_hex(100_000)}])
    assert large > small * 100


def test_state_secret_names_stay_within_the_limit() -> None:
    assert state_secret_name("triage") == "triage-bundle-state"
    long = state_secret_name("x" * 253)
    assert len(long) <= 253 and long.endswith("-bundle-state")
    assert state_secret_name("x" * 253) != state_secret_name("x" * 252 + "y")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0), ("1s", 5.0), (None, 300.0), ("", 300.0)],
)
def test_drift_intervals(text: str | None, seconds: float) -> None:
    assert parse_interval(text) == seconds


def test_kopf_diff_base_keeps_a_hash_of_the_inline_document_not_the_document() -> None:
    storage = SpecDiffBase(prefix="kopf.bundle-operator.dev", key="last-handled-configuration")
    document = bundle_document("big", version=None, description="x" * 1_000_000)
    body = {
        "apiVersion": "v1",
        "kind": "Bundle",
        "metadata": {"name": "b"},
        "spec": {"source": {"inline": document}},
    }
    essence = storage.build(body=kopf.Body(body))
    stored = json.dumps(essence)
    assert len(stored) < 1000
    changed = {**body, "spec": {"source": {"inline": {**document, "description": "y"}}}}
    assert storage.build(body=kopf.Body(changed)) != essence
    assert storage.build(body=kopf.Body(body)) == essence


def test_kopf_diff_base_keeps_no_setup_value_yet_changes_when_one_does() -> None:
    storage = SpecDiffBase(prefix="kopf.bundle-operator.dev", key="last-handled-configuration")
    token = "github_pat_TYPED_INTO_THE_SPEC_by_mistake"

    def body(value: str, generation: int) -> kopf.Body:
        return kopf.Body(
            {
                "kind": "BundleInstallation",
                "metadata": {"name": "i", "generation": generation},
                "spec": {
                    "workspace": "w",
                    "setup": [
                        {"key": "github_token", "value": value},
                        {"key": "chat", "secretKeyRef": {"name": "s", "key": "chat"}},
                    ],
                },
            }
        )

    essence = storage.build(body=body(token, 3))
    assert token not in json.dumps(essence)
    assert essence["spec"]["setup"][1] == {"key": "chat", "secretKeyRef": {"name": "s", "key": "chat"}}
    # Another value is another generation of the spec: kopf sees a change and the handler runs.
    assert storage.build(body=body("github_pat_OTHER", 4)) != essence
    # A metadata-only change (same generation) is no change.
    assert storage.build(body=body(token, 3)) == essence


def test_kopf_diff_base_of_a_whole_object_is_kopfs_own_essence() -> None:
    """The essence is built from the spec, labels and annotations alone (kopf would deep-copy the
    status and managedFields first): the same essence as kopf's, so no change is missed or invented."""
    prefix, key = "kopf.bundle-operator.dev", "last-handled-configuration"
    body = kopf.Body(
        {
            "apiVersion": "bundle-operator.dev/v1alpha1",
            "kind": "BundleInstallation",
            "metadata": {
                "name": "i",
                "namespace": "ns",
                "generation": 3,
                "resourceVersion": "42",
                "labels": {"team": "a"},
                "annotations": {
                    "bundle-operator.dev/inputs-changed": "Secret/s@7",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    f"{prefix}/{key}": '{"spec": {}}',
                },
                "finalizers": ["bundle-operator.dev/finalizer"],
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:workspace": {}}}}],
            },
            "spec": {"workspace": "w", "bundleRef": {"name": "b"}, "driftPolicy": {"interval": "5m"}},
            "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    ours = SpecDiffBase(prefix=prefix, key=key).build(body=body)
    assert ours == kopf.AnnotationsDiffBaseStorage(prefix=prefix, key=key).build(body=body)
    assert ours == {
        "spec": {"workspace": "w", "bundleRef": {"name": "b"}, "driftPolicy": {"interval": "5m"}},
        "metadata": {
            "labels": {"team": "a"},
            "annotations": {"bundle-operator.dev/inputs-changed": "Secret/s@7"},
        },
    }
    ours["spec"]["workspace"] = "changed"
    assert body["spec"]["workspace"] == "w", "the essence is a copy"
