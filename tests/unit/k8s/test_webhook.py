"""The webhook's HTTPS server: AdmissionReviews answered, bad bodies refused with 400 or 413 and
the server still serving, certificates reloaded without a restart, a slow answer judged by the
failure policy, and hostile reviews refused without slowing the others."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bundle_operator.k8s.process.metrics import Metrics
from bundle_operator.k8s.webhook import server as webhook
from bundle_operator.k8s.webhook.certs import make_pair
from bundle_operator.k8s.webhook.server import MAX_BODY_BYTES, serve_webhook
from tests.documents import bundle_document
from tests.tls import TlsFiles, throwaway_tls

pytestmark = pytest.mark.anyio


class NoBundles:
    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


def review_of(spec: dict[str, Any], uid: str = "abc") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": "Bundle"},
            "namespace": "team",
            "operation": "CREATE",
            "object": {"metadata": {"name": "b"}, "spec": spec},
        },
    }


BROKEN = {"source": {"inline": bundle_document("kit", agents=[{"key": "bot", "name": "Bot", "mcps": ["x"]}])}}


class Served:
    def __init__(self, url: str, tls: TlsFiles) -> None:
        self.url = url
        self.tls = tls

    async def post(self, content: bytes, ca: ssl.SSLContext | None = None) -> httpx.Response:
        async with httpx.AsyncClient(verify=ca or self.tls.client_context(), timeout=30) as client:
            return await client.post(self.url, content=content, headers={"Content-Type": "application/json"})


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    tls = throwaway_tls(tmp_path)
    (tmp_path / "tls.crt").write_bytes(tls.cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(tls.key.read_bytes())
    runner = await serve_webhook("127.0.0.1", 0, tmp_path, NoBundles(), reload_every=0.05)
    port = runner.addresses[0][1]
    try:
        yield Served(f"https://127.0.0.1:{port}/validate", tls)
    finally:
        await runner.cleanup()


async def test_a_review_is_answered_for_its_uid(served: Served) -> None:
    answer = await served.post(json.dumps(review_of(BROKEN, uid="u-42")).encode())
    assert answer.status_code == 200
    body = answer.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == "u-42" and body["response"]["allowed"] is False
    assert body["response"]["status"]["details"]["causes"][0]["field"] == "/agents/0/mcps/0"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xff\xfe not utf-8", "not UTF-8"),
        (b"{not json", "not JSON"),
        (b'{"kind": "Pod"}', "not an AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1"}', "admission.k8s.io/v1"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}', "uid"),
    ],
)
async def test_a_malformed_body_is_a_400_and_the_server_keeps_serving(
    served: Served, content: bytes, said: str
) -> None:
    answer = await served.post(content)
    assert answer.status_code == 400 and said in answer.json()["error"]
    assert (await served.post(json.dumps(review_of(BROKEN)).encode())).status_code == 200


async def test_a_huge_body_is_refused_and_the_server_keeps_serving(served: Served) -> None:
    answer = await served.post(b" " * (MAX_BODY_BYTES + 1))
    assert answer.status_code == 413
    assert (await served.post(json.dumps(review_of(BROKEN)).encode())).status_code == 200


async def test_a_new_certificate_is_served_without_a_restart(served: Served, tmp_path: Path) -> None:
    (tmp_path / "next").mkdir()
    fresh = throwaway_tls(tmp_path / "next", "next CA")
    directory = served.tls.cert.parent
    (directory / "tls.key").write_bytes(fresh.key.read_bytes())
    (directory / "tls.crt").write_bytes(fresh.cert.read_bytes())

    async def trusted_by_the_new_ca() -> bool:
        try:
            return (
                await served.post(json.dumps(review_of(BROKEN)).encode(), fresh.client_context())
            ).is_success
        except httpx.ConnectError:
            return False

    for _ in range(100):
        if await trusted_by_the_new_ca():
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the new certificate was not served")
    with pytest.raises(httpx.ConnectError):
        await served.post(json.dumps(review_of(BROKEN)).encode())  # the old CA no longer matches


class Posted:
    """A request as the handler reads it."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def read(self) -> bytes:
        return self.body


async def _slowly(request: dict[str, Any], bundles: Any) -> Any:
    await asyncio.sleep(1)


async def test_an_analysis_out_of_time_is_refused_under_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webhook, "review", _slowly)
    validate = webhook.handler(NoBundles(), answer_seconds=0.01, failure_policy="Fail")
    answer = json.loads((await validate(Posted(json.dumps(review_of(BROKEN)).encode()))).body)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["reason"] == "not_analyzed_in_time"
    assert "failurePolicy is Fail" in answer["status"]["message"]


async def test_an_analysis_out_of_time_is_admitted_with_a_warning_under_ignore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(webhook, "review", _slowly)
    validate = webhook.handler(NoBundles(), answer_seconds=0.01, failure_policy="Ignore")
    answer = json.loads((await validate(Posted(json.dumps(review_of(BROKEN)).encode()))).body)["response"]
    assert answer["allowed"] is True and "not analyzed at admission in time" in answer["warnings"][0]


