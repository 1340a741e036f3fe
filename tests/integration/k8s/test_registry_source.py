"""Bundles from MCP Registry records (DESIGN.md §9.3, seed 003), against a stub registry over HTTPS.

The registry of tests/registry_stub.py runs in-process with its own CA and counts every read and
download, so each test can say not only why a record was refused but that nothing was fetched
that should not have been.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bundle_operator.k8s.bundle.sources import Resolved, SourceError, SourceSettings, clear_cache, resolve
from bundle_operator.k8s.bundle.status import bundle_status_fields
from bundle_operator.sources.models import BundleSource, RegistrySource, SourceStatus
from bundle_operator.sources.registry_source import pinned, resolve_registry
from tests.registry_stub import StubRegistry, archive, record_of, stub_registry
from tests.unit.mcpb.craft import make_signer, sign_bytes

SERVER = "io.github.example/weather"
pytestmark = [pytest.mark.integration, pytest.mark.anyio]


class NoObjects:
    """A registry source reads no ConfigMap or Secret."""

    async def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise AssertionError("a registry source read a ConfigMap")

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise AssertionError("a registry source read a Secret")


@pytest.fixture(scope="module")
def module_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubRegistry]:
    with stub_registry(tmp_path_factory.mktemp("registry")) as running:
        yield running


@pytest.fixture
def registry(module_registry: StubRegistry) -> StubRegistry:
    """The module's registry, emptied for each test."""
    for store in (
        module_registry.records,
        module_registry.latest,
        module_registry.files,
        module_registry.sequences,
        module_registry.raw,
        module_registry.redirects,
        module_registry.delays,
        module_registry.huge,
    ):
        store.clear()
    module_registry.hits.clear()
    return module_registry


@pytest.fixture
def settings(registry: StubRegistry, tmp_path: Path) -> SourceSettings:
    return SourceSettings(
        allow_private_sources=True,
        verify=registry.tls.client_context(),
        cache_dir=tmp_path,
        registry_timeout=2.0,
        download_timeout=5.0,
    )


def source(registry: StubRegistry, version: str = "latest", **fields: Any) -> dict[str, Any]:
    return {"registry": {"url": registry.url, "server": SERVER, "version": version, **fields}}


async def _resolve(spec: dict[str, Any], settings: SourceSettings) -> Resolved:
    return await resolve(BundleSource.model_validate(spec), "agents", NoObjects(), settings)


async def _refusal(spec: dict[str, Any], settings: SourceSettings) -> SourceError:
    with pytest.raises(SourceError) as caught:
        await _resolve(spec, settings)
    return caught.value


def _left_in(folder: Path) -> list[Path]:
    """What a test's download folder still holds: nothing, once a source is read or refused."""
    return list(folder.iterdir())


def _downloads(registry: StubRegistry) -> int:
    return sum(n for path, n in registry.hits.items() if path.startswith("/files/"))


# ------------------------------------------------------------------------------------ installable


