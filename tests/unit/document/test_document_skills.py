"""Skills: SKILL.md front matter is parsed, and an error names the skill and the line."""

from __future__ import annotations

from typing import Any

import pytest

from bundle_operator.document.skill_md import SkillMdError, parse_skill_md
from tests.unit.document.builders import analyze, only_issue

TEXT = """schema_version: "0.1.0"
name: skills
skills:
  - key: triage
    source_type: inline
    content: |
      ---
      name: triage
      description: Triage: label the issue
      ---
      # Triage
"""


def test_invalid_front_matter_names_skill_and_document_line() -> None:
    issue = only_issue(analyze(TEXT, {}), "invalid_skill_frontmatter")
    assert issue.entity == "skill:triage"
    assert issue.path == "/skills/0/content"
    assert "skill 'triage'" in issue.message
    assert "SKILL.md line 3" in issue.message
    assert issue.line == 9  # the description line of the bundle document
    assert issue.blocking


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        ("# no front matter\n", 1, "must start with YAML front matter"),
        ("---\nname: x\ndescription: y\n", 1, "not closed"),
        ("---\n- a\n- b\n---\n", 2, "must be a mapping"),
        ("---\ndescription: y\n---\n", 2, "needs a 'name'"),
        ("---\nname: x\n---\n", 2, "needs a 'description'"),
        ("---\nname: Not Valid\ndescription: y\n---\n", 2, "lowercase"),
        ("---\nname: ok\ndescription: " + "d" * 1025 + "\n---\n", 3, "longer than 1024"),
        ("---\nname: x\ndescription: [unclosed\n---\n", 3, "not valid YAML"),
        ("---\nname: x\ndescription: y\nmeta: &a [1, 2]\nmore: [*a, *a]\n---\n", 4, "anchors or aliases"),
    ],
)
def test_skill_md_rules(content: str, line: int, words: str) -> None:
    with pytest.raises(SkillMdError) as caught:
        parse_skill_md(content)
    assert caught.value.line == line
    assert words in caught.value.message


@pytest.mark.parametrize(
    ("front", "line", "words"),
    [
        ("name: first\ndescription: y\nname: second\n", 4, "the key 'name' twice (first on line 2)"),
        ('name: x\ndescription: y\n"description": z\n', 4, "the key 'description' twice (first on line 3)"),
        ("name: x\ndescription: y\nyes: 1\ntrue: 2\n", 5, "the key 'true' twice (first on line 4)"),
        ("name: x\ndescription: y\nversion: 1\n'1': a\n1: b\n", 6, "the key '1' twice (first on line 5)"),
        (
            "name: x\ndescription: y\nmetadata:\n  author: a\n  tags: [t]\n  author: b\n",
            7,
            "the key 'author' twice (first on line 5)",
        ),
        (
            "name: x\ndescription: y\nsteps:\n  - {run: a, run: b}\n",
            5,
            "the key 'run' twice (first on line 5)",
        ),
    ],
    ids=["name", "quoted-key", "yes-and-true", "1-and-'1'", "nested", "flow-in-a-list"],
)
def test_skill_md_refuses_a_key_given_twice(front: str, line: int, words: str) -> None:
    with pytest.raises(SkillMdError) as caught:
        parse_skill_md(f"---\n{front}---\nBody\n")
    assert caught.value.line == line
    assert words in caught.value.message
    assert "YAML would keep only the last" in caught.value.message


def test_a_duplicate_key_in_a_skill_is_a_blocking_issue_naming_its_line(doc: dict[str, Any]) -> None:
    doc["skills"][0]["content"] = "---\nname: triage\ndescription: Triage\nname: other\n---\n# Triage\n"
    issue = only_issue(analyze(doc), "invalid_skill_frontmatter")
    assert issue.blocking
    assert "SKILL.md line 4" in issue.message
    assert "the key 'name' twice (first on line 2)" in issue.message


def test_same_key_names_in_different_mappings_are_not_duplicates() -> None:
    parsed = parse_skill_md(
        "---\nname: x\ndescription: y\nmetadata:\n  name: inner\nsteps:\n  - {run: a}\n  - {run: b}\n---\n"
    )
    assert parsed.metadata == {"metadata": {"name": "inner"}, "steps": [{"run": "a"}, {"run": "b"}]}


def test_a_quoted_key_names_its_own_line() -> None:
    with pytest.raises(SkillMdError) as caught:
        parse_skill_md('---\ndescription: y\n"name": Not Valid\n---\n')
    assert caught.value.line == 3


def test_skill_md_accepts_a_good_one_and_keeps_the_body() -> None:
    parsed = parse_skill_md(
        "\n---\nname: release-notes\ndescription: 'Write notes: short'\nlicense: MIT\n---\nBody\n"
    )
    assert (parsed.name, parsed.description, parsed.metadata, parsed.body) == (
        "release-notes",
        "Write notes: short",
        {"license": "MIT"},
        "Body",
    )


def test_front_matter_error_in_a_quoted_content_points_at_the_content_line(doc: dict[str, Any]) -> None:
    doc["skills"][0]["content"] = "no front matter at all"
    issue = only_issue(analyze(doc), "invalid_skill_frontmatter")
    assert issue.line is not None


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://github.com/acme/skills", True),
        ("https://github.com/acme/skills/tree/main/skills/triage", True),
        ("http://github.com/acme/skills", False),
        ("https://gitlab.com/acme/skills", False),
        ("https://github.com/acme", False),
        ("https://github.com/acme/skills/tree/main/../../etc", False),
        ("https://user:pw@github.com/acme/skills", False),
    ],
)
def test_github_skill_source_url(doc: dict[str, Any], url: str, ok: bool) -> None:
    doc["skills"].append({"key": "remote", "source_type": "github", "source_url": url})
    preview = analyze(doc)
    assert (not [i for i in preview.issues if i.code == "invalid_skill_source"]) == ok


def test_github_skill_needs_source_url_not_content(doc: dict[str, Any]) -> None:
    doc["skills"].append({"key": "remote", "source_type": "github", "content": "---\n"})
    codes = sorted(str(i.code) for i in analyze(doc).issues)
    assert codes == ["invalid_document", "unknown_field"]
