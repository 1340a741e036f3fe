"""Where an OAuth issuer's metadata is looked for (DESIGN.md §9.6), in the MCP SDK client's order."""

from __future__ import annotations

from urllib.parse import urlsplit

OAUTH_METADATA = "/.well-known/oauth-authorization-server"
OIDC_METADATA = "/.well-known/openid-configuration"


def metadata_urls(issuer: str) -> list[str]:
    """The metadata URLs of ``issuer``, first tried first.

    An issuer with a path has its well-known documents with the path inserted after them (RFC 8414
    §3.1 and §5), then OpenID Connect's appended form; an issuer at a host's root has its two.
    """
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [origin + OAUTH_METADATA, origin + OIDC_METADATA]
    return [origin + OAUTH_METADATA + path, origin + OIDC_METADATA + path, origin + path + OIDC_METADATA]
