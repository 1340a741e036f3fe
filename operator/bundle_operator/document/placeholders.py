"""``${setup.<key>}`` placeholders: where they may stand, finding them, and substituting values."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from bundle_operator.document.models import Bundle, UrlMcp
from bundle_operator.document.pointer import join_pointer

# Anything that looks like an attempt at a setup placeholder, so a typo is reported, not ignored.
# An opening with no "}" after it matches to the end of the text and is no placeholder (_closed):
# a start that could fail would be tried again from every later "${setup.", each reading to the end.
_PLACEHOLDER = re.compile(r"\$\{\s*setup\.([^}]*+)(?:\}|\Z)")
_WHOLE = re.compile(r"^\$\{setup\.([a-zA-Z][a-zA-Z0-9_]*)\}\Z")


@dataclass(frozen=True)
class Site:
    """A string in the document where setup placeholders are substituted at install time."""

    pointer: str
    text: str
    entity: str


def _closed(match: re.Match[str]) -> bool:
    """Whether a match of ``_PLACEHOLDER`` is a placeholder: an opening that a ``}`` closes."""
    return match.group().endswith("}")


def references(text: str) -> list[str]:
    """The setup keys a string refers to, in order (malformed ones included as written)."""
    return [match.group(1) for match in _PLACEHOLDER.finditer(text) if _closed(match)]


def has_reference(text: str) -> bool:
    """Whether the string holds anything that looks like a setup placeholder."""
    return "${" in text and any(_closed(match) for match in _PLACEHOLDER.finditer(text))


def whole_reference(text: str) -> str | None:
    """The key when the string is exactly one ``${setup.<key>}`` and nothing else."""
    match = _WHOLE.match(text.strip())
    return match.group(1) if match else None


def substitute(text: str, lookup: Callable[[str], str]) -> str:
    """Replace every placeholder with ``lookup(key)``; inserted values are never expanded again."""
    return _PLACEHOLDER.sub(lambda m: lookup(m.group(1).strip()) if _closed(m) else m.group(), text)


def sites(bundle: Bundle) -> Iterator[Site]:
    """Every string where placeholders may stand: MCP env, headers, args, endpoint_url,
    context_secret, channel bot tokens, and knowledge source credentials."""
    for index, mcp in enumerate(bundle.mcps):
        base = join_pointer("/mcps", index)
        entity = f"mcp:{mcp.key}"
        if isinstance(mcp, UrlMcp):
            yield Site(join_pointer(base, "endpoint_url"), mcp.endpoint_url, entity)
            yield from _mapping_sites(join_pointer(base, "headers"), mcp.headers, entity)
        else:
            for arg_index, arg in enumerate(mcp.args):
                yield Site(join_pointer(base, "args", arg_index), arg, entity)
            yield from _mapping_sites(join_pointer(base, "env"), mcp.env, entity)
        if mcp.context_secret is not None:
            yield Site(join_pointer(base, "context_secret"), mcp.context_secret, entity)
    for index, channel in enumerate(bundle.channels):
        pointer = join_pointer("/channels", index, "bot_token")
        yield Site(pointer, channel.bot_token, f"channel:{channel.key}")
    for index, knowledge_set in enumerate(bundle.knowledge_sets):
        for key, source in knowledge_set.sources.items():
            base = join_pointer("/knowledge_sets", index, "sources", key, "credentials")
            yield from _mapping_sites(base, source.credentials, f"knowledge_set:{knowledge_set.key}")


def _mapping_sites(base: str, values: Mapping[str, str], entity: str) -> Iterator[Site]:
    for name, value in values.items():
        yield Site(join_pointer(base, name), value, entity)
