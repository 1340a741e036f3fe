"""Gateway rules that need no platform (seed 002): presented names, the bundle's own prompts and
resources, and their limits.

Names a member's upstream adds later can only be checked by the platform; here every name the
document itself presents must be unique.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from bundle_operator.document.issues import Code, Issue, blocking, blocking_for
from bundle_operator.document.models import Bundle, Gateway
from bundle_operator.document.names import (
    SEPARATOR,
    member_name_problem,
    prompt_name_problem,
    resource_name_problem,
    slug_problem,
)
from bundle_operator.document.pointer import join_pointer
from bundle_operator.document.prompt_text import placeholder_names


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)

GATEWAY_ENTITY = "gateway:gateway"

# The reference platform enforces the same limits, from here.
MAX_PROMPTS = 100
MAX_RESOURCES = 200
MAX_PROMPT_TEXT = 64 * 1024
MAX_RESOURCE = 256 * 1024
MAX_RESOURCES_TOTAL = 4 * 1024 * 1024


def presented_tool_name(member: str, tool: str, override_name: str | None) -> str:
    """The name a client sees for a member tool."""
    return override_name or f"{member}{SEPARATOR}{tool}"


def check_gateway(bundle: Bundle) -> list[Issue]:
    """Every gateway rule that the document alone decides."""
    gateway = bundle.gateway
    if gateway is None:
        return []
    issues: list[Issue] = []
    issues.extend(_members(gateway))
    issues.extend(_tools(gateway))
    issues.extend(_member_entries(gateway))
    resource_names = {r.name for r in gateway.resources}
    issues.extend(_prompts(gateway, resource_names))
    issues.extend(_resources(gateway))
    return issues


def _issue(code: Code, message: str, pointer: str) -> Issue:
    return blocking(code, message, pointer, GATEWAY_ENTITY)


def _named(
    items: Sequence[N], what: str, limit: int, name_problem: Callable[[str], str | None], issues: list[Issue]
) -> Iterator[tuple[N, str]]:
    """Each of the gateway's own prompts or resources with its pointer, after the checks they share
    (how many, a usable name, no name twice) have added their issues."""
    path = f"/gateway/{what}s"
    if len(items) > limit:
        message = f"the gateway has {len(items)} {what}s; at most {limit} are allowed"
        issues.append(_issue(Code.GATEWAY_LIMIT, message, path))
    seen: set[str] = set()
    for index, item in enumerate(items):
        pointer = join_pointer(path, index)
        problem = name_problem(item.name)
        if problem is not None:
            message = f"{what} name '{item.name}' {problem}"
            issues.append(_issue(Code.GATEWAY_INVALID_NAME, message, join_pointer(pointer, "name")))
        if item.name in seen:
            issues.append(_issue(Code.GATEWAY_DUPLICATE, f"{what} '{item.name}' is declared twice", pointer))
        seen.add(item.name)
        yield item, pointer


def _unusable(name: str) -> str | None:
    problem = resource_name_problem(name)
    return None if problem is None else f"is not usable: {problem}"


def _members(gateway: Gateway) -> list[Issue]:
    issues: list[Issue] = []
    seen: set[str] = set()
    for index, member in enumerate(gateway.members):
        pointer = join_pointer("/gateway/members", index)
        if member in seen:
            issues.append(_issue(Code.GATEWAY_DUPLICATE, f"member '{member}' is listed twice", pointer))
        seen.add(member)
        problem = member_name_problem(member)
        if problem is not None:
            issues.append(_issue(Code.GATEWAY_INVALID_NAME, f"member '{member}' {problem}", pointer))
    return issues


def _not_a_member(gateway: Gateway, member: str, pointer: str) -> list[Issue]:
    if member in gateway.members:
        return []
    return [
        _issue(
            Code.UNKNOWN_REFERENCE,
            f"{pointer} names member '{member}', which is not in gateway.members",
            pointer,
        )
    ]


def _tools(gateway: Gateway) -> list[Issue]:
    issues: list[Issue] = []
    seen: dict[tuple[str, str], int] = {}
    # presented name -> (who holds it, its pointer); prefixed names first so an override that
    # collides with one is the entry reported.
    holders: dict[str, tuple[str, str]] = {}
    for index, tool in enumerate(gateway.tools):
        pointer = join_pointer("/gateway/tools", index)
        issues.extend(_not_a_member(gateway, tool.member, join_pointer(pointer, "member")))
        pair = (tool.member, tool.tool)
        if pair in seen:
            issues.append(
                _issue(
                    Code.GATEWAY_DUPLICATE,
                    f"tool '{tool.tool}' of member '{tool.member}' is curated twice "
                    f"(also at /gateway/tools/{seen[pair]})",
                    pointer,
                )
            )
            continue
        seen[pair] = index
        holders.setdefault(
            f"{tool.member}{SEPARATOR}{tool.tool}", (f"{tool.member}{SEPARATOR}{tool.tool}", pointer)
        )
    for index, tool in enumerate(gateway.tools):
        if tool.override_name is None:
            continue
        pointer = join_pointer("/gateway/tools", index, "override_name")
        name = tool.override_name
        own = f"{tool.member}{SEPARATOR}{tool.tool}"
        problem = slug_problem(name)
        if problem is not None:
            issues.append(
                _issue(Code.GATEWAY_INVALID_NAME, f"override_name of tool '{own}' {problem}", pointer)
            )
            continue
        if name == own:
            continue
        holder = holders.get(name)
        if holder is not None:
            issues.append(
                _issue(
                    Code.GATEWAY_NAME_CONFLICT,
                    f"override_name '{name}' of tool '{own}' is already presented by {holder[0]} "
                    f"({holder[1]})",
                    pointer,
                )
            )
        else:
            holders[name] = (f"the override of tool '{own}'", pointer)
    return issues


def _member_entries(gateway: Gateway) -> list[Issue]:
    prompts = [(p.member, "prompt", p.name) for p in gateway.member_prompts]
    resources = [(r.member, "resource", r.uri) for r in gateway.member_resources]
    return [
        *_curated_once(gateway, "/gateway/member_prompts", prompts),
        *_curated_once(gateway, "/gateway/member_resources", resources),
    ]


def _curated_once(gateway: Gateway, section: str, entries: list[tuple[str, str, str]]) -> list[Issue]:
    """Each entry, as (member, what, name), belongs to a member of the gateway and is curated once."""
    issues: list[Issue] = []
    seen: set[tuple[str, str]] = set()
    for index, (member, what, name) in enumerate(entries):
        pointer = join_pointer(section, index)
        issues.extend(_not_a_member(gateway, member, join_pointer(pointer, "member")))
        if (member, name) in seen:
            message = f"{what} '{name}' of member '{member}' is curated twice"
            issues.append(_issue(Code.GATEWAY_DUPLICATE, message, pointer))
        seen.add((member, name))
    return issues


def _prompts(gateway: Gateway, resource_names: set[str]) -> list[Issue]:
    issues: list[Issue] = []
    for prompt, pointer in _named(gateway.prompts, "prompt", MAX_PROMPTS, prompt_name_problem, issues):
        declared: set[str] = set()
        for arg_index, argument in enumerate(prompt.arguments):
            arg_pointer = join_pointer(pointer, "arguments", arg_index, "name")
            issues += blocking_for(
                slug_problem(argument.name),
                Code.GATEWAY_INVALID_NAME,
                f"argument '{argument.name}' of prompt '{prompt.name}'",
                arg_pointer,
                GATEWAY_ENTITY,
            )
            if argument.name in declared:
                issues.append(
                    _issue(
                        Code.GATEWAY_DUPLICATE,
                        f"argument '{argument.name}' of prompt '{prompt.name}' is declared twice",
                        arg_pointer,
                    )
                )
            declared.add(argument.name)
        if not prompt.messages:
            issues.append(
                _issue(
                    Code.PROMPT_INVALID_MESSAGE,
                    f"prompt '{prompt.name}' has no messages",
                    join_pointer(pointer, "messages"),
                )
            )
        text_bytes = 0
        for msg_index, message in enumerate(prompt.messages):
            msg_pointer = join_pointer(pointer, "messages", msg_index)
            if (message.text is None) == (message.resource is None):
                issues.append(
                    _issue(
                        Code.PROMPT_INVALID_MESSAGE,
                        f"message {msg_index} of prompt '{prompt.name}' must have exactly one of text "
                        "or resource",
                        msg_pointer,
                    )
                )
                continue
            if message.text is not None:
                text_bytes += len(message.text.encode("utf-8"))
                for name in placeholder_names(message.text):
                    if name not in declared:
                        issues.append(
                            _issue(
                                Code.PROMPT_UNDECLARED_ARGUMENT,
                                f"message {msg_index} of prompt '{prompt.name}' uses {{{{{name}}}}}, "
                                "which is not a declared argument",
                                join_pointer(msg_pointer, "text"),
                            )
                        )
            elif message.resource is not None and message.resource not in resource_names:
                issues.append(
                    _issue(
                        Code.PROMPT_UNKNOWN_RESOURCE,
                        f"message {msg_index} of prompt '{prompt.name}' embeds resource "
                        f"'{message.resource}', which the gateway does not declare",
                        join_pointer(msg_pointer, "resource"),
                    )
                )
        if text_bytes > MAX_PROMPT_TEXT:
            issues.append(
                _issue(
                    Code.GATEWAY_LIMIT,
                    f"prompt '{prompt.name}' has {text_bytes} bytes of message text; at most "
                    f"{MAX_PROMPT_TEXT} (64 KiB) are allowed",
                    join_pointer(pointer, "messages"),
                )
            )
    return issues


def _resources(gateway: Gateway) -> list[Issue]:
    issues: list[Issue] = []
    total = 0
    for resource, pointer in _named(gateway.resources, "resource", MAX_RESOURCES, _unusable, issues):
        size = len(resource.content.encode("utf-8"))
        total += size
        if size > MAX_RESOURCE:
            issues.append(
                _issue(
                    Code.GATEWAY_LIMIT,
                    f"resource '{resource.name}' is {size} bytes; at most {MAX_RESOURCE} (256 KiB) allowed",
                    join_pointer(pointer, "content"),
                )
            )
    if total > MAX_RESOURCES_TOTAL:
        issues.append(
            _issue(
                Code.GATEWAY_LIMIT,
                f"the gateway's resources hold {total} bytes together; at most {MAX_RESOURCES_TOTAL} (4 MiB) "
                "are allowed",
                "/gateway/resources",
            )
        )
    return issues
