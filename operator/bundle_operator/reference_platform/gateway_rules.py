"""The gateway's rules: presented names, self-reference, prompt templates and size limits."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

# The name rules and size limits analyze checks too, from their one definition.
from bundle_operator.document.gateway_rules import MAX_PROMPT_TEXT as MAX_PROMPT_TEXT
from bundle_operator.document.gateway_rules import MAX_PROMPTS as MAX_PROMPTS
from bundle_operator.document.gateway_rules import MAX_RESOURCE as MAX_RESOURCE
from bundle_operator.document.gateway_rules import MAX_RESOURCES as MAX_RESOURCES
from bundle_operator.document.gateway_rules import MAX_RESOURCES_TOTAL as MAX_RESOURCES_TOTAL
from bundle_operator.document.names import SEPARATOR as SEPARATOR
from bundle_operator.document.names import SLUG_MAX, member_name_problem, prompt_name_problem
from bundle_operator.document.prompt_text import placeholder_names
from bundle_operator.platform.models import GatewayPromptPut
from bundle_operator.reference_platform.context import Context
from bundle_operator.reference_platform.problems import ApiError, conflict, refused

# Kinds of the entries stored under a gateway bundle.
MEMBER = "gw-member"
TOOL = "gw-tool"
MEMBER_PROMPT = "gw-member-prompt"
MEMBER_RESOURCE = "gw-member-resource"
PROMPT = "gw-prompt"
RESOURCE = "gw-resource"

# The member order request names every member and takes at most this many names.
MAX_MEMBERS = 200
# The longest name a presented tool can have: ``member__tool`` of two slugs (an override is one).
MAX_PRESENTED_NAME = SLUG_MAX + len(SEPARATOR) + SLUG_MAX

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class _Place:
    scheme: str
    host: str
    port: int
    segments: tuple[str, ...]


def remove_dot_segments(segments: list[str]) -> list[str]:
    """RFC 3986 section 5.2.4 on a path split at '/': '.' goes, '..' drops the segment before it."""
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    return out


def _host(hostname: str) -> str:
    """One spelling per host: loopback names and addresses are all the same machine."""
    host = hostname.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return "loopback"
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        try:
            # Legacy IPv4 spellings a resolver still accepts: 2130706433, 127.1, 0x7f.0.0.1.
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return "loopback" if address.is_loopback else str(address)


def _place(url: str) -> _Place | None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    # Percent-escapes, dot segments, doubled and trailing slashes are other spellings of the path.
    segments = tuple(remove_dot_segments([s for s in unquote(parts.path).split("/") if s]))
    return _Place(scheme, _host(parts.hostname), port or _DEFAULT_PORTS[scheme], segments)


def is_gateway_endpoint(url: str, public_url: str) -> bool:
    """Whether ``url`` is ``{public_url}/{any name}/mcp`` however it is spelled."""
    target, base = _place(url), _place(public_url)
    if target is None or base is None:
        return False
    if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
        return False
    prefix = base.segments
    rest = target.segments[len(prefix) :]
    return target.segments[: len(prefix)] == prefix and len(rest) == 2 and rest[1].lower() == "mcp"


def check_not_self(ctx: Context, url: str, field: str) -> None:
    """Refuse a member URL that would make the gateway call itself."""
    if is_gateway_endpoint(url, ctx.public_url):
        raise conflict(
            "gateway_self_reference",
            f"{field} is one of this gateway's own MCP endpoints; a bundle cannot include the gateway",
            field=field,
        )


def check_member_name(name: str) -> None:
    """Member names prefix presented names, so ``member__tool`` must split back unambiguously."""
    problem = member_name_problem(name)
    if problem is not None:
        raise refused("member", problem)


def split_entry_id(entry_id: str) -> tuple[str, str] | None:
    """(member, name) from ``member__name``, split at the first '__'."""
    member, sep, name = entry_id.partition(SEPARATOR)
    if not sep or not member or not name:
        return None
    return member, name


def prompt_text_size(prompt: GatewayPromptPut) -> int:
    """Bytes of message text in a prompt (embedded resources are counted with the resources)."""
    return sum(len(m.text.encode()) for m in prompt.messages if m.text is not None)


def check_prompt(prompt: GatewayPromptPut, resources: set[str]) -> None:
    """Refuse a prompt whose name, placeholders or embedded resources the gateway cannot serve."""
    # The size first: the placeholders of text over the limit are never read.
    size = prompt_text_size(prompt)
    if size > MAX_PROMPT_TEXT:
        raise limit(
            "messages", f"the prompt has {size} bytes of message text; the limit is {MAX_PROMPT_TEXT}"
        )
    problem = prompt_name_problem(prompt.name)
    if problem is not None:
        raise refused("name", f"a bundle prompt name {problem}")
    declared: set[str] = set()
    for i, argument in enumerate(prompt.arguments):
        if argument.name in declared:
            raise refused(f"arguments.{i}.name", f"'{argument.name}' is declared twice")
        declared.add(argument.name)
    for i, message in enumerate(prompt.messages):
        if message.text is not None:
            for placeholder in placeholder_names(message.text):
                if placeholder not in declared:
                    raise refused(
                        f"messages.{i}.text",
                        f"the placeholder '{{{{{placeholder}}}}}' names no declared argument",
                        code="undeclared_placeholder",
                    )
        elif message.resource not in resources:
            raise refused(
                f"messages.{i}.resource",
                f"the bundle has no resource '{message.resource}'",
                code="unknown_resource",
            )


def limit(field: str, message: str) -> ApiError:
    """A 422 for a write over one of the gateway's limits; nothing is truncated."""
    return refused(field, message, code="limit_exceeded")
