"""The validating webhook's HTTPS server: ``POST /validate`` in every replica, leader or not.

It serves ``DIR/tls.crt`` and ``DIR/tls.key`` (cert-manager's names) and loads them again when
they change, for new connections, without a restart. A request that is not an AdmissionReview
gets a 400 naming what is wrong; a body over ``MAX_BODY_BYTES`` a 413. What the webhook cannot
judge it answers the way the webhook configuration's ``failurePolicy`` would have the API server
answer: an analysis that takes longer than ``ANSWER_SECONDS`` is refused under ``Fail`` and
admitted with a warning under ``Ignore`` (the operator still judges it in status), before the API
server's own timeout. A review it cannot read, or that fails inside, is refused.

Every answer is counted in ``admission_reviews_total`` and timed (``result="error"`` for a review
it could not read or judge), and each certificate it loads sets
``webhook_certificate_expiry_timestamp_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography import x509

from bundle_operator.k8s.process.metrics import METRICS, AdmissionResult, Metrics
from bundle_operator.k8s.webhook.admission import (
    ANALYSIS,
    BundleReader,
    Verdict,
    admission_response,
    review,
    unreadable,
)

log = logging.getLogger(__name__)

PATH = "/validate"
# An AdmissionReview holds the object and, on update, the old one; an inline document is at most
# 5 MiB as text, and the API server stores far less than this.
MAX_BODY_BYTES = 16 * 1024 * 1024
# The webhook configuration's timeoutSeconds by default (the chart's value); answer a second before.
WEBHOOK_TIMEOUT_SECONDS = 5
ANSWER_SECONDS = 4.0
RELOAD_SECONDS = 2.0
# An inline document nests at most 64 levels (document/source.py) under a handful of the review's
# own; deeper is refused before anything walks it.
MAX_REVIEW_DEPTH = 96
FAILURE_POLICIES = ("Fail", "Ignore")
# Reviews read and judged at once; more wait for a slot (a flood of 16 MiB bodies would otherwise
# hold gigabytes). The analysis itself runs on admission's own two threads.
REVIEWS_AT_ONCE = 8
NOT_IN_TIME = "not analyzed at admission in time"
# Refusals that are no judgement of the object: the review could not be read or judged.
FAILED_REVIEW_REASONS = frozenset({"invalid_review", "not_analyzed_in_time"})


@dataclass
class ServingCertificate:
    """The certificate and key files of a directory, loaded into one server TLS context."""

    directory: Path
    context: ssl.SSLContext
    loaded: tuple[float, float] = (0.0, 0.0)
    metrics: Metrics = field(default=METRICS, repr=False)

    @classmethod
    def load(cls, directory: Path, metrics: Metrics = METRICS) -> ServingCertificate:
        """A TLS context serving the directory's tls.crt and tls.key; fails when they are unusable."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        serving = cls(directory, context, metrics=metrics)
        serving.reload()
        return serving

    def _stamp(self) -> tuple[float, float]:
        return ((self.directory / "tls.crt").stat().st_mtime, (self.directory / "tls.key").stat().st_mtime)

    def reload(self) -> bool:
        """Load the files again if they changed since the last load; True when they were loaded."""
        stamp = self._stamp()
        if stamp == self.loaded:
            return False
        # New handshakes use the new chain; connections already open keep theirs.
        self.context.load_cert_chain(self.directory / "tls.crt", self.directory / "tls.key")
        self.loaded = stamp
        self._report_expiry()
        return True

    def _report_expiry(self) -> None:
        # The first certificate of tls.crt is the one served (the rest is its chain). Read after the
        # load: a file replaced in between changes the stamp and is loaded, and read, again.
        try:
            served = x509.load_pem_x509_certificate((self.directory / "tls.crt").read_bytes())
        except (OSError, ValueError) as exc:
            log.warning("webhook certificate in %s loaded, but its expiry not read: %s", self.directory, exc)
            return
        self.metrics.webhook_certificate_expiry.set(served.not_valid_after_utc.timestamp())

    async def follow(self, every: float = RELOAD_SECONDS) -> None:
        """Reload whenever the files change; a half-written pair is tried again next time."""
        while True:
            await asyncio.sleep(every)
            try:
                if self.reload():
                    log.info("webhook certificate reloaded from %s", self.directory)
            except (OSError, ssl.SSLError) as exc:
                log.warning("webhook certificate in %s not loaded yet: %s", self.directory, exc)


def _bad_request(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)


def answer_seconds(timeout_seconds: int) -> float:
    """How long a review may take when the API server waits ``timeout_seconds`` for the answer."""
    return max(timeout_seconds - 1.0, timeout_seconds * 0.6)


def _depth(value: Any) -> int:
    """How deep lists and objects nest in ``value``, walked without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            if depth > MAX_REVIEW_DEPTH:
                return depth
            deepest = max(deepest, depth)
            items = current.values() if isinstance(current, dict) else current
            stack.extend((item, depth + 1) for item in items)
    return deepest


def _not_in_time(failure_policy: str) -> Verdict:
    """What an analysis that ran out of time gets: what the API server's failure policy would give."""
    if failure_policy == "Ignore":
        return Verdict(warnings=[f"{NOT_IN_TIME}; the operator reports it in status"])
    verdict = Verdict()
    verdict.refuse(
        "not_analyzed_in_time",
        "/",
        f"{NOT_IN_TIME} (the webhook's failurePolicy is Fail); try again, or run bundlectl analyze on "
        "the document",
    )
    return verdict


