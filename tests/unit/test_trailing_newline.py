"""A name, version or digest with a newline after it is refused: Python's ``$`` matches before a
final newline, so a pattern ending in ``$`` checked with ``match`` let ``1.0.0\\n`` through."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from bundle_operator.mcpb.manifest import Localization, Runtimes
from bundle_operator.mcpb.setup_fields import setup_key
from bundle_operator.registry.names import InvalidName, check_registry_url, check_server_name, check_version
from bundle_operator.registry.records import RecordInvalid, parse_record

SHA = "ab" * 32


@pytest.mark.parametrize(
    ("check", "good"),
    [
        (check_version, "1.0.0"),
        (check_server_name, "io.example/weather"),
        (check_registry_url, "https://registry.example.com"),
    ],
)
def test_registry_names_and_versions_refuse_a_trailing_newline(check: object, good: str) -> None:
    assert callable(check)
    assert check(good)
    with pytest.raises(InvalidName):
        check(good + "\n")


def _record(sha: str) -> bytes:
    package = {"registryType": "mcpb", "identifier": "https://example.com/w.mcpb", "fileSha256": sha}
    server = {"name": "io.example/weather", "version": "1.0.0", "packages": [package]}
    return json.dumps({"server": server}).encode()


def test_a_record_digest_with_a_trailing_newline_is_not_a_digest() -> None:
    assert parse_record(_record(SHA)).packages[0].file_sha256 == SHA
    with pytest.raises(RecordInvalid, match="fileSha256"):
        parse_record(_record(SHA + "\n"))


def test_manifest_locales_and_runtime_ranges_refuse_a_trailing_newline() -> None:
    Localization(resources="x/${locale}.json", default_locale="en-US")
    with pytest.raises(ValidationError):
        Localization(resources="x/${locale}.json", default_locale="en-US\n")
    Runtimes(node=">=18")
    with pytest.raises(ValidationError):
        Runtimes(node=">=18\n")


def test_a_user_config_key_with_a_trailing_newline_is_made_a_valid_key() -> None:
    assert setup_key("api_key") == "api_key"
    assert setup_key("api_key\n") == "api_key_"
