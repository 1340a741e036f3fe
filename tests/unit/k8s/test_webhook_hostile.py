"""Hostile admission reviews (issue 45): whatever the webhook cannot read it refuses, no review gets
a 5xx, no answer grows with the request, and no document costs more than linear time to judge."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bundle_operator.k8s.webhook.server import serve_webhook
from tests.documents import bundle_document
from tests.tls import throwaway_tls

pytestmark = pytest.mark.anyio

TOKEN = "ghp_" + "Zq9Xw8Vu" * 5  # a literal credential: the document must never be admitted


class NoBundles:
    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


def leaky(**sections: Any) -> dict[str, Any]:
    """A document analyze blocks: an MCP with a token written into its environment."""
    mcp = {"key": "gh", "name": "GitHub", "type": "command", "command": "npx", "env": {"GITHUB_TOKEN": TOKEN}}
    return bundle_document("kit", mcps=[mcp], **sections)


def review(kind: str, spec: Any, **request: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": kind},
        "namespace": "team",
        "operation": "CREATE",
        "object": {"metadata": {"name": "b"}, "spec": spec},
    }
    body.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


CREDENTIAL_BUNDLE = review("Bundle", {"source": {"inline": leaky()}})


class Webhook:
    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self.client = client

    async def post(self, body: dict[str, Any] | bytes) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.client.post(self.url, content=content, headers={"Content-Type": "application/json"})

    async def answer(self, body: dict[str, Any] | bytes) -> dict[str, Any]:
        response = await self.post(body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()["response"]
        return answer


@pytest.fixture
async def hook(tmp_path: Path) -> AsyncIterator[Webhook]:
    tls = throwaway_tls(tmp_path)
    (tmp_path / "tls.crt").write_bytes(tls.cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(tls.key.read_bytes())
    runner = await serve_webhook("127.0.0.1", 0, tmp_path, NoBundles(), failure_policy="Fail")
    port = runner.addresses[0][1]
    try:
        async with httpx.AsyncClient(verify=tls.client_context(), timeout=60) as client:
            yield Webhook(f"https://127.0.0.1:{port}/validate", client)
    finally:
        await runner.cleanup()


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _with(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    target = changed["request"]
    for step in path[:-1]:
        target = target[step]
    if value is _GONE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return changed


_GONE = object()

MALFORMED = {
    "kind a string": _with(CREDENTIAL_BUNDLE, ("kind",), "Bundle"),
    "installation spec a list": review("BundleInstallation", [{"bundleRef": {"name": "kit"}}]),
    "installation metadata a list": _with(
        review("BundleInstallation", {"bundleRef": {"name": "kit"}, "workspace": "w"}),
        ("object", "metadata"),
        ["b"],
    ),
    "installation bundleRef a list": review("BundleInstallation", {"bundleRef": ["kit"], "workspace": "w"}),
    "installation setup keys not strings": review(
        "BundleInstallation", {"bundleRef": {"name": "kit"}, "workspace": "w", "setup": [{"key": ["a"]}]}
    ),
    "namespace a number": _with(
        review("BundleInstallation", {"bundleRef": {"name": "k"}}), ("namespace",), 7
    ),
    "nested 300 deep in the spec": review("Bundle", {"source": {"inline": {"deep": _nested(300)}}}),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_a_malformed_review_is_refused_not_a_server_error(hook: Webhook, case: str) -> None:
    answer = await hook.answer(MALFORMED[case])
    assert answer["allowed"] is False and answer["uid"] == "u-1"
    assert answer["status"]["code"] == 422


async def test_a_body_nested_thousands_deep_is_a_400(hook: Webhook) -> None:
    body = b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": ' + (
        b"[" * 5000 + b"]" * 5000 + b"}"
    )
    response = await hook.post(body)
    assert response.status_code == 400 and "nests more than" in response.json()["error"]
    assert (await hook.answer(CREDENTIAL_BUNDLE))["allowed"] is False  # and it still serves


UNREADABLE = {
    "no operation": (("operation",), _GONE),
    "a lower-case operation": (("operation",), "create"),
    "an operation of another type": (("operation",), ["CREATE"]),
    "no object": (("object",), _GONE),
    "a null object": (("object",), None),
    "an empty kind": (("kind",), {}),
    "a lower-case kind": (
        ("kind",),
        {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": "bundle"},
    ),
    "a kind of another group": (("kind",), {"group": "apps", "version": "v1", "kind": "Bundle"}),
    "the spec subresource": (("subResource",), "spec"),
    "a subresource of another type": (("subResource",), {"name": "status"}),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
async def test_a_review_the_webhook_cannot_read_is_refused(hook: Webhook, case: str) -> None:
    path, value = UNREADABLE[case]
    answer = await hook.answer(_with(CREDENTIAL_BUNDLE, path, value))
    assert answer["allowed"] is False
    cause = answer["status"]["details"]["causes"][0]
    assert cause["reason"] == "invalid_review" and cause["field"] == "request." + path[0]
    assert TOKEN not in json.dumps(answer)


async def test_the_same_document_in_a_well_formed_review_is_refused_for_its_credential(hook: Webhook) -> None:
    answer = await hook.answer(CREDENTIAL_BUNDLE)
    assert answer["allowed"] is False
    assert "credential_literal" in [c["reason"] for c in answer["status"]["details"]["causes"]]


def _gateway_prompt(text: str) -> dict[str, Any]:
    return {
        "description": "d",
        "members": ["gh"],
        "prompts": [{"name": "p", "messages": [{"role": "user", "text": text}]}],
    }


HOSTILE_DOCUMENTS = {
    # A prompt of "{{" and spaces took cubic time in the placeholder pattern: 11.6 s at 2,500.
    "a prompt of braces and spaces": leaky(gateway=_gateway_prompt("{{" + " " * 20_000)),
    # Many "${setup." openings that never close took quadratic time: 4.2 s for sixty of these.
    "descriptions of unclosed placeholders": leaky(
        setup=[
            {"key": f"k{i}", "label": "L", "type": "string", "description": "${setup." * 1_500}
            for i in range(60)
        ]
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_DOCUMENTS))
async def test_a_document_built_to_be_slow_is_judged_in_time(hook: Webhook, case: str) -> None:
    hostile = review("Bundle", {"source": {"inline": HOSTILE_DOCUMENTS[case]}})
    plain = review("Endpoint", {})
    slow, other = await asyncio.gather(hook.answer(hostile), hook.answer(plain))
    # Judged, not timed out: the credential is what refuses it.
    reasons = [c["reason"] for c in slow["status"]["details"]["causes"]]
    assert slow["allowed"] is False and "credential_literal" in reasons, reasons
    assert other["allowed"] is False  # the review sent beside it was answered too


async def test_an_answer_stays_small_whatever_the_number_of_bad_setup_entries(hook: Webhook) -> None:
    spec = {"bundleRef": {"name": "kit"}, "workspace": "w", "setup": [0] * 131_072}
    response = await hook.post(review("BundleInstallation", spec))
    assert response.status_code == 200 and len(response.content) < 8 * 1024
    answer = response.json()["response"]
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "/spec/setup"


async def test_causes_are_capped_and_counted(hook: Webhook) -> None:
    spec = {"bundleRef": {"name": "kit"}, "workspace": "w", "setup": [0] * 150}
    answer = await hook.answer(review("BundleInstallation", spec))
    causes = answer["status"]["details"]["causes"]
    assert len(causes) == 21 and causes[-1]["reason"] == "more_issues"
    assert "130 more problems" in causes[-1]["message"]


async def test_a_long_setup_key_is_cut_short_in_the_answer(hook: Webhook) -> None:
    key = "k" * 1_000_000
    spec = {
        "bundleRef": {"name": "kit"},
        "workspace": "w",
        "setup": [{"key": key}, {"key": key, "value": "v"}],
    }
    response = await hook.post(review("BundleInstallation", spec))
    assert response.status_code == 200 and len(response.content) < 8 * 1024
    reasons = [c["reason"] for c in response.json()["response"]["status"]["details"]["causes"]]
    assert reasons == ["invalid_setup", "duplicate_setup_key"]