async def _judge(
    review_request: dict[str, Any], bundles: BundleReader, answer_seconds: float, failure_policy: str
) -> Verdict:
    try:
        return await asyncio.wait_for(review(review_request, bundles), answer_seconds)
    except TimeoutError:
        log.warning("an admission review was not analyzed within %.1f s", answer_seconds)
        return _not_in_time(failure_policy)
    except Exception as exc:
        # Logged by type only: the review holds the user's document, credentials included.
        log.error("an admission review failed: %s", type(exc).__name__)
        return unreadable("request", "the webhook could not read this review")


@dataclass(frozen=True)
class _Read:
    """A body read as a review: its request, or why it cannot be judged.

    Without a ``uid`` the problem is a 400; with one, a refusal for that uid.
    """

    request: dict[str, Any] | None = None
    problem: str = ""
    uid: str | None = None


def _read(raw: bytes) -> _Read:
    """The review request of a body; run off the event loop, since a body may be 16 MiB of JSON."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return _Read(problem="the body is not UTF-8 text")
    except RecursionError:
        return _Read(problem=f"the body nests more than {MAX_REVIEW_DEPTH} levels deep")
    except ValueError:
        return _Read(problem="the body is not JSON")
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
        return _Read(problem="the body is not an AdmissionReview")
    if body.get("apiVersion") != "admission.k8s.io/v1":
        return _Read(problem="only admission.k8s.io/v1 AdmissionReviews are answered")
    review_request = body.get("request")
    if not isinstance(review_request, dict) or not isinstance(review_request.get("uid"), str):
        return _Read(problem="the AdmissionReview has no request with a uid")
    if _depth(review_request) > MAX_REVIEW_DEPTH:
        # A refusal for its uid, not a 400: the API server would apply the failure policy to a 400,
        # and Ignore would admit it.
        problem = f"the review nests more than {MAX_REVIEW_DEPTH} levels deep"
        return _Read(problem=problem, uid=review_request["uid"])
    return _Read(request=review_request, uid=review_request["uid"])


def _result(verdict: Verdict) -> AdmissionResult:
    if verdict.allowed:
        return "allowed"
    return "error" if any(c["reason"] in FAILED_REVIEW_REASONS for c in verdict.causes) else "denied"


def _labels(review_request: dict[str, Any] | None) -> tuple[object, object]:
    """The kind and operation a review names, as given (the metrics bound them)."""
    if review_request is None:
        return None, None
    kind = review_request.get("kind")
    return (kind.get("kind") if isinstance(kind, dict) else None), review_request.get("operation")


def handler(
    bundles: BundleReader,
    answer_seconds: float = ANSWER_SECONDS,
    failure_policy: str = "Fail",
    metrics: Metrics = METRICS,
) -> Any:
    """The ``POST /validate`` handler; ``failure_policy`` is the webhook configuration's."""
    slots = asyncio.Semaphore(REVIEWS_AT_ONCE)

    async def validate(request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + answer_seconds
        read = _Read()
        result: AdmissionResult = "error"  # unless a verdict says otherwise
        try:
            try:
                async with asyncio.timeout(answer_seconds / 2):
                    await slots.acquire()
            except TimeoutError:
                # Not even read: without a uid there is no verdict to give, so the API server
                # applies the webhook's failure policy, as for a webhook that did not answer.
                log.warning("an admission review waited too long: %d are being judged", REVIEWS_AT_ONCE)
                return web.json_response({"error": "too many reviews at once"}, status=429)
            try:
                raw = await request.read()
                read = await loop.run_in_executor(ANALYSIS, _read, raw)
                if read.uid is None:
                    return _bad_request(read.problem)
                if read.request is None:
                    verdict = unreadable("request", read.problem)
                else:
                    left = max(deadline - loop.time(), 0.0)
                    verdict = await _judge(read.request, bundles, left, failure_policy)
                result = _result(verdict)
                return web.json_response(admission_response(read.uid, verdict))
            finally:
                slots.release()
        finally:
            # Every answer counts, a 400, 413 or 429 as an error of an unknown kind.
            kind, operation = _labels(read.request)
            metrics.observe_admission(kind, operation, result, loop.time() - started)

    return validate


async def serve_webhook(
    host: str,
    port: int,
    cert_dir: Path,
    bundles: BundleReader,
    *,
    failure_policy: str = "Fail",
    answer_seconds: float = ANSWER_SECONDS,
    reload_every: float = RELOAD_SECONDS,
    metrics: Metrics = METRICS,
) -> web.AppRunner:
    """Serve ``POST /validate`` over HTTPS on ``host:port``; call ``cleanup()`` to stop."""
    serving = ServingCertificate.load(cert_dir, metrics)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(PATH, handler(bundles, answer_seconds, failure_policy, metrics))
    follower: asyncio.Task[None] | None = None

    async def stop_following(_app: web.Application) -> None:
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    app.on_cleanup.append(stop_following)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=serving.context).start()
    follower = asyncio.create_task(serving.follow(reload_every), name="webhook-certificate")
    return runner
