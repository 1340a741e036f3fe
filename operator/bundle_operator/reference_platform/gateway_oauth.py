"""An OAuth endpoint as an OAuth 2.0 resource server (DESIGN.md §9.4, the MCP authorization spec).

A request carries a bearer JWT from the endpoint's issuer. The issuer's keys are found through its
metadata (``/.well-known/openid-configuration``, else RFC 8414's ``oauth-authorization-server``),
then its ``jwks_uri``, fetched over https behind the fetcher's guards and cached per issuer. A token
signed by a key the cache does not hold makes the keys be fetched once more, at most once per 30 s,
so a rotation needs no restart and a flood of made-up key ids costs one fetch per interval.

PyJWT (already installed with the ``mcp`` SDK, over ``cryptography``) checks the signature and the
claims: it is the library the SDK's own auth code uses, so one JWT stack serves both. Only
asymmetric algorithms are accepted: ``none`` and the HMAC family are refused before any key is
looked at, since an HMAC "signed" with a public key is the classic forgery.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import ssl
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt
from jwt import PyJWK

from bundle_operator.fetch import FetchRefused, IPNetwork, fetch_bytes

ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LEEWAY_SECONDS = 60
REFETCH_SECONDS = 30.0
# A token checked once is taken again without a second check for this long at most (and never past
# its exp): a client sends the same token with every request, and its signature does not change.
VERIFIED_SECONDS = 60.0
VERIFIED_MAX = 10_000
MAX_DOCUMENT_BYTES = 512 * 1024
# Where the door leaves the request's principal for the MCP handlers: the ASGI scope's state.
PRINCIPAL = "bundle_gateway_principal"
METADATA_PATHS = ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server")


class TokenRefused(Exception):
    """A request the endpoint does not serve: 401 (no usable token) or 403 (insufficient scope).

    ``reason`` is short and stable, for metrics; ``description`` is for the client and never
    quotes the token.
    """

    def __init__(self, status: int, reason: str, description: str, *, scope: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.reason = reason
        self.description = description
        self.scope = scope


@dataclass(frozen=True)
class OAuthSettings:
    """One endpoint's OAuth settings, as stored on the platform."""

    issuer: str
    audience: str
    required_scopes: tuple[str, ...] = ()
    tool_scopes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, stored: Mapping[str, Any], endpoint_url: str) -> OAuthSettings:
        """The settings of an endpoint's ``oauth`` field; the audience defaults to its URL."""
        return cls(
            issuer=str(stored["issuer"]),
            audience=str(stored.get("audience") or endpoint_url),
            required_scopes=tuple(stored.get("required_scopes") or ()),
            tool_scopes=tuple((p, tuple(s)) for p, s in (stored.get("tool_scopes") or {}).items()),
        )

    def scopes_supported(self) -> list[str]:
        """Every scope the endpoint may ask for, for its protected resource metadata."""
        scopes = set(self.required_scopes)
        for _, needed in self.tool_scopes:
            scopes.update(needed)
        return sorted(scopes)

    def needed_for(self, tool: str) -> set[str]:
        """The scopes a token needs for ``tool``: those of every pattern that matches its name."""
        needed: set[str] = set()
        for pattern, scopes in self.tool_scopes:
            if fnmatch.fnmatchcase(tool, pattern):
                needed.update(scopes)
        return needed


@dataclass(frozen=True)
class Principal:
    """Who a request is from: ``key:<endpoint id>`` or ``sub:<subject>``; ``scopes`` None is all."""

    who: str
    scopes: frozenset[str] | None = None

    def has(self, needed: Iterable[str]) -> bool:
        """Whether the principal holds every scope in ``needed``."""
        return self.scopes is None or set(needed) <= self.scopes


