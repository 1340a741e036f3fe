"""Issuer metadata is looked for where the MCP SDK's own client looks (DESIGN.md §9.6)."""

from __future__ import annotations

import pytest
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls

from bundle_operator.reference_platform.issuer_metadata import metadata_urls


@pytest.mark.parametrize(
    "issuer",
    ["https://as.example", "https://as.example/", "https://as.example/tenants/x", "https://as.example/t/x/"],
)
def test_the_order_is_the_sdk_clients(issuer: str) -> None:
    assert metadata_urls(issuer) == build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer)


def test_a_path_goes_after_the_well_known_name_first() -> None:
    assert metadata_urls("https://as.example/tenants/x")[0] == (
        "https://as.example/.well-known/oauth-authorization-server/tenants/x"
    )
