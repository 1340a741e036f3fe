"""An OAuth endpoint as an OAuth 2.0 resource server (DESIGN.md §9.4, the MCP authorization spec).

A request carries a bearer JWT from the endpoint's issuer. The issuer's keys are found through its
metadata (looked for where the MCP SDK's client looks: issuer_metadata.py), then its ``jwks_uri``,
fetched over https behind the fetcher's guards and cached per issuer. The keys are used for
``KEYS_MAX_AGE`` (5 min) after a fetch and fetched again on the first token past that, so a key the
issuer withdraws stops verifying within 5 min, verified tokens cached in memory included (their cache
never outlives the keys that verified them). A token signed by a key the cache does not hold makes the
keys be fetched at once, and no issuer that answers has its keys fetched more than once per
``REFETCH_SECONDS`` (30 s): a rotation needs no restart and a flood of made-up key ids costs one fetch
per interval. When the issuer cannot be reached, its last keys serve ``KEYS_GRACE`` (5 min) longer, then
its tokens are refused as ``issuer_unavailable`` until it answers again; an issuer that failed is tried
again after ``RETRY_FIRST`` (1 s), doubling up to ``RETRY_MAX`` (30 s), so that an outage costs its
length and not a further 30 s.

Every header field and claim the checks read is checked for its JSON type first: a token is
untrusted input until its signature verifies, and an odd type must be a 401, never a 500.

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
import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import jwt
from jwt import PyJWK

from bundle_operator.fetch import FetchRefused, IPNetwork, fetch_answer
from bundle_operator.reference_platform.issuer_metadata import metadata_urls

ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LEEWAY_SECONDS = 60
# The fewest seconds between two fetches of one issuer's keys, whatever the tokens name.
REFETCH_SECONDS = 30.0
# How long fetched keys are used before they are fetched again, at most: the longest a withdrawn key
# verifies. The issuer's Cache-Control (or Expires) shortens it, down to REFETCH_SECONDS.
KEYS_MAX_AGE = 300.0
# After a failed fetch the issuer is tried again this long after, doubling with each failure up to
# RETRY_MAX: a blip is over in a second, and an issuer that stays down is asked twice a minute.
RETRY_FIRST = 1.0
RETRY_MAX = 30.0
# How much longer an issuer's last keys serve while it cannot be reached.
KEYS_GRACE = 300.0
# An issuer's key set is read up to this many keys; the rest are ignored.
MAX_KEYS = 100
# A token checked once is taken again without a second check for this long at most (and never past
# its exp): a client sends the same token with every request, and its signature does not change.
VERIFIED_SECONDS = 60.0
VERIFIED_MAX = 10_000
MAX_DOCUMENT_BYTES = 512 * 1024
# OpenID Connect Core 1.0 section 2: a subject is at most 255 ASCII characters.
MAX_SUBJECT = 255
MAX_KEY_ID = 256
# The last second of year 9999: a NumericDate past it is not a date any clock reaches.
MAX_NUMERIC_DATE = 253_402_300_799
# Where the door leaves the request's principal for the MCP handlers: the ASGI scope's state.
PRINCIPAL = "bundle_gateway_principal"
# The key type each accepted algorithm verifies with.
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC"}

log = logging.getLogger("bundle_operator.platform.gateway")


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
    """Who a request is from: ``key:<endpoint id>``, ``sub:<subject>`` or ``client:<client id>``.

    ``scopes`` None is all.
    """

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
        family = "OKP" if algorithm == "EdDSA" else _KEY_TYPES.get(algorithm[:2])
        return self.kty == family


@dataclass
class _Issuer:
    """What is known of one issuer: its keys by id, and until when they serve (monotonic times)."""

    jwks_uri: str | None = None
    keys: dict[str, _Key] = field(default_factory=dict)
    unnamed: list[_Key] = field(default_factory=list)
    fetched_at: float = float("-inf")  # the last fetch, whether it worked or not
    fresh_until: float = float("-inf")  # the keys serve without a fetch until then
    usable_until: float = float("-inf")  # and while the issuer cannot be reached, until then
    failures: int = 0  # fetches that failed in a row
    retry_at: float = float("-inf")  # after a failure, the next fetch is not tried before then
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TokenVerifier:
    """Checks bearer JWTs against their issuers' keys, cached per issuer."""

    def __init__(
        self,
        *,
        allow_networks: Sequence[IPNetwork | str] = (),
        verify: ssl.SSLContext | bool = True,
        refetch_seconds: float = REFETCH_SECONDS,
        keys_max_age: float = KEYS_MAX_AGE,
        keys_grace: float = KEYS_GRACE,
        retry_first: float = RETRY_FIRST,
        retry_max: float = RETRY_MAX,
    ) -> None:
        self._allow = allow_networks
        self._verify = verify
        self._refetch = refetch_seconds
        self._max_age = keys_max_age
        self._grace = keys_grace
        self._retry_first = retry_first
        self._retry_max = retry_max
        self._issuers: dict[str, _Issuer] = {}
        # Principal and the monotonic time its check lapses, by token digest and settings.
        self._verified: OrderedDict[tuple[bytes, OAuthSettings], tuple[Principal, float]] = OrderedDict()

    async def principal(self, authorization: str | None, settings: OAuthSettings) -> Principal:
        """The principal of an ``Authorization`` header; ``TokenRefused`` says why there is none."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise TokenRefused(401, "missing", "send Authorization: Bearer <access token> from the issuer")
        # Keyed by a digest: the cache never holds a usable token.
        key = (hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest(), settings)
        cached = self._verified.get(key)
        if cached is not None and time.monotonic() < cached[1]:
            self._verified.move_to_end(key)
            return cached[0]
        principal, lapses = await self._principal(token, settings)
        self._verified[key] = (principal, lapses)
        while len(self._verified) > VERIFIED_MAX:
            self._verified.popitem(last=False)
        return principal

    async def _principal(self, token: str, settings: OAuthSettings) -> tuple[Principal, float]:
        """The token's principal, and the monotonic time until which its check may be taken again."""
        claims, keys_fresh_until = await self._claims(token, settings)
        who = _who(claims)
        scopes = _scopes(claims)
        missing = sorted(set(settings.required_scopes) - scopes)
        if missing:
            raise TokenRefused(
                403,
                "insufficient_scope",
                f"the token lacks the scopes {' '.join(missing)}",
                scope=" ".join(settings.required_scopes),
            )
        now = time.monotonic()
        expires = now + float(claims["exp"]) + LEEWAY_SECONDS - time.time()
        # Never past the keys' next fetch: a withdrawn key must stop passing with the keys.
        lapses = min(expires, now + VERIFIED_SECONDS, keys_fresh_until)
        return Principal(who, frozenset(scopes)), lapses

    async def _claims(self, token: str, settings: OAuthSettings) -> tuple[dict[str, Any], float]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused(401, "malformed", "the bearer token is not a JWT") from None
        algorithm, kid = _checked_header(header)
        key, keys_fresh_until = await self._key(settings.issuer, kid, algorithm)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.jwk.key,
                algorithms=[algorithm],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused(401, "expired", "the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused(401, "not_yet_valid", "the token is not valid yet (nbf or iat)") from None
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
        _check_dates(claims)
        return claims, keys_fresh_until

    async def _key(self, issuer: str, kid: str | None, algorithm: str) -> tuple[_Key, float]:
        """The issuer's key for the token, and the monotonic time its key set is next fetched."""
        state = self._issuers.setdefault(issuer, _Issuer())
        if self._due(state, kid, algorithm):
            async with state.lock:
                if self._due(state, kid, algorithm):  # another request may have fetched meanwhile
                    await self._refresh(issuer, state)
        if time.monotonic() >= state.usable_until:
            raise TokenRefused(401, "issuer_unavailable", "the issuer's keys cannot be read")
        found = _pick(state, kid, algorithm)
        if found is None and state.failures:
            # The keys that might hold it could not be read: the issuer, not the token, is at fault.
            raise TokenRefused(401, "issuer_unavailable", "the issuer's keys cannot be read")
        if found is None:
            raise TokenRefused(401, "unknown_key", "the token is signed by a key the issuer does not publish")
        return found, state.fresh_until

    def _due(self, state: _Issuer, kid: str | None, algorithm: str) -> bool:
        """Whether the issuer's keys are fetched now: they are old, or lack the token's key."""
        now = time.monotonic()
        if state.failures:
            return now >= state.retry_at  # an issuer that failed is retried on its backoff
        if now - state.fetched_at < self._refetch:
            return False
        return now >= state.fresh_until or _pick(state, kid, algorithm) is None

    async def _refresh(self, issuer: str, state: _Issuer) -> None:
        """Fetch the issuer's keys; when it cannot be reached, its last keys serve out their grace."""
        now = state.fetched_at = time.monotonic()
        try:
            state.keys, state.unnamed, fresh_for = await self._fetch(issuer, state)
        except TokenRefused as refusal:
            # The metadata is read again next time: an issuer that moved its keys says where.
            state.jwks_uri = None
            state.failures += 1
            backoff = self._retry_first * 2 ** min(state.failures - 1, 16)
            state.retry_at = now + min(backoff, self._retry_max)
            if now >= state.usable_until:
                raise
            log.warning(
                "the keys of the OAuth issuer %s cannot be read (%s); its last keys serve %.0f s more",
                issuer,
                refusal.description,
                state.usable_until - now,
            )
            return
        state.failures = 0
        state.fresh_until = now + fresh_for
        state.usable_until = state.fresh_until + self._grace

    async def _fetch(self, issuer: str, state: _Issuer) -> tuple[dict[str, _Key], list[_Key], float]:
        """The issuer's keys, named and unnamed, and for how long they may be used without a fetch."""
        if state.jwks_uri is None:
            state.jwks_uri = await self._jwks_uri(issuer)
        data, headers = await self._json(state.jwks_uri, "its keys")
        # What the issuer's cache headers allow, kept between the fetch floor and the ceiling.
        fresh_for = min(max(_cacheable_for(headers, self._max_age), self._refetch), self._max_age)
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, list):
            raise TokenRefused(401, "issuer_unavailable", "the issuer's key set has no keys")
        named: dict[str, _Key] = {}
        unnamed: list[_Key] = []
        for entry in keys[:MAX_KEYS]:
            key = _published_key(entry)
            if key is None:
                continue
            if isinstance(entry.get("kid"), str):
                named[entry["kid"]] = key
            else:
                unnamed.append(key)
        return named, unnamed, fresh_for

    async def _jwks_uri(self, issuer: str) -> str:
        for url in metadata_urls(issuer):
            try:
                metadata, _ = await self._json(url, "its metadata")
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

    async def _json(self, url: str, what: str) -> tuple[Any, Mapping[str, str]]:
        """A document of the issuer, and the headers it came with."""
        try:
            answer = await fetch_answer(
                url,
                max_bytes=MAX_DOCUMENT_BYTES,
                allow_networks=self._allow,
                verify=self._verify,
                io_timeout=5.0,
                total_timeout=10.0,
            )
            # ValueError too: a number of more digits than Python reads is not a JSON error.
            return json.loads(answer.body.decode("utf-8")), answer.headers
        except (FetchRefused, UnicodeDecodeError, ValueError, RecursionError):
            raise TokenRefused(401, "issuer_unavailable", f"the issuer's {what} cannot be read") from None


