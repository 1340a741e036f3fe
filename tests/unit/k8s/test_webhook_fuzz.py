"""Fuzzing the webhook's handler (issue 45): whatever a review holds, the answer is a 400 or an
AdmissionReview for its uid, never a 5xx, never larger than a bound, and a review that holds a
document with a literal credential is never allowed unless it is one the webhook is right to let
through unjudged (a delete, a status update, an update that leaves the spec alone)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_operator.k8s.webhook import server as webhook
from tests.documents import bundle_document

TOKEN = "ghp_" + "Fz7Yk2Qm" * 5
# Twenty causes of at most 512 characters, twenty warnings of 256, and the envelope.
MAX_ANSWER_BYTES = 24 * 1024

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


class NoBundles:
    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


class Posted:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def read(self) -> bytes:
        return self.body


def _leaky_review() -> dict[str, Any]:
    mcp = {"key": "gh", "name": "GitHub", "type": "command", "command": "npx", "env": {"GITHUB_TOKEN": TOKEN}}
    spec = {"source": {"inline": bundle_document("kit", mcps=[mcp])}}
    return {
        "uid": "u-1",
        "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": "Bundle"},
        "namespace": "team",
        "operation": "CREATE",
        "object": {"metadata": {"name": "kit"}, "spec": spec},
    }


# Where a mutation may land: the review's own fields and the object's parts (not the uid, whose
# absence is a 400 of its own, tested below).
PLACES = [
    ("operation",),
    ("kind",),
    ("kind", "group"),
    ("kind", "kind"),
    ("subResource",),
    ("namespace",),
    ("object",),
    ("object", "metadata"),
    ("object", "spec"),
    ("object", "spec", "source"),
    ("oldObject",),
    ("dryRun",),
]
GONE = object()
mutations = st.lists(
    st.tuples(st.sampled_from(PLACES), st.one_of(st.just(GONE), json_values)), min_size=1, max_size=3
)


def _mutated(changes: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    request = _leaky_review()
    for path, value in changes:
        target: Any = request
        for step in path[:-1]:
            target = target.get(step) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            continue
        if value is GONE:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = copy.deepcopy(value)
    return request


def _let_through_unjudged(request: dict[str, Any]) -> bool:
    """What the webhook rightly allows without judging the document."""
    operation = request.get("operation")
    if operation in ("DELETE", "CONNECT"):
        return True
    if request.get("subResource") == "status":
        return True
    obj, old = request.get("object"), request.get("oldObject")
    return (
        operation == "UPDATE"
        and isinstance(obj, dict)
        and isinstance(old, dict)
        and old.get("spec") == obj.get("spec")
    )


def _still_leaky(request: dict[str, Any]) -> bool:
    """Whether the review still carries a Bundle of our group whose inline document holds the token."""
    kind = request.get("kind")
    obj = request.get("object")
    return (
        isinstance(kind, dict)
        and kind.get("group") == "bundle-operator.dev"
        and kind.get("kind") == "Bundle"
        and isinstance(obj, dict)
        and TOKEN in json.dumps(obj.get("spec"))
    )


def _answer(body: bytes) -> tuple[int, bytes]:
    validate = webhook.handler(NoBundles(), answer_seconds=30.0, failure_policy="Fail")
    response = asyncio.run(validate(Posted(body)))
    assert response.body is not None
    return response.status, bytes(response.body)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=mutations)
def test_a_mutated_review_never_lets_a_literal_credential_in(
    changes: list[tuple[tuple[str, ...], Any]],
) -> None:
    request = _mutated(changes)
    envelope = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    status, body = _answer(json.dumps(envelope).encode())
    assert status == 200 and len(body) <= MAX_ANSWER_BYTES
    answer = json.loads(body)["response"]
    assert answer["uid"] == "u-1"
    assert TOKEN not in body.decode()
    if answer["allowed"]:
        assert _let_through_unjudged(request) or not _still_leaky(request), json.dumps(request)[:3000]


@settings(max_examples=150, deadline=None)
@given(setup=st.lists(json_values, max_size=300), ref=json_values, workspace=json_values)
def test_an_installation_of_any_shape_gets_a_bounded_answer(setup: Any, ref: Any, workspace: Any) -> None:
    request = {
        "uid": "u-2",
        "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": "BundleInstallation"},
        "namespace": "team",
        "operation": "CREATE",
        "object": {
            "metadata": {"name": "i"},
            "spec": {"bundleRef": ref, "workspace": workspace, "setup": setup},
        },
    }
    envelope = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    status, body = _answer(json.dumps(envelope).encode())
    assert status == 200 and len(body) <= MAX_ANSWER_BYTES
    assert json.loads(body)["response"]["uid"] == "u-2"


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_body_is_a_400_or_an_answer_never_a_server_error(body: bytes) -> None:
    status, answer = _answer(body)
    assert status in (200, 400), answer
    if status == 400:
        assert "error" in json.loads(answer)
