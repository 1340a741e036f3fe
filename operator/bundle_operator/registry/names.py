"""The registry's server names and versions, as the CRD and bundlectl accept them (DESIGN.md §9.3).

A server name is ``namespace/name``: exactly one ``/``, each part of letters, digits, ``.``, ``_``
and ``-``, neither part ``.`` or ``..``. The pattern is written without look-arounds so that the
same text serves as the CRD's OpenAPI pattern (the API server matches with RE2).
"""

from __future__ import annotations

import re
from urllib.parse import quote

# A part of a name that is not "." or "..": starts with a non-dot, or with one or two dots
# followed by at least one more character (so "..." and ".well-known" pass, "." and ".." do not).
_PART = r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]*|\.[A-Za-z0-9_-][A-Za-z0-9._-]*|\.\.[A-Za-z0-9._-]+)"
SERVER_NAME_PATTERN = rf"^{_PART}/{_PART}$"
SERVER_NAME_MAX = 200
# A version as the registry publishes it (semantic or not, with build metadata), or "latest".
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"
VERSION_MAX = 255
LATEST = "latest"
# The registry's base URL: https, no query, fragment or whitespace (paths are appended to it).
REGISTRY_URL_PATTERN = r"^https://[^\s?#]+$"

_SERVER_NAME = re.compile(SERVER_NAME_PATTERN)
_VERSION = re.compile(VERSION_PATTERN)
_REGISTRY_URL = re.compile(REGISTRY_URL_PATTERN)


class InvalidName(ValueError):
    """A server name, version or registry URL that cannot be used; the message says which and why."""


def check_server_name(name: str) -> str:
    """``name`` when it is a registry server name; else ``InvalidName`` saying what is wrong."""
    if len(name) > SERVER_NAME_MAX:
        raise InvalidName(f"the server name is longer than {SERVER_NAME_MAX} characters")
    if not _SERVER_NAME.fullmatch(name):
        raise InvalidName(
            "the server name must be namespace/name: one '/', each part of letters, digits, '.', "
            "'_' or '-', neither part '.' or '..'"
        )
    return name


def check_version(version: str) -> str:
    """``version`` when it is a registry version or ``latest``; else ``InvalidName``."""
    if len(version) > VERSION_MAX or not _VERSION.fullmatch(version):
        raise InvalidName(
            "the version must be 'latest' or a published version: letters, digits, '.', '_', '+' "
            f"or '-', starting with a letter or digit, at most {VERSION_MAX} characters"
        )
    return version


def check_registry_url(url: str) -> str:
    """``url`` without its trailing ``/`` when it is an https base URL; else ``InvalidName``."""
    # The pattern is RE2's too, so it says nothing of control characters or lone surrogates (an
    # argument that was not UTF-8): those are refused here, before httpx trips over them.
    if not _REGISTRY_URL.fullmatch(url) or not url.isprintable():
        raise InvalidName(
            "the registry URL must be https, with no query string, fragment or control characters"
        )
    return url.rstrip("/")


def record_path(server: str, version: str) -> str:
    """The API v0.1 path of one version's record; the name's '/' is sent encoded, as the API asks."""
    return f"/v0.1/servers/{quote(server, safe='')}/versions/{quote(version, safe='')}"
