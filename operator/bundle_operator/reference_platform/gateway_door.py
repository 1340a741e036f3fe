"""DNS-rebinding protection at the endpoint routes: the ``Host`` and ``Origin`` checks (DESIGN.md §9.6).

A page on another site can reach the platform through a name that resolves to it, but the browser
then sends that site's name as ``Host`` and its origin as ``Origin``. So a ``Host`` must be one the
platform is reached by (the public URL's, the loopback names, any ``--allowed-host``) and an
``Origin``, when sent, must be the public URL's or one the endpoint allows. Both checks are set
lookups on lowercased strings: they run on every request.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from bundle_operator.reference_platform.problems import ApiError

# A client on the platform's own machine reaches it by these; a rebinding page never sends them as
# Host, since its browser sends the name the page's site used.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
ANY_HOST = "*"
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def host_name(host: str) -> str:
    """The name in a ``Host`` header or an ``--allowed-host``, lowercased, without port or brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host  # a bare name, or an IPv6 address without brackets


def origin_key(origin: str) -> str:
    """An origin as compared: lowercased, without the scheme's default port."""
    origin = origin.strip().lower().rstrip("/")
    scheme, _, rest = origin.partition("://")
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None and rest.endswith(f":{default}") and not rest.endswith("]"):
        origin = origin[: -len(default) - 1]
    return origin


def url_origin(url: str) -> str:
    """The origin of a URL, as ``origin_key`` gives it."""
    parts = urlsplit(url)
    return origin_key(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}")


class Door:
    """The hosts and origins the platform is reached from, following its public URL."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        given = {host_name(h) for h in allowed_hosts}
        self.any_host = ANY_HOST in given
        self._given = frozenset(given - {ANY_HOST}) | LOOPBACK_HOSTS
        self._public_url = ""
        self._hosts = self._given
        self._origin = ""

    def follow(self, public_url: str) -> None:
        """Take the public URL's host and origin; the URL is known once the server has bound."""
        if public_url != self._public_url:
            hostname = urlsplit(public_url).hostname or ""
            self._hosts = self._given | {hostname.lower()}
            self._origin = url_origin(public_url)
            self._public_url = public_url

    def check_host(self, host: str | None) -> None:
        """403 ``host_not_allowed`` unless ``host`` names the platform."""
        if self.any_host or (host is not None and host_name(host) in self._hosts):
            return
        raise ApiError(
            403,
            "host_not_allowed",
            "the Host header names no host this platform serves (see --public-url and --allowed-host)",
        )

    def check_origin(self, origin: str | None, allowed: frozenset[str]) -> None:
        """403 ``origin_not_allowed`` when an ``Origin`` is sent that is neither the public URL's
        nor one of ``allowed`` (the endpoint's ``allowed_origins``, as ``origin_key`` gives them)."""
        if origin is None:
            return
        key = origin_key(origin)
        if key == self._origin or key in allowed:
            return
        raise ApiError(
            403,
            "origin_not_allowed",
            "requests from this Origin are not allowed on this endpoint (see its allowed_origins)",
        )
