"""Turning pydantic validation errors into issues with JSON Pointer paths a user can follow."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bundle_operator.document.issues import Code, Issue, blocking
from bundle_operator.document.pointer import to_pointer

MAX_REPORTED = 200


def validation_issues(error: ValidationError, data: Any) -> list[Issue]:
    """One issue per pydantic error, its path walked against the input so union tags drop out."""
    issues: list[Issue] = []
    seen: set[tuple[str, str]] = set()
    for detail in error.errors(include_url=False, include_input=False):
        tokens = _real_path(tuple(detail["loc"]), data)
        pointer = to_pointer(tokens)
        kind = detail["type"]
        if kind == "extra_forbidden":
            code = Code.UNKNOWN_FIELD
            message = f"{pointer}: unknown field '{tokens[-1] if tokens else ''}'"
        elif kind == "missing":
            code = Code.INVALID_DOCUMENT
            message = f"{pointer}: this field is required"
        else:
            code = Code.INVALID_DOCUMENT
            message = f"{pointer or '/'}: {_describe(detail)}"
        if (pointer, message) in seen:
            continue
        seen.add((pointer, message))
        issues.append(blocking(code, message, pointer, _entity(tokens, data)))
        if len(issues) >= MAX_REPORTED:
            break
    return issues


def _describe(detail: Any) -> str:
    # pydantic's messages are good, but some quote the input; ours never repeat a value.
    kind = detail["type"]
    ctx = detail.get("ctx") or {}
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', 'the allowed values')}"
    if kind == "union_tag_invalid":
        return f"type must be one of {ctx.get('expected_tags', 'the allowed types')}"
    if kind == "union_tag_not_found":
        return f"'{ctx.get('discriminator', 'type').strip(chr(39))}' is required to tell which kind this is"
    message = str(detail.get("msg", "invalid value"))
    return message[0].lower() + message[1:] if message else "invalid value"


def _real_path(loc: tuple[Any, ...], data: Any) -> list[str | int]:
    """Walk pydantic's location against the data, dropping tags that are not in the document."""
    tokens: list[str | int] = []
    node = data
    for position, part in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(node, list) and isinstance(part, int):
            tokens.append(part)
            node = node[part] if 0 <= part < len(node) else None
        elif isinstance(node, dict):
            if not last and isinstance(part, str) and part in (node.get("type"), node.get("source_type")):
                continue  # the tag of a discriminated union (an MCP's type, a skill's source_type)
            if part in node:
                tokens.append(part)
                node = node[part]
            elif last and isinstance(part, str):
                tokens.append(part)  # a missing field, named by its place
            # else: a discriminator tag or validator name, not a place in the document
        else:
            break
    return tokens


_SECTIONS = {
    "mcps": "mcp",
    "skills": "skill",
    "knowledge_sets": "knowledge_set",
    "agents": "agent",
    "apps": "app",
    "channels": "channel",
    "automations": "automation",
    "policies": "policy",
    "setup": "setup",
}


def _entity(tokens: list[str | int], data: Any) -> str | None:
    """``kind:key`` of the entity a path falls in, when its key can be read."""
    if len(tokens) >= 1 and tokens[0] == "gateway":
        return "gateway:gateway"
    if len(tokens) < 2 or not isinstance(tokens[0], str) or tokens[0] not in _SECTIONS:
        return None
    try:
        key = data[tokens[0]][tokens[1]]["key"]
    except (KeyError, IndexError, TypeError):
        return None
    return f"{_SECTIONS[tokens[0]]}:{key}" if isinstance(key, str) else None