def _cacheable_for(headers: Mapping[str, str], default: float) -> float:
    """How many seconds an answer may be reused, by its Cache-Control (RFC 9111), else its Expires.

    ``no-store`` and ``no-cache`` are 0 (the caller's floor still applies); neither header: ``default``.
    """
    directives = [d.strip().lower() for d in headers.get("cache-control", "").split(",")]
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    for directive in directives:
        name, _, value = directive.partition("=")
        if name.strip() == "max-age":
            seconds = value.strip().strip('"')
            # A bound on the digits: the value is the issuer's text, and any number past a day
            # is past the ceiling anyway.
            return float(seconds) if seconds.isdigit() and len(seconds) <= 9 else default
    expires = headers.get("expires")
    if expires is None:
        return default
    try:
        until = parsedate_to_datetime(expires)
        date = headers.get("date")
        now = parsedate_to_datetime(date) if date else datetime.now(UTC)
        return max((until - now).total_seconds(), 0.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0  # RFC 9111: an Expires that cannot be read means already expired


def _published_key(entry: object) -> _Key | None:
    """A key of the issuer's key set, or None for one this platform cannot use or read."""
    if not isinstance(entry, dict):
        return None
    kty, alg, use = entry.get("kty"), entry.get("alg"), entry.get("use", "sig")
    if not isinstance(kty, str) or not isinstance(alg, str | None) or use != "sig":
        return None
    try:
        return _Key(PyJWK(entry), alg, kty)
    except (jwt.PyJWTError, TypeError, ValueError, KeyError):
        return None  # a key type or a field the platform cannot use: the others still serve


def _checked_header(header: Mapping[str, Any]) -> tuple[str, str | None]:
    """The token's algorithm and key id, once their JSON types and values are ones this platform takes."""
    algorithm, kid, typ = header.get("alg"), header.get("kid"), header.get("typ")
    # The type first: an array or object is not hashable, so it cannot even be looked up.
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        accepted = ", ".join(sorted(ALGORITHMS))
        raise TokenRefused(401, "algorithm", f"the token's algorithm (alg) is not one of {accepted}")
    if kid is not None and (not isinstance(kid, str) or len(kid) > MAX_KEY_ID):
        raise TokenRefused(
            401, "malformed", f"the token's key id (kid) is not a string of at most {MAX_KEY_ID} characters"
        )
    if typ is not None and not isinstance(typ, str):
        raise TokenRefused(401, "malformed", "the token's type (typ) is not a string")
    return algorithm, kid


def _check_dates(claims: Mapping[str, Any]) -> None:
    """Refuse exp, nbf and iat that are not JSON numbers of seconds (PyJWT also takes "123" and true)."""
    for claim in ("exp", "nbf", "iat"):
        value = claims.get(claim)
        if value is None and claim != "exp":
            continue
        # The range check also refuses NaN and the infinities; ints compare exactly, however long.
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not 0 <= value <= MAX_NUMERIC_DATE
        ):
            raise TokenRefused(401, "claims", f"the token's {claim} claim is not a date in seconds")


def _who(claims: Mapping[str, Any]) -> str:
    """Who the token names: ``sub:<sub>``, else ``client:<id>`` of the client it was issued to.

    A client's id is its own namespace: a client named like a user's subject is not that user, and
    must not open or use that user's sessions.
    """
    for claim, kind in (("sub", "sub"), ("client_id", "client"), ("azp", "client")):
        value = claims.get(claim)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise TokenRefused(401, "claims", f"the token's {claim} claim is not a string")
        if len(value) > MAX_SUBJECT:
            # Never cut short: two subjects with one prefix would be one principal.
            raise TokenRefused(401, "claims", f"the token's {claim} is longer than {MAX_SUBJECT} characters")
        return f"{kind}:{value}"
    raise TokenRefused(401, "no_subject", "the token names no subject (sub)")


def _pick(state: _Issuer, kid: str | None, algorithm: str) -> _Key | None:
    if kid is not None:
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
        if value is None:
            continue
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list) and all(isinstance(s, str) for s in value):
            found.update(value)
        else:
            raise TokenRefused(401, "claims", f"the token's {claim} claim is neither a string nor strings")
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
