"""The door's Host and Origin checks (gateway_door.py) and the platform's origin validation, on their own."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bundle_operator.platform.models import EndpointCreate, EndpointUpdate
from bundle_operator.reference_platform.gateway_door import Door, host_name, origin_key
from bundle_operator.reference_platform.problems import ApiError


def refused(check: object, *args: object) -> str | None:
    """The problem code ``check(*args)`` raises, or None when it lets the request in."""
    try:
        check(*args)  # type: ignore[operator]
    except ApiError as error:
        assert error.status == 403
        return error.code
    return None


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("Gw.Example:8443", "gw.example"),
        ("gw.example", "gw.example"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1:9", "127.0.0.1"),
    ],
)
def test_a_host_is_compared_by_its_name(given: str, name: str) -> None:
    assert host_name(given) == name


def test_origins_compare_without_case_or_the_default_port() -> None:
    assert origin_key("HTTPS://App.Example:443") == "https://app.example"
    assert origin_key("http://app.example:80") == "http://app.example"
    assert origin_key("http://app.example:8080") == "http://app.example:8080"
    assert origin_key("https://app.example:80") == "https://app.example:80"


def test_the_door_lets_in_the_public_host_loopback_and_allowed_hosts_only() -> None:
    door = Door(["gw.internal"])
    door.follow("https://mcp.example.com/mcp")
    for host in ("mcp.example.com", "MCP.example.com:443", "gw.internal:8080", "localhost:8080", "[::1]:80"):
        assert refused(door.check_host, host) is None, host
    for host in ("evil.example.com", "mcp.example.com.evil.example", None, ""):
        assert refused(door.check_host, host) == "host_not_allowed", host
    # The public URL is known only once the server has bound: the door follows it.
    door.follow("http://127.0.0.2:9000/mcp")
    assert refused(door.check_host, "mcp.example.com") == "host_not_allowed"
    assert refused(door.check_host, "127.0.0.2:9000") is None
    assert refused(Door(["*"]).check_host, "evil.example.com") is None


def test_the_door_lets_in_no_origin_the_public_one_and_the_endpoints_own() -> None:
    door = Door()
    door.follow("https://mcp.example.com/mcp")
    own = frozenset({origin_key("https://app.example")})
    for origin in (None, "https://mcp.example.com", "https://MCP.example.com:443", "https://app.example"):
        assert refused(door.check_origin, origin, own) is None, origin
    for origin in ("http://mcp.example.com", "https://evil.example", "null", "https://app.example:8443"):
        assert refused(door.check_origin, origin, own) == "origin_not_allowed", origin


@pytest.mark.parametrize(
    "origin",
    ["https://app.example/", "https://app.example/x", "ftp://app.example", "app.example", "https://", "*"],
)
def test_an_allowed_origin_is_scheme_host_and_port_only(origin: str) -> None:
    with pytest.raises(ValidationError, match="allowed_origins"):
        EndpointUpdate(allowed_origins=[origin])


def test_allowed_origins_are_taken_with_a_port_or_an_ip() -> None:
    origins = ["https://app.example", "http://localhost:3000", "http://[::1]:8080", "http://10.0.0.1"]
    created = EndpointCreate(name="e", gateway_bundle_id="gwb_1", allowed_origins=origins)
    assert created.allowed_origins == origins
