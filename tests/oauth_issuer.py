"""An OAuth authorization server for tests: its metadata and key set over HTTPS with its own CA.

It serves ``/.well-known/openid-configuration`` and ``/jwks`` (counting each read); an issuer with a
path (``stub_issuer(tmp, path="/tenants/x")``) serves its metadata only where RFC 8414 §3.1 puts it,
``/.well-known/oauth-authorization-server/tenants/x``, and mints JWTs
with RSA, EC or Ed25519 keys, as a real issuer's token endpoint would hand them out. Keys can be
rotated (the key set then lists only the new key, as after a real rotation) or withdrawn, and the
issuer can be taken down (every document answers 503). ``signed`` signs any header and claims, odd
JSON types included, as a hostile or broken issuer would. No real issuer can be reached from here,
so this stands in for one, speaking the documents RFC 8414 and OpenID Connect Discovery define.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from tests.tls import QuietHandler, TlsFiles, https_server, throwaway_tls

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass
class SigningKey:
    """One of the issuer's keys: its id, algorithm and private half."""

    kid: str
    alg: str
    private: PrivateKey

    def public_jwk(self) -> dict[str, Any]:
        """The key as the key set publishes it."""
        if isinstance(self.private, rsa.RSAPrivateKey):
            jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        elif isinstance(self.private, ed25519.Ed25519PrivateKey):
            jwk = json.loads(OKPAlgorithm.to_jwk(self.private.public_key()))
        else:
            jwk = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}


def new_key(alg: str) -> SigningKey:
    """A fresh RS256, PS256, ES256 or EdDSA (Ed25519) key with a random id."""
    private: PrivateKey
    if alg.startswith(("RS", "PS")):
        private = rsa.generate_private_key(65537, 2048)
    elif alg == "EdDSA":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        private = ec.generate_private_key(ec.SECP256R1())
    return SigningKey(f"{alg.lower()}-{secrets.token_hex(4)}", alg, private)


