"""SKILL.md parsing: the YAML front matter that names and describes a skill.

The same parser serves the document analyzer and the reference platform's skill service, so a
skill the preview accepts is a skill the platform accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from bundle_operator.document.issues import shown

NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\Z")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
_FENCE = "---"
_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class SkillMd:
    """A parsed SKILL.md: its front matter fields and the Markdown body after it."""

    name: str
    description: str
    metadata: dict[str, Any]
    body: str


class SkillMdError(ValueError):
    """A SKILL.md that cannot be used; ``line`` is 1-based within the SKILL.md text."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line is not None else self.message


def _first_alias(front: str) -> int | None:
    """The 0-based line of the first anchor or alias in the front matter, if any."""
    try:
        for event in yaml.parse(front, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                return int(event.start_mark.line) if event.start_mark is not None else 0
    except yaml.YAMLError:
        return None  # the loader below reports the syntax error with its line
    return None


def _load(front: str, offset: int, end: int) -> tuple[Any, dict[str, int]]:
    """The front matter's value and the 1-based line of each top-level key; SkillMdError if unusable."""
    loader = _LOADER(front)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _refuse_duplicate_keys(node, loader, offset)
        lines = {str(key.value): offset + key.start_mark.line + 1 for key, _ in _pairs(node)}
        return loader.construct_document(node), lines
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = offset + mark.line + 1 if mark is not None else offset + 1
        line = max(offset + 1, min(line, end))  # an error "at the end" is on the last front-matter line
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SkillMdError(f"front matter is not valid YAML: {problem}", line) from None
    finally:
        loader.dispose()


def _pairs(node: yaml.Node) -> list[tuple[yaml.Node, yaml.Node]]:
    return list(node.value) if isinstance(node, yaml.MappingNode) else []


def _refuse_duplicate_keys(root: yaml.Node, loader: Any, offset: int) -> None:
    """Refuse a key given twice in any mapping, where YAML would keep the last one silently."""
    stack = [root]  # no recursion: nesting is as deep as the text makes it
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack += node.value
            continue
        seen: dict[object, int] = {}
        for key, value in _pairs(node):
            stack.append(value)
            if not isinstance(key, yaml.ScalarNode):
                continue  # a complex key cannot be a dict key: constructing it reports that
            # Compare what the keys are, not how they are written: "name" and name are one key, and
            # at the top, 1 and "1" are too (metadata's keys are strings).
            constructed = loader.construct_object(key)
            identity = str(constructed) if node is root else constructed
            line = offset + key.start_mark.line + 1
            try:
                first = seen.get(identity)
            except TypeError:
                continue  # an unhashable key (!!seq a): constructing the mapping reports it
            if first is not None:
                raise SkillMdError(
                    f"front matter has the key '{shown(str(key.value))}' twice (first on line {first}); "
                    "YAML would keep only the last",
                    line,
                )
            seen[identity] = line


def parse_skill_md(content: str) -> SkillMd:
    """Parse SKILL.md text; raises SkillMdError naming the line when the front matter is unusable."""
    lines = content.splitlines()
    first = next((i for i, text in enumerate(lines) if text.strip()), None)
    if first is None or lines[first].rstrip() != _FENCE:
        raise SkillMdError("SKILL.md must start with YAML front matter between '---' lines", 1)
    end = next((i for i in range(first + 1, len(lines)) if lines[i].rstrip() == _FENCE), None)
    if end is None:
        raise SkillMdError("front matter is not closed by a '---' line", first + 1)
    offset = first + 1  # 0-based index of the first front-matter line
    front = "\n".join(lines[offset:end])
    alias = _first_alias(front)
    if alias is not None:
        # Aliases cost nothing to parse and everything to store or serialise: a few hundred bytes
        # can stand for gigabytes. Front matter has no use for them.
        raise SkillMdError("front matter may not use YAML anchors or aliases", offset + alias + 1)
    data, key_lines = _load(front, offset, end)  # a safe loader: the C one when present
    if not isinstance(data, dict):
        raise SkillMdError("front matter must be a mapping of fields", offset + 1)

    def line_of(field: str) -> int:
        return key_lines.get(field, offset + 1)

    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillMdError("front matter needs a 'name' string", line_of("name"))
    if len(name) > MAX_NAME or not NAME_PATTERN.match(name):
        raise SkillMdError(
            f"'name' must be lowercase letters, digits and single hyphens, at most {MAX_NAME} characters",
            line_of("name"),
        )
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillMdError("front matter needs a 'description' string", line_of("description"))
    if len(description) > MAX_DESCRIPTION:
        raise SkillMdError(
            f"'description' is longer than {MAX_DESCRIPTION} characters", line_of("description")
        )
    metadata = {str(k): v for k, v in data.items() if k not in ("name", "description")}
    body = "\n".join(lines[end + 1 :])
    return SkillMd(name=name, description=description, metadata=metadata, body=body)
