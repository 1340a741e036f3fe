"""The validating webhook's HTTPS server: ``POST /validate`` in every replica, leader or not.

It serves ``DIR/tls.crt`` and ``DIR/tls.key`` (cert-manager's names) and loads them again when
they change, for new connections, without a restart. A request that is not an AdmissionReview
gets a 400 naming what is wrong; a body over ``MAX_BODY_BYTES`` a 413; an answer that takes longer
than ``ANSWER_SECONDS`` admits the object with a warning (the operator still judges it in status),
so a slow analysis never blocks ``kubectl apply`` past the API server's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from bundle_operator.k8s.admission import BundleReader, Verdict, admission_response, review

log = logging.getLogger(__name__)

PATH = "/validate"
# An AdmissionReview holds the object and, on update, the old one; an inline document is at most
# 5 MiB as text, and the API server stores far less than this.
MAX_BODY_BYTES = 16 * 1024 * 1024
# The webhook configuration gives the API server 5 s; answer before that.
ANSWER_SECONDS = 4.0
RELOAD_SECONDS = 2.0


@dataclass
class ServingCertificate:
    """The certificate and key files of a directory, loaded into one server TLS context."""

    directory: Path
    context: ssl.SSLContext
    loaded: tuple[float, float] = (0.0, 0.0)

    @classmethod
    def load(cls, directory: Path) -> ServingCertificate:
        """A TLS context serving the directory's tls.crt and tls.key; fails when they are unusable."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        serving = cls(directory, context)
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
        return True

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


def handler(bundles: BundleReader, answer_seconds: float = ANSWER_SECONDS) -> Any:
    """The ``POST /validate`` handler."""

    async def validate(request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return _bad_request("the body is not UTF-8 text")
        except ValueError:
            return _bad_request("the body is not JSON")
        if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
            return _bad_request("the body is not an AdmissionReview")
        if body.get("apiVersion") != "admission.k8s.io/v1":
            return _bad_request("only admission.k8s.io/v1 AdmissionReviews are answered")
        review_request = body.get("request")
        if not isinstance(review_request, dict) or not isinstance(review_request.get("uid"), str):
            return _bad_request("the AdmissionReview has no request with a uid")
        try:
            verdict = await asyncio.wait_for(review(review_request, bundles), answer_seconds)
        except TimeoutError:
            verdict = Verdict(
                warnings=["not analyzed at admission in time; the operator reports it in status"]
            )
        return web.json_response(admission_response(review_request["uid"], verdict))

    return validate


async def serve_webhook(
    host: str, port: int, cert_dir: Path, bundles: BundleReader, *, reload_every: float = RELOAD_SECONDS
) -> web.AppRunner:
    """Serve ``POST /validate`` over HTTPS on ``host:port``; call ``cleanup()`` to stop."""
    serving = ServingCertificate.load(cert_dir)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(PATH, handler(bundles))
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
