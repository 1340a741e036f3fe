"""The manifest.json of an .mcpb archive: versions 0.1 to 0.4, every known field type-checked.

A field this reader does not know refuses the archive, because what it cannot read it does not
accept. Fields that arrived in a later manifest version are unknown to earlier ones, exactly as
the official packer's schemas have it.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bundle_operator.mcpb.errors import Refused

SUPPORTED_VERSIONS = ("0.1", "0.2", "0.3", "0.4")
# Fields (top-level, or server.type values) and the manifest version that introduced them.
INTRODUCED_IN = {"privacy_policies": "0.2", "icons": "0.3", "localization": "0.3", "_meta": "0.3"}
UV_INTRODUCED_IN = "0.4"

Platform = Literal["darwin", "linux", "win32"]
NonEmpty = Annotated[str, Field(min_length=1)]
# An address is local@domain with a dot inside the domain. Said as one pattern
# ([^@\s]+@[^@\s]+\.[^@\s]+) it backtracks in quadratic time over a domain of many dots.
_EMAIL_PART = re.compile(r"[^@\s]+")
_RANGE = re.compile(r"^[0-9A-Za-z.*^~<>=|+\- ]+$")
_BCP47 = re.compile(r"^[A-Za-z0-9]{2,8}(?:-[A-Za-z0-9]{1,8})*$")
# No manifest field nests deeper than a few levels; _meta is free-form, so leave it room. The bound
# keeps the recursive JSON parser (and pydantic after it) far from Python's recursion limit.
MAX_NESTING = 64
# Integers in a manifest are small (min, max, defaults); Python refuses to parse very long ones
# with a ValueError, so a bound well under that keeps the refusal ours.
MAX_INTEGER_DIGITS = 100
# A string, or an unterminated one to the end of the text: a start that could fail would be tried
# again from every later quote, each reading to the end (quadratic on '"\\"\\"\\"...').
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def _is_email(value: str) -> bool:
    local, at, domain = value.partition("@")
    return bool(at and _EMAIL_PART.fullmatch(local) and _EMAIL_PART.fullmatch(domain) and "." in domain[1:-1])


def _url(value: str) -> str:
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        raise ValueError("must be an absolute URL")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        # JSON null is not a value of any manifest field; an absent field is the way to say "none".
        if isinstance(data, dict):
            for key, value in data.items():
                if value is None:
                    raise ValueError(f"field '{key}' is null")
        return data


class Author(_Strict):
    name: NonEmpty
    email: str | None = None
    url: str | None = None

    @field_validator("email")
    @classmethod
    def _email(cls, v: str | None) -> str | None:
        if v is not None and not _is_email(v):
            raise ValueError("must be an email address")
        return v

    @field_validator("url")
    @classmethod
    def _author_url(cls, v: str | None) -> str | None:
        return None if v is None else _url(v)


class Repository(_Strict):
    type: str
    url: str

    @field_validator("url")
    @classmethod
    def _repo_url(cls, v: str) -> str:
        return _url(v)


class Icon(_Strict):
    src: str
    size: Annotated[str, Field(pattern=r"^\d+x\d+$")]
    theme: NonEmpty | None = None


class Localization(_Strict):
    resources: str
    default_locale: str

    @field_validator("resources")
    @classmethod
    def _placeholder(cls, v: str) -> str:
        if "${locale}" not in v.lower():
            raise ValueError("must include a ${locale} placeholder")
        return v

    @field_validator("default_locale")
    @classmethod
    def _locale(cls, v: str) -> str:
        if not _BCP47.fullmatch(v):
            raise ValueError("must be a BCP 47 locale identifier")
        return v


class PlatformOverride(_Strict):
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None


class McpConfig(_Strict):
    command: str
    args: list[str] | None = None
    env: dict[str, str] | None = None
    platform_overrides: dict[Platform, PlatformOverride] | None = None


class Server(_Strict):
    type: Literal["node", "python", "binary", "uv"]
    entry_point: str
    mcp_config: McpConfig


class Runtimes(_Strict):
    python: str | None = None
    node: str | None = None

    @field_validator("python", "node")
    @classmethod
    def _range(cls, v: str | None) -> str | None:
        if v is not None and not _RANGE.fullmatch(v):
            raise ValueError("must be a version range such as '>=18' or '^3.11'")
        return v


class Compatibility(_Strict):
    claude_desktop: str | None = None
    platforms: list[Platform] | None = None
    runtimes: Runtimes | None = None


class Tool(_Strict):
    name: str
    description: str | None = None


class Prompt(_Strict):
    name: str
    description: str | None = None
    arguments: list[str] | None = None
    text: str


class UserConfigOption(_Strict):
    type: Literal["string", "number", "boolean", "directory", "file"]
    title: str
    description: str
    required: bool | None = None
    default: str | float | bool | list[str] | None = None
    multiple: bool | None = None
    sensitive: bool | None = None
    min: float | None = None
    max: float | None = None


class Manifest(_Strict):
    """A manifest as the official schemas define it (all versions; gating happens in ``parse``)."""

    schema_ref: str | None = Field(default=None, alias="$schema")
    dxt_version: str | None = None
    manifest_version: str | None = None
    name: NonEmpty
    display_name: str | None = None
    version: NonEmpty
    description: str
    long_description: str | None = None
    author: Author
    repository: Repository | None = None
    homepage: str | None = None
    documentation: str | None = None
    support: str | None = None
    icon: str | None = None
    icons: list[Icon] | None = None
    screenshots: list[str] | None = None
    localization: Localization | None = None
    server: Server
    tools: list[Tool] | None = None
    tools_generated: bool | None = None
    prompts: list[Prompt] | None = None
    prompts_generated: bool | None = None
    keywords: list[str] | None = None
    license: str | None = None
    privacy_policies: list[str] | None = None
    compatibility: Compatibility | None = None
    user_config: dict[str, UserConfigOption] | None = None
    meta: dict[str, dict[str, Any]] | None = Field(default=None, alias="_meta")

    @field_validator("homepage", "documentation", "support")
    @classmethod
    def _urls(cls, v: str | None) -> str | None:
        return None if v is None else _url(v)

    @field_validator("privacy_policies")
    @classmethod
    def _policy_urls(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [_url(u) for u in v]

    @property
    def effective_version(self) -> str:
        """The manifest version, from ``manifest_version`` or the older ``dxt_version``."""
        return self.manifest_version or self.dxt_version or ""


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Two readers could each take a different copy; only one meaning is accepted.
            raise Refused("manifest_invalid", f"manifest.json has the key '{key}' twice in one object")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise Refused("manifest_invalid", f"manifest.json uses {name}, which is not JSON")


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after[", "literal[", "str", "float", "bool", "list[str]") or "[" in part:
            # pydantic names union members in the location; they mean nothing to a person.
            continue
        else:
            out += f".{part}" if out else part
    return out or "manifest"


def _version_of(raw: dict[str, Any]) -> str:
    given = [raw[k] for k in ("manifest_version", "dxt_version") if k in raw]
    if not given:
        raise Refused("manifest_version", "manifest.json has neither manifest_version nor dxt_version")
    if len(given) > 1 and given[0] != given[1]:
        raise Refused("manifest_version", "manifest_version and dxt_version disagree")
    version = given[0]
    if not isinstance(version, str) or version not in SUPPORTED_VERSIONS:
        shown = version if isinstance(version, str) and len(version) < 20 else "that value"
        raise Refused(
            "manifest_version",
            f"manifest version {shown} is not one this reader knows ({', '.join(SUPPORTED_VERSIONS)})",
        )
    return version


def _nesting(text: str) -> int:
    """How deep arrays and objects nest, counting brackets outside strings (linear, no recursion)."""
    brackets = _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise Refused(
            "manifest_invalid", f"manifest.json has an integer longer than {MAX_INTEGER_DIGITS} digits"
        )
    return int(digits)


def parse_manifest(data: bytes) -> Manifest:
    """Parse and check manifest.json bytes; raise ``Refused`` naming the field at fault."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("manifest_invalid", "manifest.json is not UTF-8") from None
    if _nesting(text) > MAX_NESTING:
        raise Refused(
            "manifest_too_deep", f"manifest.json nests arrays or objects more than {MAX_NESTING} deep"
        )
    try:
        raw = json.loads(
            text,
            object_pairs_hook=_refuse_duplicates,
            parse_constant=_no_constants,
            parse_int=_bounded_int,
        )
    except json.JSONDecodeError as exc:
        raise Refused("manifest_invalid", f"manifest.json is not JSON (line {exc.lineno})") from None
    except (RecursionError, ValueError, MemoryError) as exc:
        # The bounds above should make these unreachable; a parser limit is still a refusal.
        raise Refused("manifest_invalid", f"manifest.json cannot be parsed ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise Refused("manifest_invalid", "manifest.json is not a JSON object")
    version = _version_of(raw)
    for field, since in INTRODUCED_IN.items():
        if field in raw and version < since:
            raise Refused(
                "manifest_field_unknown",
                f"manifest field '{field}' is not part of manifest version {version} (it arrived in {since})",
            )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise _refusal(exc) from None
    if manifest.server.type == "uv" and version < UV_INTRODUCED_IN:
        raise Refused(
            "manifest_field_type",
            f"server.type 'uv' is not part of manifest version {version} (it arrived in {UV_INTRODUCED_IN})",
        )
    return manifest


def _refusal(exc: ValidationError) -> Refused:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = _location(tuple(first["loc"]))
    kind = first["type"]
    if kind == "missing":
        return Refused("manifest_field_missing", f"manifest field '{where}' is required")
    if kind == "extra_forbidden":
        return Refused(
            "manifest_field_unknown",
            f"manifest field '{where}' is not one this reader knows, and it accepts only what it can read",
        )
    message = str(first["msg"]).removeprefix("Value error, ")
    return Refused("manifest_field_type", f"manifest field '{where}': {message}")
