"""Skill checks: inline SKILL.md front matter and GitHub source URLs."""

from __future__ import annotations

import re

from bundle_operator.document.issues import Code, Issue, blocking
from bundle_operator.document.models import Bundle, InlineSkill
from bundle_operator.document.pointer import join_pointer
from bundle_operator.document.skill_md import SkillMdError, parse_skill_md
from bundle_operator.document.source import SourceMap

# https://github.com/<owner>/<repo>[/tree/<ref>/<path to the skill folder>]
GITHUB_SKILL_URL = re.compile(
    r"^https://github\.com/[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}"
    r"(?:/tree/[A-Za-z0-9._/-]+)?/?\Z"
)


def check_skills(bundle: Bundle, source_map: SourceMap | None = None) -> list[Issue]:
    """Inline skills must carry SKILL.md front matter that parses; GitHub skills a GitHub URL."""
    issues: list[Issue] = []
    for index, skill in enumerate(bundle.skills):
        entity = f"skill:{skill.key}"
        if isinstance(skill, InlineSkill):
            pointer = join_pointer("/skills", index, "content")
            try:
                parse_skill_md(skill.content)
            except SkillMdError as exc:
                issue = blocking(
                    Code.INVALID_SKILL_FRONTMATTER,
                    f"skill '{skill.key}': SKILL.md line {exc.line}: {exc.message}",
                    pointer,
                    entity,
                )
                issues.append(issue.with_line(_document_line(source_map, pointer, exc.line)))
        else:
            if not GITHUB_SKILL_URL.match(skill.source_url) or "/../" in skill.source_url + "/":
                issues.append(
                    blocking(
                        Code.INVALID_SKILL_SOURCE,
                        f"source_url of skill '{skill.key}' must be https://github.com/<owner>/<repo>, "
                        "optionally followed by /tree/<ref>/<folder>",
                        join_pointer("/skills", index, "source_url"),
                        entity,
                    )
                )
    return issues


def _document_line(source_map: SourceMap | None, pointer: str, inner: int | None) -> int | None:
    """Map a line inside the SKILL.md text to a line of the bundle document, where the text allows."""
    if source_map is None:
        return None
    position = source_map.scalar(pointer)
    if position is None:
        return source_map.line_of(pointer)
    if position.style in ("|", ">") and inner is not None:
        # A block scalar's text starts on the line after its indicator.
        return position.line + inner
    return position.line