async def test_a_record_with_a_digest_installs_its_archive_and_status_says_what_was_used(
    registry: StubRegistry, settings: SourceSettings, tmp_path: Path
) -> None:
    body = archive(version="1.2.0")
    registry.publish(SERVER, "1.2.0", body)

    resolved = await _resolve(source(registry), settings)

    assert resolved.parsed.bundle is not None
    assert [m.key for m in resolved.parsed.bundle.mcps] == ["weather"]
    assert resolved.source == SourceStatus(
        registry=registry.url,
        server=SERVER,
        version="1.2.0",
        package_url=registry.file_url("io.github.example_weather-1.2.0.mcpb"),
        sha256=hashlib.sha256(body).hexdigest(),
    )
    assert resolved.signature is not None and resolved.signature.status == "Unsigned"
    # Read, judged, read again right before the one download.
    assert registry.record_hits(SERVER, "latest") == 2
    assert _downloads(registry) == 1
    assert _left_in(tmp_path) == []
    fields = bundle_status_fields(resolved)
    assert fields["source"] == {
        "registry": registry.url,
        "server": SERVER,
        "version": "1.2.0",
        "packageUrl": registry.file_url("io.github.example_weather-1.2.0.mcpb"),
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    assert fields["setupFields"][0]["key"] == "api_key"


async def test_the_same_archive_is_not_downloaded_again(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive())
    first = await _resolve(source(registry), settings)
    again = await _resolve(source(registry), settings)
    assert again.parsed.digest == first.parsed.digest
    assert _downloads(registry) == 1
    # Every resolve reads the record (a new latest, a deletion); the second read only guards a download.
    assert registry.record_hits(SERVER, "latest") == 3


async def test_latest_follows_a_new_version_and_the_digest_changes_only_with_the_archive(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive(version="1.2.0"))
    old = await _resolve(source(registry), settings)
    same = await _resolve(source(registry), settings)
    registry.publish(SERVER, "1.3.0", archive(version="1.3.0"))
    new = await _resolve(source(registry), settings)

    assert same.parsed.digest == old.parsed.digest
    assert new.source is not None and new.source.version == "1.3.0"
    assert new.parsed.bundle is not None and new.parsed.bundle.version == "1.3.0"
    assert new.parsed.digest != old.parsed.digest


async def test_a_pinned_version_stays_when_a_newer_one_is_published(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive(version="1.2.0"))
    registry.publish(SERVER, "1.3.0", archive(version="1.3.0"))
    resolved = await _resolve(source(registry, "1.2.0"), settings)
    assert resolved.source is not None and resolved.source.version == "1.2.0"


async def test_a_spec_digest_stands_in_for_a_record_that_gives_none(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    body = archive()
    registry.publish(SERVER, "1.2.0", body, sha256=None)
    digest = hashlib.sha256(body).hexdigest()
    resolved = await _resolve(source(registry, fileSha256=digest), settings)
    assert resolved.source is not None and resolved.source.sha256 == digest


async def test_a_signed_archive_reports_its_signer(registry: StubRegistry, settings: SourceSettings) -> None:
    registry.publish(SERVER, "1.2.0", sign_bytes(archive(), make_signer("ec", "Weather Publisher")))
    resolved = await _resolve(source(registry), settings)
    assert resolved.signature is not None
    assert resolved.signature.status == "Signed"
    assert resolved.signature.subject is not None and "Weather Publisher" in resolved.signature.subject


async def test_a_deprecated_record_installs_with_a_warning(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive(), status="deprecated", status_message="use 2.x\x1b[31m")
    resolved = await _resolve(source(registry), settings)
    assert resolved.parsed.bundle is not None
    assert resolved.warnings == (f"{SERVER} 1.2.0 is deprecated in the registry: use 2.x\\x1b[31m",)


async def test_an_installation_reuses_what_its_bundle_resolved_without_reading_again(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive(version="1.2.0"))
    spec = RegistrySource.model_validate(source(registry)["registry"])
    resolved = await resolve_registry(spec, settings)
    assert resolved.source is not None
    registry.publish(SERVER, "1.3.0", archive(version="1.3.0"))
    reads = registry.record_hits(SERVER, "1.2.0") + registry.record_hits(SERVER, "latest")

    again = await resolve_registry(pinned(spec, resolved.source), settings, reuse=True)

    assert again.parsed.digest == resolved.parsed.digest  # 1.2.0, not the newer latest
    assert registry.record_hits(SERVER, "1.2.0") + registry.record_hits(SERVER, "latest") == reads
    clear_cache()  # another process: it reads the pinned version, never latest
    fresh = await resolve_registry(pinned(spec, resolved.source), settings, reuse=True)
    assert fresh.parsed.digest == resolved.parsed.digest
    assert registry.record_hits(SERVER, "1.2.0") == 2


# -------------------------------------------------------------------------------- Stalled reasons


async def test_an_unknown_server_is_not_found(registry: StubRegistry, settings: SourceSettings) -> None:
    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("RegistryRecordNotFound", True)
    assert error.message == f"spec.source.registry: {SERVER} latest is not in the registry"


async def test_an_unknown_version_is_not_found(registry: StubRegistry, settings: SourceSettings) -> None:
    registry.publish(SERVER, "1.2.0", archive())
    error = await _refusal(source(registry, "9.9.9"), settings)
    assert error.reason == "RegistryRecordNotFound"


async def test_a_deleted_version_reads_as_deleted_not_missing(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive(), status="deleted", status_message="malicious package")
    error = await _refusal(source(registry, "1.2.0"), settings)
    assert (error.reason, error.permanent) == ("RegistryRecordDeleted", True)
    assert "malicious package" in error.message
    assert _downloads(registry) == 0


async def test_a_record_without_an_mcpb_package_is_refused(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    npm = {
        "registryType": "npm",
        "identifier": "@example/weather",
        "version": "1.2.0",
        "transport": {"type": "stdio"},
    }
    registry.publish(SERVER, "1.2.0", packages=[npm])
    error = await _refusal(source(registry), settings)
    assert error.reason == "RegistryNoMcpbPackage"
    assert error.message.endswith("has no mcpb package (it has npm packages)")


async def test_a_remote_only_record_is_refused_as_offered_as_a_remote_server(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    record = registry.publish(SERVER, "1.2.0", packages=[])
    del record["server"]["packages"]
    record["server"]["remotes"] = [{"type": "streamable-http", "url": "https://mcp.example.com/weather"}]
    error = await _refusal(source(registry), settings)
    assert error.reason == "RegistryNoMcpbPackage"
    assert (
        "it is offered as a remote server (streamable-http https://mcp.example.com/weather)" in error.message
    )
    assert "it has no packages" not in error.message
    assert _downloads(registry) == 0


def _builds(registry: StubRegistry, *platforms: list[str]) -> list[dict[str, Any]]:
    """One mcpb package per platform list, each an archive whose manifest declares those platforms."""
    packages = []
    for declared in platforms:
        body = archive(version="1.2.0", compatibility={"platforms": declared})
        url, sha = registry.serve_file(f"weather-{'-'.join(declared)}.mcpb", body)
        packages.append({"registryType": "mcpb", "identifier": url, "fileSha256": sha, "version": "1.2.0"})
    return packages


async def test_of_several_mcpb_packages_the_build_for_this_platform_is_used(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    packages = _builds(registry, ["darwin"], ["linux"], ["win32"])
    registry.publish(SERVER, "1.2.0", packages=packages)
    spec = RegistrySource.model_validate(source(registry)["registry"])

    resolved = await resolve_registry(spec, settings)

    assert resolved.parsed.bundle is not None and not resolved.parsed.blocking
    assert resolved.source is not None
    assert (resolved.source.package_url, resolved.source.sha256) == (
        registry.file_url("weather-linux.mcpb"),
        packages[1]["fileSha256"],
    )
    assert registry.hits["/files/weather-win32.mcpb"] == 0  # read in order, up to the one that fits
    clear_cache()  # an installation in another process: the pinned digest names the same build
    again = await resolve_registry(pinned(spec, resolved.source), settings, reuse=True)
    assert again.source == resolved.source
    assert registry.hits["/files/weather-darwin.mcpb"] == 1


async def test_several_mcpb_packages_none_for_this_platform_are_refused_naming_each(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", packages=_builds(registry, ["darwin"], ["win32", "darwin"]))
    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("RegistryNoCompatiblePackage", True)
    assert error.message == (
        f"spec.source.registry: none of the 2 mcpb packages of {SERVER} 1.2.0 runs on this platform: "
        f"{registry.file_url('weather-darwin.mcpb')}: the bundle supports darwin, not linux; "
        f"{registry.file_url('weather-win32-darwin.mcpb')}: the bundle supports win32, darwin, not linux"
    )


async def test_no_digest_anywhere_downloads_nothing(registry: StubRegistry, settings: SourceSettings) -> None:
    registry.publish(SERVER, "1.2.0", archive(), sha256=None)
    error = await _refusal(source(registry), settings)
    assert error.reason == "RegistryChecksumMissing"
    assert "fileSha256" in error.message
    assert _downloads(registry) == 0


async def test_a_spec_digest_that_differs_from_the_records_downloads_nothing(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive())
    error = await _refusal(source(registry, fileSha256="0" * 64), settings)
    assert error.reason == "RegistryChecksumConflict"
    assert _downloads(registry) == 0


@pytest.mark.parametrize(
    ("identifier", "shown"),
    [
        ("http://127.0.0.1:9/weather.mcpb", "not an https URL (http)"),
        ("ftp://127.0.0.1/weather.mcpb", "not an https URL (ftp)"),
        ("https://publisher:s3cret-pass@127.0.0.1:9/weather.mcpb", "carries credentials"),
        ("https://", "not an https URL"),
        # httpx raises IDNAError and UnicodeEncodeError for these, not InvalidURL: no traceback.
        ("https://xn--/weather.mcpb", "cannot be read as a URL"),
        ("https://127.0.0.1:9/\udfff.mcpb", "cannot be read as a URL"),
    ],
)
async def test_a_package_url_that_is_not_plain_https_is_refused(
    registry: StubRegistry, settings: SourceSettings, identifier: str, shown: str
) -> None:
    registry.publish(SERVER, "1.2.0", archive(), identifier=identifier)
    error = await _refusal(source(registry), settings)
    assert error.reason == "InsecurePackageUrl"
    assert shown in error.message
    assert "s3cret-pass" not in error.message
    assert _downloads(registry) == 0


async def test_bytes_that_differ_from_the_record_are_never_used(
    registry: StubRegistry, settings: SourceSettings, tmp_path: Path
) -> None:
    registry.publish(SERVER, "1.2.0", archive(), sha256=hashlib.sha256(b"another archive").hexdigest())
    for _ in range(2):  # refused again: a mismatch is never cached as good
        error = await _refusal(source(registry), settings)
        assert (error.reason, error.permanent) == ("ChecksumMismatch", True)
        assert "does not match the SHA-256 its registry record gives, so it was not used" in error.message
    assert _left_in(tmp_path) == []


async def test_an_archive_the_reader_refuses_is_refused(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", b"PK\x03\x04 this is not a zip archive")
    error = await _refusal(source(registry), settings)
    assert error.reason == "ArchiveRefused"
    assert error.message.startswith("spec.source.registry: the archive is refused")


async def test_an_archive_over_128_mib_is_refused_without_reading_it(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive(), sha256="a" * 64)
    path = "/files/io.github.example_weather-1.2.0.mcpb"
    registry.huge.add(path)  # declares a terabyte, sends nothing
    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("ArchiveRefused", True)
    assert "at most 134217728" in error.message


async def test_a_record_that_changes_between_the_two_reads_is_not_used(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    before = registry.publish(SERVER, "1.2.0", archive(version="1.2.0"))
    other = archive(version="1.2.0", description="changed under our feet")
    url, digest = registry.serve_file("swapped.mcpb", other)
    after = record_of(
        SERVER, "1.2.0", [{**before["server"]["packages"][0], "identifier": url, "fileSha256": digest}]
    )
    registry.answer_in_turn(SERVER, "latest", before, after)

    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("RegistryRecordChanged", True)
    assert _downloads(registry) == 0

    # The next reconcile starts over with a fresh read, and uses what the record now says.
    resolved = await _resolve(source(registry), settings)
    assert resolved.source is not None and resolved.source.sha256 == digest
    assert registry.hits["/files/swapped.mcpb"] == 1


async def test_a_package_url_that_redirects_to_a_private_address_is_refused(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive())
    path = "/files/io.github.example_weather-1.2.0.mcpb"
    registry.redirects[path] = "https://169.254.169.254/latest/meta-data/"
    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("FetchFailed", True)
    assert "169.254.169.254 resolves to a non-public address" in error.message
    assert registry.hits[path] == 1  # asked once, followed nowhere


async def test_a_registry_on_a_private_address_is_refused_unless_allowed(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive())
    strict = SourceSettings(verify=settings.verify, cache_dir=settings.cache_dir)
    error = await _refusal(source(registry), strict)
    assert (error.reason, error.permanent) == ("RegistryRefused", True)
    assert "non-public address (127.0.0.1)" in error.message
    assert registry.record_hits(SERVER, "latest") == 0


async def test_a_slow_registry_is_bounded_by_its_timeout_and_retried(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish(SERVER, "1.2.0", archive())
    registry.delays[f"/v0.1/servers/{SERVER.replace('/', '%2F')}/versions/latest"] = 6.0
    started = time.monotonic()
    error = await _refusal(source(registry), settings)
    assert time.monotonic() - started < 4.0  # registry_timeout is 2 s
    assert (error.reason, error.permanent) == ("RegistryUnavailable", False)
    assert "took too long" in error.message


async def test_a_registry_error_is_retried(registry: StubRegistry, settings: SourceSettings) -> None:
    registry.raw[f"/v0.1/servers/{SERVER.replace('/', '%2F')}/versions/latest"] = (503, b"{}")
    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("RegistryUnavailable", False)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"<html>maintenance</html>", "the answer is not JSON (line 1, column 1)"),
        (b"\xff\xfe{}", "the answer is not UTF-8 text"),
        (b"[]", "the answer is not a JSON object"),
        (b'{"server": {"name": "x/y"}}', "/server/version is missing or not a string"),
        (b'{"server": {"name": "a/b", "version": "1", "packages": {}}}', "/server/packages is not a list"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b'{"pad": "' + b"x" * (1024 * 1024) + b'"}', "too large"),
        (b'{"server": {"name": "a/b", "version": "1", "n": ' + b"9" * 5000 + b"}}", "a number too long"),
        (b'{"server": {"name": "a/b", "version": "1", "n": -Infinity}}', "NaN or Infinity"),
        (
            b'{"server": {"name": "a/b", "version": "1", "x": ' + b"[" * 40 + b"]" * 40 + b"}}",
            "over 32 levels",
        ),
    ],
)
async def test_an_answer_that_is_not_a_record_is_refused(
    registry: StubRegistry, settings: SourceSettings, body: bytes, detail: str
) -> None:
    registry.raw[f"/v0.1/servers/{SERVER.replace('/', '%2F')}/versions/latest"] = (200, body)
    error = await _refusal(source(registry), settings)
    assert (error.reason, error.permanent) == ("RegistryRecordInvalid", True)
    assert detail in error.message
    assert _downloads(registry) == 0


async def test_a_record_of_another_server_or_version_is_not_believed(
    registry: StubRegistry, settings: SourceSettings
) -> None:
    registry.publish("io.github.example/other", "1.2.0", archive())
    registry.records[(SERVER, "1.2.0")] = registry.records[("io.github.example/other", "1.2.0")]
    error = await _refusal(source(registry, "1.2.0"), settings)
    assert (error.reason, error.message) == (
        "RegistryRecordInvalid",
        f"spec.source.registry: asked for {SERVER}, the registry answered with a record of another server",
    )
    registry.records[(SERVER, "2.0.0")] = record_of(SERVER, "1.2.0", [])
    error = await _refusal(source(registry, "2.0.0"), settings)
    assert "answered with version 1.2.0" in error.message


@pytest.mark.parametrize(
    "server",
    [
        "../etc",
        "io.github.example/..",
        "./weather",
        "a/b/c",
        "a%2Fb/c",
        "a/b%2F..",
        "noslash",
        "a/ b",
        "a/b\n",
    ],
)
def test_a_server_name_with_path_tricks_is_refused_by_the_spec(server: str) -> None:
    with pytest.raises(ValidationError) as caught:
        BundleSource.model_validate({"registry": {"url": "https://registry.example", "server": server}})
    assert caught.value.errors()[0]["loc"] == ("registry", "server")


@pytest.mark.parametrize(
    "url", ["http://registry.example", "https://registry.example/?q=1", "https://r.example/#x"]
)
def test_a_registry_url_that_is_not_a_plain_https_base_is_refused_by_the_spec(url: str) -> None:
    with pytest.raises(ValidationError):
        BundleSource.model_validate({"registry": {"url": url, "server": SERVER}})


def test_names_the_registry_accepts_pass() -> None:
    for server in ("io.github.owner/name", "com.example/my_server-2", "a.b/.well-known", "x/..."):
        BundleSource.model_validate({"registry": {"url": "https://registry.example/", "server": server}})
