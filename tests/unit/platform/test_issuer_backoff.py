"""An issuer that cannot be reached is retried on a backoff, not held for the unknown-key bound (§9.6)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from bundle_operator.fetch import Answer, FetchRefused
from bundle_operator.reference_platform import gateway_oauth
from bundle_operator.reference_platform.gateway_oauth import OAuthSettings, TokenRefused, TokenVerifier

pytestmark = pytest.mark.anyio
ISSUER = "https://as.example/tenants/x"
SETTINGS = OAuthSettings(issuer=ISSUER, audience="https://platform.example/mcp/e/mcp")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Issuer:
    """The issuer's documents as fetch_answer would read them, and whether it answers."""

    def __init__(self) -> None:
        self.private = rsa.generate_private_key(65537, 2048)
        self.up = False
        self.fetched: list[str] = []

    async def fetch(self, url: str, **_options: Any) -> Answer:
        self.fetched.append(url)
        if not self.up:
            raise FetchRefused("connect", "as.example cannot be reached")
        if url == "https://as.example/.well-known/oauth-authorization-server/tenants/x":
            body: dict[str, Any] = {"issuer": ISSUER, "jwks_uri": "https://as.example/jwks"}
        elif url == "https://as.example/jwks":
            jwk = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
            body = {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}
        else:
            raise FetchRefused("http_status", "not found", 404)
        return Answer(json.dumps(body).encode(), httpx.Headers())

    def token(self) -> str:
        claims = {"iss": ISSUER, "sub": "ann", "aud": SETTINGS.audience, "exp": int(time.time()) + 300}
        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": "k1"})


async def test_an_issuer_that_was_down_is_asked_again_after_its_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    issuer = Issuer()
    monkeypatch.setattr(gateway_oauth, "fetch_answer", issuer.fetch)
    verifier = TokenVerifier(retry_first=0.2, retry_max=0.4)
    with pytest.raises(TokenRefused) as refused:
        await verifier.principal(f"Bearer {issuer.token()}", SETTINGS)
    assert (refused.value.status, refused.value.reason) == (401, "issuer_unavailable")
    asked = len(issuer.fetched)
    issuer.up = True
    # Within the backoff nothing is fetched: a flood of tokens costs the issuer nothing.
    with pytest.raises(TokenRefused) as refused:
        await verifier.principal(f"Bearer {issuer.token()}", SETTINGS)
    assert refused.value.reason == "issuer_unavailable" and len(issuer.fetched) == asked
    await asyncio.sleep(0.25)
    # After it, well before the 30 s between refetches for an unknown key.
    principal = await verifier.principal(f"Bearer {issuer.token()}", SETTINGS)
    assert principal.who == "sub:ann"
    assert issuer.fetched[asked] == "https://as.example/.well-known/oauth-authorization-server/tenants/x"