async def test_a_review_that_fails_inside_is_refused_without_its_contents(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: dict[str, Any], bundles: Any) -> Any:
        raise KeyError("ghp_secretvalue")

    monkeypatch.setattr(webhook, "review", broken)
    validate = webhook.handler(NoBundles())
    answer = json.loads((await validate(Posted(json.dumps(review_of(BROKEN)).encode()))).body)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["reason"] == "invalid_review"
    assert "ghp_secretvalue" not in caplog.text and "KeyError" in caplog.text


def test_the_answer_comes_a_second_before_the_api_servers_timeout() -> None:
    assert webhook.answer_seconds(5) == 4.0
    assert webhook.answer_seconds(30) == 29.0
    assert 0 < webhook.answer_seconds(1) < 1


async def test_reviews_beyond_the_slots_are_turned_away_for_the_failure_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = asyncio.Event()

    async def held(request: dict[str, Any], bundles: Any) -> Any:
        started.set()
        await asyncio.sleep(5)

    monkeypatch.setattr(webhook, "review", held)
    monkeypatch.setattr(webhook, "REVIEWS_AT_ONCE", 1)
    validate = webhook.handler(NoBundles(), answer_seconds=0.4, failure_policy="Fail")
    body = json.dumps(review_of(BROKEN)).encode()
    first = asyncio.create_task(validate(Posted(body)))
    await started.wait()
    second = await validate(Posted(body))
    # Never read: the API server applies the failure policy to the 429, as to no answer.
    assert second.status == 429
    answer = json.loads((await first).body)["response"]
    assert answer["allowed"] is False  # the first, out of time, is refused under Fail
    third = json.loads((await validate(Posted(body))).body)["response"]
    assert third["status"]["details"]["causes"][0]["reason"] == "not_analyzed_in_time"  # slot freed


# --- metrics ---------------------------------------------------------------------------------------

REVIEWS = "bundle_operator_admission_reviews"
EXPIRY = "bundle_operator_webhook_certificate_expiry_timestamp_seconds"
GOOD = {"source": {"inline": bundle_document("kit", agents=[{"key": "bot", "name": "Bot"}])}}


def scrape(metrics: Metrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The /metrics text as family -> sorted labels of a sample -> value."""
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for s in family.samples:
            found.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return found


def reviews(kind: str, operation: str, result: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"kind": kind, "operation": operation, "result": result}.items()))


async def test_admission_reviews_are_counted_by_kind_operation_and_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    metrics = Metrics(CollectorRegistry())
    validate = webhook.handler(NoBundles(), metrics=metrics)
    before = scrape(metrics)[f"{REVIEWS}_total"]
    # Every kind's series is there before the first review, so rate() works from the start.
    assert before[reviews("Bundle", "CREATE", "error")] == 0
    assert before[reviews("Endpoint", "UPDATE", "denied")] == 0

    allowed = json.loads((await validate(Posted(json.dumps(review_of(GOOD)).encode()))).body)["response"]
    denied = json.loads((await validate(Posted(json.dumps(review_of(BROKEN)).encode()))).body)["response"]
    assert (allowed["allowed"], denied["allowed"]) == (True, False)

    async def broken(request: dict[str, Any], bundles: Any) -> Any:
        raise KeyError("inside")

    monkeypatch.setattr(webhook, "review", broken)
    failed = json.loads((await validate(Posted(json.dumps(review_of(GOOD)).encode()))).body)["response"]
    assert failed["allowed"] is False
    not_a_review = await validate(Posted(b'{"kind": "Pod"}'))
    assert not_a_review.status == 400

    after = scrape(metrics)
    counted = after[f"{REVIEWS}_total"]
    assert counted[reviews("Bundle", "CREATE", "allowed")] == 1
    assert counted[reviews("Bundle", "CREATE", "denied")] == 1
    assert counted[reviews("Bundle", "CREATE", "error")] == 1
    assert counted[reviews("other", "other", "error")] == 1
    assert sum(counted.values()) == 4
    durations = after["bundle_operator_admission_review_duration_seconds_count"]
    assert durations[(("kind", "Bundle"),)] == 3 and durations[(("kind", "other"),)] == 1


def not_after(certificate: Path) -> float:
    return x509.load_pem_x509_certificate(certificate.read_bytes()).not_valid_after_utc.timestamp()


async def test_the_certificate_expiry_is_the_served_ones_and_follows_a_reload(tmp_path: Path) -> None:
    metrics = Metrics(CollectorRegistry())
    assert EXPIRY not in scrape(metrics)  # no webhook, no series
    tls = throwaway_tls(tmp_path)
    (tmp_path / "tls.crt").write_bytes(tls.cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(tls.key.read_bytes())
    runner = await serve_webhook("127.0.0.1", 0, tmp_path, NoBundles(), reload_every=0.05, metrics=metrics)
    try:
        assert scrape(metrics)[EXPIRY][()] == not_after(tls.cert)
        # The operator's own pair, as certs.py renews it, valid from another day.
        later = make_pair(
            "bundle-operator-webhook", "ops", datetime.datetime(2031, 5, 1, tzinfo=datetime.UTC)
        )
        (tmp_path / "tls.key").write_bytes(later["tls.key"])
        (tmp_path / "tls.crt").write_bytes(later["tls.crt"])
        expected = not_after(tmp_path / "tls.crt")
        assert expected != not_after(tls.cert)
        for _ in range(100):
            if scrape(metrics)[EXPIRY][()] == expected:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the reloaded certificate's expiry was not reported")
    finally:
        await runner.cleanup()