@dataclass
class StubIssuer:
    """The issuer's state: its published keys, and how often its documents were read."""

    port: int
    tls: TlsFiles
    keys: list[SigningKey] = field(default_factory=list)
    hits: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    down: bool = False  # every document answers 503 while set
    odd_entries: list[Any] = field(default_factory=list)  # published after the keys, as they are
    keys_headers: dict[str, str] = field(default_factory=dict)  # sent with the key set (Cache-Control)
    keys_path: str = "/jwks"  # where the key set is served, as the metadata says
    path: str = ""  # the issuer identifier's path, e.g. /tenants/x

    @property
    def url(self) -> str:
        """The issuer identifier (its base URL)."""
        return f"https://127.0.0.1:{self.port}{self.path}"

    @property
    def origin(self) -> str:
        """Where the issuer's documents are served."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def metadata_path(self) -> str:
        """Where the metadata is served: OpenID's root document, or RFC 8414's path-inserted one."""
        if self.path:
            return f"/.well-known/oauth-authorization-server{self.path}"
        return "/.well-known/openid-configuration"

    def key(self, alg: str = "RS256") -> SigningKey:
        """The first published key of ``alg``."""
        return next(k for k in self.keys if k.alg == alg)

    def rotate(self, alg: str = "RS256") -> SigningKey:
        """Replace the keys of ``alg`` with a new one; returns it."""
        fresh = new_key(alg)
        with self.lock:
            self.keys = [k for k in self.keys if k.alg != alg] + [fresh]
        return fresh

    def publish(self, key: SigningKey) -> None:
        """Add ``key`` to the key set."""
        with self.lock:
            self.keys = [*self.keys, key]

    def withdraw(self, key: SigningKey) -> None:
        """Take ``key`` out of the key set, as an issuer does with a key it revokes."""
        with self.lock:
            self.keys = [k for k in self.keys if k.kid != key.kid]

    def token(
        self,
        subject: str = "ann",
        *,
        audience: str | list[str],
        scopes: str = "",
        key: SigningKey | None = None,
        issuer: str | None = None,
        lifetime: float = 300.0,
        not_before: float | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
    ) -> str:
        """A signed access token."""
        signer = key or self.keys[0]
        now = time.time()
        claims: dict[str, Any] = {
            "iss": issuer or self.url,
            "sub": subject,
            "aud": audience,
            "iat": int(now),
            "exp": int(now + lifetime),
            "scope": scopes,
            **(extra or {}),
        }
        if not_before is not None:
            claims["nbf"] = int(not_before)
        return jwt.encode(
            claims, signer.private, algorithm=signer.alg, headers={"kid": signer.kid, **(headers or {})}
        )

    def signed(self, header: dict[str, Any], claims: Any, key: SigningKey | None = None) -> str:
        """A token of exactly ``header`` and ``claims`` (any JSON), validly signed by ``key``.

        PyJWT's encoder checks claim types (an ``iss`` that is not a string, say); this signs what
        it is given, so the platform, not the test's library, decides what to make of it.
        """
        signer = key or self.keys[0]

        def part(data: Any) -> bytes:
            return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=")

        signing_input = part(header) + b"." + part(claims)
        algorithm = jwt.get_algorithm_by_name(signer.alg)
        signature = algorithm.sign(signing_input, algorithm.prepare_key(signer.private))
        return (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()


@contextmanager
def stub_issuer(tmp: Path, path: str = "") -> Iterator[StubIssuer]:
    """Run an issuer with an RSA, an EC and an Ed25519 key and a throwaway CA (``issuer.tls.ca_file``).

    ``path`` makes the issuer identifier ``https://127.0.0.1:<port><path>``.
    """
    tls = throwaway_tls(tmp, "stub issuer CA")
    state: dict[str, StubIssuer] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            issuer = state["issuer"]
            path = urlsplit(self.path).path
            with issuer.lock:
                issuer.hits[path] += 1
                keys = list(issuer.keys)
            if issuer.down:
                self.answer(503, b"{}")
                return
            if path == issuer.metadata_path:
                body: dict[str, Any] = {
                    "issuer": issuer.url,
                    "jwks_uri": f"{issuer.origin}{issuer.keys_path}",
                    "token_endpoint": f"{issuer.origin}/token",
                    "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
                }
            elif path == issuer.keys_path:
                body = {"keys": [*(k.public_jwk() for k in keys), *issuer.odd_entries]}
            else:
                self.answer(404, b"{}")
                return
            extra = issuer.keys_headers if path == issuer.keys_path else {}
            self.answer(200, json.dumps(body).encode(), {"Content-Type": "application/json", **extra})

        def do_POST(self) -> None:
            # The token endpoint's client-credentials grant (RFC 6749 §4.4), for pages that show a
            # client getting a token: any client is accepted, its id becomes the token's subject,
            # and RFC 8707's ``resource`` its audience.
            issuer = state["issuer"]
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(parse_qsl(self.rfile.read(length).decode()))
            if urlsplit(self.path).path != "/token" or form.get("grant_type") != "client_credentials":
                self.answer(400, b'{"error": "unsupported_grant_type"}')
                return
            user = self.headers.get("Authorization", "").removeprefix("Basic ")
            client = base64.b64decode(user).decode().split(":")[0] if user else form.get("client_id", "")
            scope = form.get("scope", "")
            token = issuer.token(client or "client", audience=form.get("resource", issuer.url), scopes=scope)
            body = {"access_token": token, "token_type": "Bearer", "expires_in": 300, "scope": scope}
            self.answer(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    with https_server(Handler, tls) as port:
        keys = [new_key("RS256"), new_key("ES256"), new_key("EdDSA")]
        state["issuer"] = StubIssuer(port=port, tls=tls, keys=keys, path=path)
        yield state["issuer"]
