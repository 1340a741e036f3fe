"""URL checks for fields that must hold an http(s) URL."""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(value: str) -> str | None:
    """Why a string is not a usable absolute http(s) URL, or None; the reason never quotes the URL."""
    if not value or value != value.strip() or any(ch.isspace() for ch in value):
        return "it is empty or contains whitespace"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return "it cannot be parsed as a URL"
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if not parts.hostname:
        return "it has no host"
    if port == 0:
        return "the port must be between 1 and 65535"
    return None
