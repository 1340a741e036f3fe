"""JSON Pointers (RFC 6901), the way every issue and drift report names a place in a document."""

from __future__ import annotations

from collections.abc import Iterable


def escape_token(token: str | int) -> str:
    """Escape one reference token."""
    return str(token).replace("~", "~0").replace("/", "~1")


def join_pointer(base: str, *tokens: str | int) -> str:
    """Append tokens to a pointer: join_pointer('/mcps', 0, 'env') == '/mcps/0/env'."""
    return base + "".join("/" + escape_token(t) for t in tokens)


def to_pointer(tokens: Iterable[str | int]) -> str:
    """A pointer from a sequence of tokens; the empty sequence is the whole document ('')."""
    return join_pointer("", *tokens)


def split_pointer(pointer: str) -> list[str]:
    """The unescaped tokens of a pointer."""
    if not pointer:
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"a JSON Pointer starts with '/': {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]
