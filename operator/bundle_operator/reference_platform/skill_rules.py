"""The skill service: SKILL.md parsing, and GitHub skills fetched from a configurable base URL."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp

from bundle_operator.document.skill_md import SkillMdError, parse_skill_md
from bundle_operator.platform import kinds
from bundle_operator.platform.models import SkillCreate, SkillUpdate
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.kind_rules import KindRules, Stored
from bundle_operator.reference_platform.problems import ApiError, refused
from bundle_operator.reference_platform.storage import Row, Tx

MAX_SKILL_MD = 256 * 1024
# Front matter metadata is stored and shown with the skill. YAML aliases let a few hundred bytes
# stand for gigabytes once expanded, so what is stored is capped as it is built.
MAX_METADATA = 64 * 1024
MAX_METADATA_DEPTH = 32


class _MetadataTooLarge(Exception):
    """The expanded metadata passed its size or depth budget."""


def _key_text(key: Any) -> str:
    # YAML keys may be dates, numbers, null or booleans; JSON object keys are text.
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _plain(value: Any, budget: list[int], depth: int) -> Any:
    """``value`` as JSON data, charging its size to ``budget``; raises when it runs out."""
    if depth > MAX_METADATA_DEPTH:
        raise _MetadataTooLarge
    result: Any
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            text = _key_text(key)
            budget[0] -= len(text) + 4
            result[text] = _plain(item, budget, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        result = [_plain(item, budget, depth + 1) for item in value]
        budget[0] -= 2
    elif value is None or isinstance(value, bool):
        result = value
        budget[0] -= 5
    elif isinstance(value, int):
        result = value
        budget[0] -= len(str(value)) if abs(value) < 10**40 else MAX_METADATA
    elif isinstance(value, float):
        # NaN and infinities are not JSON: kept as text like other values JSON cannot carry.
        result = value if math.isfinite(value) else str(value)
        budget[0] -= 24
    else:
        # Strings, and dates, binary and other YAML values JSON cannot carry, kept as text.
        result = value if isinstance(value, str) else str(value)
        budget[0] -= len(result) + 2
    if budget[0] < 0:
        raise _MetadataTooLarge
    return result


def plain_metadata(metadata: dict[str, Any], field: str) -> dict[str, Any]:
    """Front matter metadata as JSON data of bounded size; 422 naming ``field`` when too large."""
    try:
        plain = _plain(metadata, [MAX_METADATA], 0)
    except (_MetadataTooLarge, RecursionError):
        raise refused(
            field,
            f"the SKILL.md front matter metadata is larger than {MAX_METADATA} bytes or nested deeper"
            f" than {MAX_METADATA_DEPTH} levels once expanded",
            code="limit_exceeded",
        ) from None
    assert isinstance(plain, dict)
    return plain


@dataclass(frozen=True)
class SkillSource:
    """A validated skill: its kind of source, the SKILL.md text and where it came from."""

    source_type: str
    content: str
    source_url: str | None


@dataclass(frozen=True)
class PreparedSkill:
    """A skill parsed and reduced to the bounded data to store, before its transaction."""

    data: dict[str, Any]


def raw_skill_url(source_url: str, base_url: str) -> str:
    """Where SKILL.md of a github.com tree/blob URL is fetched from, under ``base_url``.

    ``https://github.com/o/r/tree/main/skills/x`` becomes ``{base}/o/r/main/skills/x/SKILL.md``;
    a repository URL without a tree means the SKILL.md at the root of its HEAD.
    """
    parts = urlsplit(source_url)
    if parts.scheme != "https" or (parts.hostname or "").lower() not in ("github.com", "www.github.com"):
        raise refused("source_url", "must be an https://github.com/... URL", code="invalid_skill_source")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2 or any(s in (".", "..") for s in segments):
        raise refused("source_url", "must name an owner and a repository", code="invalid_skill_source")
    owner, repo = segments[0], segments[1].removesuffix(".git")
    if len(segments) == 2:
        ref, path = "HEAD", []
    elif len(segments) >= 4 and segments[2] in ("tree", "blob"):
        ref, path = segments[3], segments[4:]
    else:
        raise refused(
            "source_url",
            "must be a repository URL or a /tree/<ref>/<path> or /blob/<ref>/<path> URL",
            code="invalid_skill_source",
        )
    if path and path[-1] == "SKILL.md":
        path = path[:-1]
    tail = "/".join(quote(s, safe="") for s in [owner, repo, ref, *path, "SKILL.md"])
    return f"{base_url.rstrip('/')}/{tail}"


async def fetch_skill_md(ctx: Context, source_url: str) -> str:
    """Fetch SKILL.md for a GitHub skill; 422 when it is not there, 502 when the fetch fails."""
    url = raw_skill_url(source_url, ctx.config.github_base_url)
    try:
        async with ctx.http().get(url, allow_redirects=False) as response:
            if response.status == 404:
                raise refused(
                    "source_url", "no SKILL.md was found at this source", code="skill_source_not_found"
                )
            if response.status != 200:
                raise ApiError(
                    502, "skill_fetch_failed", f"fetching the skill answered HTTP {response.status}"
                )
            raw = await response.content.read(MAX_SKILL_MD + 1)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ApiError(
            502, "skill_fetch_failed", f"the skill could not be fetched ({type(exc).__name__})"
        ) from None
    if len(raw) > MAX_SKILL_MD:
        raise refused("source_url", f"SKILL.md is larger than {MAX_SKILL_MD} bytes", code="limit_exceeded")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise refused("source_url", "SKILL.md is not UTF-8 text", code="invalid_skill_md") from None


def skill_data(source: SkillSource, field: str) -> dict[str, Any]:
    """The stored skill, or a 422 naming the line of SKILL.md that the parser refused."""
    try:
        parsed = parse_skill_md(source.content)
    except SkillMdError as exc:
        raise refused(field, str(exc), code="invalid_skill_md", line=exc.line) from None
    metadata = plain_metadata(parsed.metadata, field)
    return {
        "name": parsed.name,
        "description": parsed.description,
        "source_type": source.source_type,
        "content": source.content,
        "source_url": source.source_url,
        "metadata": metadata,
    }


class SkillRules(KindRules):
    """Skills: the name and description come from the SKILL.md front matter."""

    kind = kinds.SKILLS
    held_by = (kinds.AGENTS.path,)

    async def prepare(self, ctx: Context, workspace: str, body: Any, current: Row | None) -> Any:
        if isinstance(body, SkillCreate):
            source_type, content, url = body.source_type, body.content, body.source_url
        else:
            assert isinstance(body, SkillUpdate) and current is not None
            source_type = current.data["source_type"]
            for field in ("content", "source_url"):
                if field in body.model_fields_set and getattr(body, field) is None:
                    raise refused(field, "must not be null")
            content = body.content if "content" in body.model_fields_set else None
            url = body.source_url if "source_url" in body.model_fields_set else None
            if content is None and url is None:
                return None  # nothing about the source changes
        if source_type == "inline":
            if url is not None:
                raise refused("source_url", "an inline skill takes content, not a source_url")
            if content is None:
                raise refused("content", "an inline skill needs content (the SKILL.md text)")
            source = SkillSource("inline", content, None)
        else:
            if content is not None:
                raise refused("content", "a github skill is fetched from source_url; it takes no content")
            if url is None:
                raise refused("source_url", "a github skill needs source_url")
            source = SkillSource("github", await fetch_skill_md(ctx, url), url)
        # Parsed here, before the transaction: the single writer thread must never spend its time
        # on what a request sent.
        return PreparedSkill(
            skill_data(source, "content" if source.source_type == "inline" else "source_url")
        )

    def create(self, tx: Tx, ctx: Context, workspace: str, entity_id: str, prepared: Any) -> Stored:
        assert isinstance(prepared, PreparedSkill)
        return dict(prepared.data), prepared.data["name"]

    def update(self, tx: Tx, ctx: Context, workspace: str, row: Row, prepared: Any) -> Stored:
        if prepared is None:
            return row.data, row.name
        return self.create(tx, ctx, workspace, row.id, prepared)
