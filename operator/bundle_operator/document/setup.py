"""Setup fields: their declarations, the placeholders that use them, and the values an installer gives.

Values are never echoed in a message: a setup value may be a credential even when the field is
not declared ``secret``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundle_operator.document import placeholders
from bundle_operator.document.issues import Code, Issue, blocking, shown, warning
from bundle_operator.document.keys import KEY_PATTERN
from bundle_operator.document.models import Bundle, SetupField
from bundle_operator.document.pointer import join_pointer, to_pointer
from bundle_operator.document.urls import url_problem

_BOOLEAN_WORDS = {"true": True, "false": False}
_NUMBER = re.compile(r"^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")


@dataclass(frozen=True)
class ResolvedSetup:
    """Setup values as strings, ready to substitute, with the issues found resolving them."""

    values: dict[str, str]
    issues: list[Issue]


def check_declarations(bundle: Bundle) -> list[Issue]:
    """A default must fit its field's type, and a secret field takes no default."""
    issues: list[Issue] = []
    for index, field in enumerate(bundle.setup):
        pointer = join_pointer("/setup", index, "default")
        entity = f"setup:{field.key}"
        if field.default is None:
            continue
        if field.type == "secret":
            issues.append(
                blocking(
                    Code.INVALID_SETUP_DEFAULT,
                    f"setup field '{field.key}' is a secret and cannot carry a default",
                    pointer,
                    entity,
                )
            )
            continue
        problem = _value_problem(field, field.default)
        if problem is not None:
            issues.append(
                blocking(
                    Code.INVALID_SETUP_DEFAULT,
                    f"the default of setup field '{field.key}' {problem}",
                    pointer,
                    entity,
                )
            )
    return issues


def check_placeholders(bundle: Bundle) -> list[Issue]:
    """Placeholders must name declared setup fields, and only stand where they are substituted."""
    declared = {field.key for field in bundle.setup}
    issues: list[Issue] = []
    site_pointers: set[str] = set()
    for site in placeholders.sites(bundle):
        site_pointers.add(site.pointer)
        for key in placeholders.references(site.text):
            if key.strip() in declared and KEY_PATTERN.match(key.strip()):
                continue
            issues.append(
                blocking(
                    Code.UNKNOWN_SETUP_REFERENCE,
                    f"{site.pointer} refers to ${{setup.{key}}}, but no setup field has that key",
                    site.pointer,
                    site.entity,
                )
            )
    used = {key.strip() for site in placeholders.sites(bundle) for key in placeholders.references(site.text)}
    for index, field in enumerate(bundle.setup):
        if field.key not in used:
            issues.append(
                warning(
                    Code.UNUSED_SETUP_FIELD,
                    f"setup field '{field.key}' is declared but nothing refers to it",
                    join_pointer("/setup", index, "key"),
                    f"setup:{field.key}",
                )
            )
    for pointer in _placeholder_strings(bundle.model_dump(mode="json", exclude_none=True)):
        if pointer in site_pointers:
            continue
        issues.append(
            warning(
                Code.PLACEHOLDER_NOT_SUBSTITUTED,
                f"{pointer} contains a ${{setup.…}} placeholder, but setup values are only substituted "
                "in MCP env, headers, args, endpoint_url, context_secret and channel bot_token",
                pointer,
            )
        )
    return issues


def _placeholder_strings(value: Any) -> list[str]:
    """Pointers of the strings holding a placeholder; pointers are built only for those."""
    found: list[str] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        current, tokens = stack.pop()
        if isinstance(current, str):
            if placeholders.has_reference(current):
                found.append(to_pointer(tokens))
        elif isinstance(current, dict):
            stack.extend((v, (*tokens, k)) for k, v in current.items())
        elif isinstance(current, list):
            stack.extend((v, (*tokens, i)) for i, v in enumerate(current))
    found.sort()
    return found


def resolve(bundle: Bundle, supplied: Mapping[str, object]) -> ResolvedSetup:
    """Match supplied values to the declared fields: required ones present, each fitting its type."""
    issues: list[Issue] = []
    values: dict[str, str] = {}
    declared = {field.key: field for field in bundle.setup}
    for key in sorted(set(supplied) - set(declared)):
        # The key came from the user (a file, the command line, a Secret): quoted only escaped and
        # cut short, so no key can tear the output. It has no place in the document: no path.
        issues.append(
            warning(
                Code.UNKNOWN_SETUP_KEY,
                f"a value was given for setup key '{shown(key)}', which the bundle does not declare; "
                "it is ignored",
                entity=f"setup:{shown(key, 256)}",
            )
        )
    for index, field in enumerate(bundle.setup):
        pointer = join_pointer("/setup", index)
        entity = f"setup:{field.key}"
        raw = supplied.get(field.key)
        if raw is None or (isinstance(raw, str) and raw == "" and field.required):
            if field.default is not None and field.type != "secret":
                values[field.key] = _as_text(field.default)
            elif field.required:
                issues.append(
                    blocking(
                        Code.MISSING_SETUP,
                        f"setup field '{field.key}' ({field.label}) is required and has no value",
                        pointer,
                        entity,
                    )
                )
            continue
        problem = _value_problem(field, raw)
        if problem is not None:
            issues.append(
                blocking(
                    Code.INVALID_SETUP_VALUE,
                    f"the value given for setup field '{field.key}' {problem}",
                    pointer,
                    entity,
                )
            )
            continue
        values[field.key] = _normalized(field, raw)
    return ResolvedSetup(values, issues)


def _normalized(field: SetupField, value: object) -> str:
    if field.type == "boolean" and isinstance(value, str):
        return value.lower()
    if field.type == "number" and isinstance(value, str):
        return value.strip()
    return _as_text(value)


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _value_problem(field: SetupField, value: object) -> str | None:
    """Why a value does not fit the field's type, in words that never repeat the value."""
    if isinstance(value, str) and not _is_text(value):
        return "is not valid Unicode text (it holds a lone surrogate, or bytes that are not UTF-8)"
    if field.type == "boolean":
        if isinstance(value, bool) or (isinstance(value, str) and value.lower() in _BOOLEAN_WORDS):
            return None
        return "must be true or false"
    if field.type == "number":
        if isinstance(value, bool):
            return "must be a number"
        if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.match(value.strip())):
            return None
        return "must be a number"
    if not isinstance(value, str):
        return "must be text"
    if field.type == "url":
        problem = url_problem(value)
        return None if problem is None else f"must be an http(s) URL: {problem}"
    return None
