"""What looks like a credential in plain MCP configuration: the one rule set (seed 000) that
export uses to template values and analyze uses to refuse literal credentials.

Heuristic by nature: a name that looks like a credential, an Authorization-style value, a
credentialed URL, a credential flag or header in the arguments. Export replaces whatever matches
with a ``${setup.<key>}`` reference to a secret field; analyze blocks a bundle that writes one
into the document instead of taking it from such a field.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

_CREDENTIAL_WORDS = frozenset(
    {
        "token",
        "tokens",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "pass",
        "pwd",
        "pat",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "session",
        "signature",
        "sig",
        "privatekey",
        "accesskey",
        "secretkey",
        "clientsecret",
    }
)
# Credential words that still say so when run together with others in one name.
_CORE_WORDS = ("password", "passwd", "passphrase", "token", "secret", "apikey", "credential", "privatekey")
# A "key" is a credential when it says what kind of key it is.
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "signing", "client", "auth", "master", "license"}
)
_AUTH_VALUE = re.compile(r"^\s*(bearer|basic|token|digest|apikey|api-key)\s+\S+", re.IGNORECASE)
# Seed 000: a path segment of 24 or more letters and digits is opaque, which is how per-user
# secret URLs look; a run of letters alone or digits alone counts as much as a mix. Separators
# keep a readable slug such as customer-support-assistant-v2 out of it.
OPAQUE_SEGMENT_MIN = 24
_OPAQUE_SEGMENT = re.compile(rf"^[A-Za-z0-9]{{{OPAQUE_SEGMENT_MIN},}}\Z")
_FLAG = re.compile(r"^(--?[A-Za-z][A-Za-z0-9_.-]*)(?:=(.*))?\Z", re.DOTALL)
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)\Z", re.DOTALL)
_HEADER_ARG = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)\s*:\s*(.+)\Z", re.DOTALL)


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def name_looks_like_credential(name: str) -> bool:
    """Whether an env, header, flag or query parameter name says it holds a credential."""
    words = _words(name)
    joined = "".join(words)
    if any(word in _CREDENTIAL_WORDS for word in words):
        return True
    if any(pair in _CREDENTIAL_WORDS for pair in (a + b for a, b in itertools.pairwise(words))):
        return True
    if words == ["key"] or joined in {"apikey", "xapikey"}:
        return True
    # Words run together in one name: PGPASSWORD, APITOKEN, AUTHTOKEN, DBSECRET.
    if any(core in joined for core in _CORE_WORDS):
        return True
    if len(words) > 1 and words[-1] == "key" and words[-2] not in _NOT_SECRET_KEYS:
        return True  # OPENAI_KEY, ANTHROPIC_KEY, STRIPE_KEY: a provider's key is its credential
    return any(
        word == "key" and index > 0 and words[index - 1] in _KEY_QUALIFIERS
        for index, word in enumerate(words)
    )


# "<something> key" that names no credential: a public key, a sort or cache key.
_NOT_SECRET_KEYS = frozenset(
    {
        "public",
        "pub",
        "sort",
        "partition",
        "cache",
        "primary",
        "foreign",
        "hash",
        "lookup",
        "routing",
        "idempotency",
        "group",
        "shard",
        "index",
        "map",
        "dedup",
        "dedupe",
        "object",
        "s3",
        "prefix",
    }
)
# Words that say "credential" often enough for export to template a value, but name settings just
# as often (SESSION_DIR, AUTH_MODE, COOKIE_JAR, MAX_TOKENS): alone they do not make install refuse.
_WEAK_WORDS = frozenset({"session", "auth", "cookie", "sig", "signature", "tokens", "bearer"})
# Names ending so (or starting with max/min) hold a setting about a credential, not the credential.
_SETTING_SUFFIXES = frozenset(
    {
        "file",
        "path",
        "dir",
        "directory",
        "url",
        "uri",
        "endpoint",
        "type",
        "method",
        "mode",
        "limit",
        "count",
        "size",
        "timeout",
        "ttl",
        "expiry",
        "lifetime",
        "id",
        "name",
        "header",
        "prefix",
        "format",
        "enabled",
        "disabled",
        "required",
        "budget",
        "scope",
        "scopes",
        "provider",
        "issuer",
        "audience",
    }
)
PLAIN_SETTING = re.compile(r"-?[0-9]+(\.[0-9]+)?|true|false|yes|no|on|off", re.IGNORECASE)


def name_demands_secret(name: str) -> bool:
    """Stricter than ``name_looks_like_credential``: a name that by itself makes analyze refuse a
    literal and the installer declare the value secret. Export keeps the broad rule (templating a
    setting loses nothing); refusing an install on a setting would."""
    words = _words(name)
    if not words or not name_looks_like_credential(name):
        return False
    if words[-1] in _SETTING_SUFFIXES or words[0] in {"max", "min"}:
        return False
    if any(word.startswith("tokeniz") for word in words):
        return False
    strong = "_".join(word for word in words if word not in _WEAK_WORDS)
    return bool(strong) and name_looks_like_credential(strong)


def install_sees_credential(name: str, value: str) -> bool:
    """For env and headers at install and analyze: a value that must come from a secret field."""
    if PLAIN_SETTING.fullmatch(value.strip()):
        return False  # MAX_TOKENS: 4096 is a setting whatever its name says
    return name_demands_secret(name) or is_authorization_value(value) or is_credentialed_url(value)


def is_authorization_value(value: str) -> bool:
    """Whether a value looks like an Authorization header value (Bearer …, Basic …)."""
    return bool(_AUTH_VALUE.match(value))


def is_credentialed_url(value: str) -> bool:
    """A URL with a password in its userinfo, a credential-named query parameter, or an opaque
    path segment of 24 or more letters and digits (how per-user secret URLs look)."""
    text = value.strip()
    if "://" not in text:
        return False
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    if not parts.netloc:
        return False
    if parts.password:
        return True
    if any(name_looks_like_credential(name) for name, _ in parse_qsl(parts.query, keep_blank_values=True)):
        return True
    return any(_OPAQUE_SEGMENT.match(segment) for segment in parts.path.split("/"))


def value_is_credential(name: str, value: str) -> bool:
    """For env and headers: a credential-like name, an Authorization-style value or a credentialed URL."""
    return name_looks_like_credential(name) or is_authorization_value(value) or is_credentialed_url(value)


@dataclass(frozen=True)
class ArgFinding:
    """A credential inside an args list: which item, and which part of it to replace."""

    index: int
    prefix: str  # kept as written before the secret part ("--token=", "Authorization: Bearer ")


def screen_args(
    args: list[str], names: Callable[[str], bool] = name_looks_like_credential
) -> list[ArgFinding]:
    """Credentials among command arguments: URLs, flag values, NAME=value pairs, header arguments.
    ``names`` says which flag, variable and header names hold credentials."""
    findings: list[ArgFinding] = []
    skip_next = False
    for index, arg in enumerate(args):
        if skip_next:
            skip_next = False
            findings.append(ArgFinding(index, ""))
            continue
        if is_credentialed_url(arg):
            findings.append(ArgFinding(index, ""))
            continue
        flag = _FLAG.match(arg)
        if flag is not None and names(flag.group(1)):
            if flag.group(2) is not None:
                findings.append(ArgFinding(index, flag.group(1) + "="))
            elif index + 1 < len(args) and not args[index + 1].startswith("-"):
                skip_next = True
            continue
        if flag is not None and flag.group(2) is not None:
            # --url=postgres://u:p@h/db, --header=Authorization: Bearer x: judge the value itself.
            prefix = _value_prefix(flag.group(2))
            if prefix is not None:
                findings.append(ArgFinding(index, flag.group(1) + "=" + prefix))
            continue
        header = _HEADER_ARG.match(arg)
        if header is not None and (names(header.group(1)) or is_authorization_value(header.group(2))):
            findings.append(ArgFinding(index, _header_prefix(arg, header.group(2))))
            continue
        assignment = _ASSIGNMENT.match(arg)
        if assignment is not None:
            if names(assignment.group(1)):
                findings.append(ArgFinding(index, assignment.group(1) + "="))
            else:
                prefix = _value_prefix(assignment.group(2))
                if prefix is not None:
                    findings.append(ArgFinding(index, assignment.group(1) + "=" + prefix))
    return findings


def _value_prefix(value: str) -> str | None:
    """For a value inside an argument: None when it holds no credential, else what to keep before it."""
    if is_credentialed_url(value):
        return ""
    if is_authorization_value(value):
        return authorization_prefix(value)
    header = _HEADER_ARG.match(value)
    if header is not None and (
        name_looks_like_credential(header.group(1)) or is_authorization_value(header.group(2))
    ):
        return _header_prefix(value, header.group(2))
    return None


def _header_prefix(arg: str, value: str) -> str:
    """Keep the header name and an auth scheme; the credential is what follows."""
    head = arg[: len(arg) - len(value)]
    scheme = _AUTH_VALUE.match(value)
    if scheme is not None:
        return head + value[: scheme.end(1)] + " "
    return head


def authorization_prefix(value: str) -> str:
    """The scheme part of an Authorization-style value ('Bearer '), or '' when it has none."""
    scheme = _AUTH_VALUE.match(value)
    return value[: scheme.end(1)] + " " if scheme is not None else ""