@dataclass(frozen=True)
class _Key:
    """A published key, with the algorithm it declares (``alg``) and its type (``kty``)."""

    jwk: PyJWK
    alg: str | None
    kty: str

    def fits(self, algorithm: str) -> bool:
        """Whether a token signed with ``algorithm`` may be checked with this key."""
        if self.alg is not None and self.alg != algorithm:
            return False
        family = {"R": "RSA", "P": "RSA", "E": "EC"}.get(algorithm[0], "OKP")
        return self.kty == family


@dataclass
class _Issuer:
    """What is known of one issuer: its keys by id, and when they were last fetched."""

    jwks_uri: str | None = None
    keys: dict[str, _Key] = field(default_factory=dict)
    unnamed: list[_Key] = field(default_factory=list)
    fetched_at: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TokenVerifier:
    """Checks bearer JWTs against their issuers' keys, cached per issuer."""

    def __init__(
        self,
        *,
        allow_networks: Sequence[IPNetwork | str] = (),
        verify: ssl.SSLContext | bool = True,
        refetch_seconds: float = REFETCH_SECONDS,
    ) -> None:
        self._allow = allow_networks
        self._verify = verify
        self._refetch = refetch_seconds
        self._issuers: dict[str, _Issuer] = {}
        self._verified: OrderedDict[tuple[bytes, OAuthSettings], tuple[Principal, float]] = OrderedDict()

    async def principal(self, authorization: str | None, settings: OAuthSettings) -> Principal:
        """The principal of an ``Authorization`` header; ``TokenRefused`` says why there is none."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise TokenRefused(401, "missing", "send Authorization: Bearer <access token> from the issuer")
        # Keyed by a digest: the cache never holds a usable token.
        key = (hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest(), settings)
        now = time.time()
        cached = self._verified.get(key)
        if cached is not None and now < cached[1]:
            self._verified.move_to_end(key)
            return cached[0]
        principal, expires = await self._principal(token, settings)
        self._verified[key] = (principal, min(expires + LEEWAY_SECONDS, now + VERIFIED_SECONDS))
        while len(self._verified) > VERIFIED_MAX:
            self._verified.popitem(last=False)
        return principal

    async def _principal(self, token: str, settings: OAuthSettings) -> tuple[Principal, float]:
        claims = await self._claims(token, settings)
        subject = claims.get("sub") or claims.get("client_id") or claims.get("azp")
        if not isinstance(subject, str) or not subject:
            raise TokenRefused(401, "no_subject", "the token names no subject (sub)")
        scopes = _scopes(claims)
        missing = sorted(set(settings.required_scopes) - scopes)
        if missing:
            raise TokenRefused(
                403,
                "insufficient_scope",
                f"the token lacks the scopes {' '.join(missing)}",
                scope=" ".join(settings.required_scopes),
            )
        return Principal(f"sub:{subject[:200]}", frozenset(scopes)), float(claims["exp"])

    async def _claims(self, token: str, settings: OAuthSettings) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused(401, "malformed", "the bearer token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise TokenRefused(401, "algorithm", f"tokens signed with {str(algorithm)[:16]} are not accepted")
        key = await self._key(settings.issuer, header.get("kid"), str(algorithm))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.jwk.key,
                algorithms=[str(algorithm)],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused(401, "expired", "the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused(401, "not_yet_valid", "the token is not valid yet (nbf)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(401, "audience", "the token is not for this endpoint (aud)") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused(401, "issuer", "the token is from another issuer (iss)") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRefused(401, "claims", f"the token has no {exc.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused(401, "signature", "the token's signature does not verify") from None
        except jwt.PyJWTError:
            raise TokenRefused(401, "malformed", "the token cannot be read") from None
        return claims

    async def _key(self, issuer: str, kid: object, algorithm: str) -> _Key:
        state = self._issuers.setdefault(issuer, _Issuer())
        found = _pick(state, kid, algorithm)
        if found is not None:
            return found
        async with state.lock:
            found = _pick(state, kid, algorithm)  # another request may have fetched meanwhile
            if found is None and time.monotonic() - state.fetched_at >= self._refetch:
                await self._fetch(issuer, state)
                found = _pick(state, kid, algorithm)
        if found is None:
            raise TokenRefused(401, "unknown_key", "the token is signed by a key the issuer does not publish")
        return found

    async def _fetch(self, issuer: str, state: _Issuer) -> None:
        state.fetched_at = time.monotonic()
        if state.jwks_uri is None:
            state.jwks_uri = await self._jwks_uri(issuer)
        data = await self._json(state.jwks_uri, "its keys")
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, list):
            raise TokenRefused(401, "issuer_unavailable", "the issuer's key set has no keys")
        named: dict[str, _Key] = {}
        unnamed: list[_Key] = []
        for entry in keys:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                alg = entry.get("alg")
                key = _Key(PyJWK(entry), alg if isinstance(alg, str) else None, str(entry.get("kty")))
            except jwt.PyJWTError:
                continue  # a key type this platform cannot use: the others still serve
            if isinstance(entry.get("kid"), str):
                named[entry["kid"]] = key
            else:
                unnamed.append(key)
        state.keys, state.unnamed = named, unnamed

    async def _jwks_uri(self, issuer: str) -> str:
        for path in METADATA_PATHS:
            try:
                metadata = await self._json(issuer.rstrip("/") + path, "its metadata")
            except TokenRefused:
                continue
            if not isinstance(metadata, dict):
                continue
            if metadata.get("issuer") not in (issuer, issuer.rstrip("/")):
                continue  # metadata of another issuer would let it mint tokens for this one
            uri = metadata.get("jwks_uri")
            if isinstance(uri, str) and uri.startswith("https://"):
                return uri
        raise TokenRefused(401, "issuer_unavailable", "the issuer's metadata and keys cannot be read")

    async def _json(self, url: str, what: str) -> Any:
        try:
            body = await fetch_bytes(
                url,
                max_bytes=MAX_DOCUMENT_BYTES,
                allow_networks=self._allow,
                verify=self._verify,
                io_timeout=5.0,
                total_timeout=10.0,
            )
            return json.loads(body.decode("utf-8"))
        except (FetchRefused, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise TokenRefused(401, "issuer_unavailable", f"the issuer's {what} cannot be read") from None


def _pick(state: _Issuer, kid: object, algorithm: str) -> _Key | None:
    if isinstance(kid, str):
        key = state.keys.get(kid)
    else:
        # No kid: the issuer's only key that fits the algorithm, if there is exactly one.
        fitting = [k for k in [*state.keys.values(), *state.unnamed] if k.fits(algorithm)]
        key = fitting[0] if len(fitting) == 1 else None
    if key is None or not key.fits(algorithm):
        return None
    return key


def _scopes(claims: Mapping[str, Any]) -> set[str]:
    """The token's scopes: ``scope`` (space-separated, RFC 8693) and ``scp`` (a list or a string)."""
    found: set[str] = set()
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(s for s in value if isinstance(s, str))
    return found


def protected_resource_metadata(resource: str, settings: OAuthSettings, name: str) -> dict[str, Any]:
    """RFC 9728 metadata of an endpoint."""
    return {
        "resource": resource,
        "authorization_servers": [settings.issuer],
        "scopes_supported": settings.scopes_supported(),
        "bearer_methods_supported": ["header"],
        "resource_name": name,
    }


def principal_of(request: object) -> Principal | None:
    """The principal the door left in a request's ASGI state (None outside the gateway's door)."""
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    found = state.get(PRINCIPAL) if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else None


def tool_allowed(oauth: Mapping[str, Any] | None, principal: Principal | None, tool: str) -> bool:
    """Whether ``principal`` may see and call ``tool`` under an endpoint's ``tool_scopes``."""
    if oauth is None:
        return True  # an ApiKey endpoint: its key holder has every tool
    settings = OAuthSettings.of(oauth, "")
    needed = settings.needed_for(tool)
    if not needed:
        return True
    return principal is not None and principal.has(needed)
