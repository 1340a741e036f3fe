"""bundlectl registry search/show and analyze of a registry record, against the stub registry.

bundlectl runs as a user runs it (a subprocess with an empty environment), trusting the stub's CA
with --ca-file or SSL_CERT_FILE and reaching loopback only with --allow-private-sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.engine.conftest import TOKEN
from tests.integration.platform.platform_harness import PlatformProcess
from tests.registry_stub import StubRegistry, archive, record_of, stub_registry

pytestmark = [pytest.mark.integration]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
SERVER = "io.github.example/weather"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubRegistry]:
    with stub_registry(tmp_path_factory.mktemp("registry")) as running:
        running.publish(SERVER, "1.1.0", archive(version="1.1.0"))
        running.publish(SERVER, "1.2.0", archive(version="1.2.0"))
        running.publish("io.github.example/no-digest", "0.1.0", archive(), sha256=None)
        running.publish(
            "io.github.example/gone", "2.0.0", archive(), status="deleted", status_message="compromised"
        )
        running.publish(
            "io.github.example/npm-only",
            "3.0.0",
            packages=[{"registryType": "npm", "identifier": "@example/x", "transport": {"type": "stdio"}}],
        )
        running.publish(
            "io.github.example/tampered", "1.0.0", archive(), sha256=hashlib.sha256(b"x").hexdigest()
        )
        for n in range(5):
            running.publish(f"io.github.fleet/server-{n}", "1.0.0", archive())
        builds = []
        for platform in ("darwin", "win32"):
            body = archive(compatibility={"platforms": [platform]})
            url, sha = running.serve_file(f"other-{platform}.mcpb", body)
            builds.append({"registryType": "mcpb", "identifier": url, "fileSha256": sha})
        running.publish("io.github.builds/other-platforms", "1.0.0", packages=builds)
        remote = running.publish("io.github.builds/remote-only", "1.0.0", packages=[])
        remote["server"]["remotes"] = [{"type": "streamable-http", "url": "https://mcp.example.com/w"}]
        yield running


def bundlectl(
    registry: StubRegistry, *args: str, trusted: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    flags = ["--registry", registry.url, "--allow-private-sources"]
    if trusted:
        flags += ["--ca-file", str(registry.tls.ca_file)]
    # An empty environment, but for the PYTHONPATH that points a worktree's run at its own code.
    own = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return subprocess.run(
        [BUNDLECTL, *args, *flags], capture_output=True, text=True, check=False, env={**own, **(env or {})}
    )


def as_json(done: subprocess.CompletedProcess[str], code: int) -> dict[str, Any]:
    assert done.returncode == code, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


# ------------------------------------------------------------------------------------------- show


def test_show_prints_an_installable_record_and_the_archive_it_would_use(registry: StubRegistry) -> None:
    shown = as_json(bundlectl(registry, "registry", "show", SERVER, "-o", "json"), 0)
    digest = hashlib.sha256(registry.files["/files/io.github.example_weather-1.2.0.mcpb"]).hexdigest()
    assert shown["server"] == SERVER and shown["version"] == "1.2.0"
    assert (shown["status"], shown["installable"], shown["reason"]) == ("active", True, None)
    assert shown["package"] == {
        "url": registry.file_url("io.github.example_weather-1.2.0.mcpb"),
        "sha256": digest,
        "digest_from": "record",
    }
    assert shown["record"]["repository"]["url"] == "https://github.com/weather"
    text = bundlectl(registry, "registry", "show", SERVER, "--version", "1.1.0")
    assert text.returncode == 0
    assert text.stdout.splitlines()[0] == f"{SERVER} 1.1.0 (active, latest)"
    assert (
        "installable: yes: " in text.stdout
        and "checked against the SHA-256 its registry record gives" in text.stdout
    )
    assert registry.hits["/files/io.github.example_weather-1.2.0.mcpb"] == 0  # show downloads nothing


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ("io.github.example/no-digest", "RegistryChecksumMissing"),
        ("io.github.example/gone", "RegistryRecordDeleted"),
        ("io.github.example/npm-only", "RegistryNoMcpbPackage"),
        ("io.github.example/never-published", "RegistryRecordNotFound"),
    ],
)
def test_show_says_why_a_record_is_not_installable(registry: StubRegistry, server: str, reason: str) -> None:
    shown = as_json(bundlectl(registry, "registry", "show", server, "-o", "json"), 1)
    assert (shown["installable"], shown["reason"]) == (False, reason)
    assert shown["message"]
    text = bundlectl(registry, "registry", "show", server)
    assert text.returncode == 1 and f"({reason})" in text.stdout


def test_show_says_a_remote_only_record_is_offered_as_a_remote_server(registry: StubRegistry) -> None:
    shown = as_json(bundlectl(registry, "registry", "show", "io.github.builds/remote-only", "-o", "json"), 1)
    assert shown["reason"] == "RegistryNoMcpbPackage"
    assert "offered as a remote server (streamable-http https://mcp.example.com/w)" in shown["message"]


def test_show_with_a_pinned_digest_that_differs_is_a_conflict(registry: StubRegistry) -> None:
    shown = as_json(
        bundlectl(registry, "registry", "show", SERVER, "--file-sha256", "0" * 64, "-o", "json"), 1
    )
    assert shown["reason"] == "RegistryChecksumConflict"


@pytest.mark.parametrize("server", ["../etc/passwd", "a/b/c", "io.github.example%2Fweather/x", "noslash"])
def test_show_refuses_a_server_name_with_path_tricks(registry: StubRegistry, server: str) -> None:
    done = bundlectl(registry, "registry", "show", server)
    assert done.returncode == 2 and "namespace/name" in done.stderr
    assert not any(path.startswith("/v0.1/servers/") and "passwd" in path for path in registry.hits)


def test_ssl_cert_file_is_trusted_like_the_operator_trusts_it(registry: StubRegistry) -> None:
    done = bundlectl(registry, "registry", "show", SERVER, trusted=False)
    assert done.returncode == 1 and "TLS certificate is not trusted" in done.stdout
    done = bundlectl(
        registry, "registry", "show", SERVER, trusted=False, env={"SSL_CERT_FILE": str(registry.tls.ca_file)}
    )
    assert done.returncode == 0, done.stdout + done.stderr


# ----------------------------------------------------------------------------------------- search


def test_search_pages_through_the_registry(registry: StubRegistry) -> None:
    first = bundlectl(registry, "registry", "search", "fleet", "--limit", "2")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "STATUS", "MCPB", "DESCRIPTION"]
    assert [line.split()[0] for line in lines[1:3]] == [
        "io.github.fleet/server-0",
        "io.github.fleet/server-1",
    ]
    cursor = lines[-1].removeprefix("more: --cursor ")
    second = as_json(
        bundlectl(registry, "registry", "search", "fleet", "--limit", "2", "--cursor", cursor, "-o", "json"),
        0,
    )
    assert [s["name"] for s in second["servers"]] == ["io.github.fleet/server-2", "io.github.fleet/server-3"]
    assert second["next_cursor"]
    every = as_json(
        bundlectl(registry, "registry", "search", "fleet", "--limit", "2", "--all", "-o", "json"), 0
    )
    assert [s["name"] for s in every["servers"]] == [f"io.github.fleet/server-{n}" for n in range(5)]
    assert every["next_cursor"] is None
    assert all(s["installable"] for s in every["servers"])


def test_search_follows_cursors_until_the_limit_when_pages_are_smaller(registry: StubRegistry) -> None:
    registry.page_size = 2
    try:
        four = bundlectl(registry, "registry", "search", "fleet", "--limit", "4")
        assert four.returncode == 0, four.stderr
        lines = four.stdout.splitlines()
        assert [line.split()[0] for line in lines[1:5]] == [f"io.github.fleet/server-{n}" for n in range(4)]
        assert lines[5:6] == [""] and lines[6].startswith("more: --cursor ")
        every = as_json(bundlectl(registry, "registry", "search", "fleet", "--limit", "30", "-o", "json"), 0)
        assert [s["name"] for s in every["servers"]] == [f"io.github.fleet/server-{n}" for n in range(5)]
        assert every["next_cursor"] is None
        table = bundlectl(registry, "registry", "search", "fleet")  # the default limit is 30
        assert len(table.stdout.splitlines()) == 6 and "more:" not in table.stdout
        three = as_json(bundlectl(registry, "registry", "search", "fleet", "--limit", "3", "-o", "json"), 0)
        assert len(three["servers"]) == 3 and three["next_cursor"]
        rest = as_json(
            bundlectl(
                registry, "registry", "search", "fleet", "--cursor", three["next_cursor"], "-o", "json"
            ),
            0,
        )
        assert [s["name"] for s in rest["servers"]] == [
            "io.github.fleet/server-3",
            "io.github.fleet/server-4",
        ]
    finally:
        registry.page_size = None


def test_search_refuses_a_limit_out_of_range(registry: StubRegistry) -> None:
    for limit in ("0", "1001"):
        done = bundlectl(registry, "registry", "search", "fleet", "--limit", limit)
        assert done.returncode == 2 and "--limit must be 1 to 1000" in done.stderr


def test_search_marks_what_cannot_be_installed(registry: StubRegistry) -> None:
    found = as_json(bundlectl(registry, "registry", "search", "io.github.example", "--all", "-o", "json"), 0)
    by_name = {s["name"]: s for s in found["servers"]}
    assert by_name["io.github.example/no-digest"]["reason"] == "RegistryChecksumMissing"
    assert by_name["io.github.example/npm-only"]["reason"] == "RegistryNoMcpbPackage"
    assert by_name[SERVER]["installable"] is True
    assert "io.github.example/gone" not in by_name  # deleted versions are not listed
    table = bundlectl(registry, "registry", "search", "example", "--all")
    assert "no digest" in table.stdout


# ---------------------------------------------------------------------------------------- analyze


def test_analyze_a_registry_record_shows_the_verdict_before_any_manifest(registry: StubRegistry) -> None:
    done = bundlectl(registry, "analyze", SERVER, "--setup", "api_key=k-123", "-o", "json")
    out = as_json(done, 0)
    assert out["bundle"]["name"] == "weather" and out["bundle"]["version"] == "1.2.0"
    # The MCP, and the gateway that serves it to MCP clients (DESIGN.md §9.7).
    assert [(e["kind"], e["key"], e["action"]) for e in out["entities"]] == [
        ("mcp", "weather", "CREATE"),
        ("gateway", "gateway", "CREATE"),
    ]
    assert f"source: registry {SERVER} 1.2.0" in done.stderr
    pinned = as_json(
        bundlectl(registry, "analyze", SERVER, "--version", "1.1.0", "--setup", "api_key=k", "-o", "json"), 0
    )
    assert pinned["bundle"]["version"] == "1.1.0"
    missing = as_json(bundlectl(registry, "analyze", SERVER, "-o", "json"), 1)
    assert [i["code"] for i in missing["issues"] if i["severity"] == "blocking"] == ["missing_setup"]


@pytest.mark.parametrize(
    ("server", "extra", "code"),
    [
        ("io.github.example/gone", (), "registry_record_deleted"),
        ("io.github.example/no-digest", (), "registry_checksum_missing"),
        ("io.github.example/npm-only", (), "registry_no_mcpb_package"),
        ("io.github.builds/remote-only", (), "registry_no_mcpb_package"),
        ("io.github.builds/other-platforms", (), "registry_no_compatible_package"),
        ("io.github.example/never-published", (), "registry_record_not_found"),
        ("io.github.example/tampered", (), "checksum_mismatch"),
        (SERVER, ("--file-sha256", "0" * 64), "registry_checksum_conflict"),
    ],
)
def test_analyze_of_a_refused_record_is_a_blocking_issue(
    registry: StubRegistry, server: str, extra: tuple[str, ...], code: str
) -> None:
    out = as_json(bundlectl(registry, "analyze", server, *extra, "-o", "json"), 1)
    assert (out["bundle"], out["entities"], out["blocking"]) == (None, [], True)
    [issue] = out["issues"]
    assert (issue["severity"], issue["code"]) == ("blocking", code)
    assert issue["message"].startswith("spec.source.registry: ")


def test_analyze_of_a_record_that_changes_between_its_reads(registry: StubRegistry) -> None:
    server = "io.github.example/moving"
    before = registry.publish(server, "1.0.0", archive())
    after = record_of(server, "1.0.0", [{**before["server"]["packages"][0], "fileSha256": "b" * 64}])
    registry.answer_in_turn(server, "latest", before, after)
    out = as_json(bundlectl(registry, "analyze", server, "-o", "json"), 1)
    assert out["issues"][0]["code"] == "registry_record_changed"
    assert registry.hits["/files/io.github.example_moving-1.0.0.mcpb"] == 0


def test_analyze_refuses_a_registry_on_a_private_address(registry: StubRegistry) -> None:
    done = subprocess.run(
        [
            BUNDLECTL,
            "analyze",
            SERVER,
            "--registry",
            registry.url,
            "--ca-file",
            str(registry.tls.ca_file),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={},
    )
    out = as_json(done, 1)
    assert out["issues"][0]["code"] == "registry_refused"
    assert "non-public address (127.0.0.1)" in out["issues"][0]["message"]


def test_analyze_of_a_registry_record_plans_against_a_platform(
    registry: StubRegistry, engine_platform: PlatformProcess, ws: str
) -> None:
    done = bundlectl(
        registry,
        "analyze",
        SERVER,
        "--setup",
        "api_key=k-123",
        "--platform",
        engine_platform.url,
        "--token",
        TOKEN,
        "--workspace",
        ws,
        "-o",
        "json",
    )
    out = as_json(done, 0)
    assert out["bundle"]["name"] == "weather"
    planned = [(e["key"], e["action"]) for e in out["entities"]]
    assert planned == [("weather", "CREATE"), ("gateway", "CREATE")]
    # The archive analyze fetched is what an install would upload: nothing blocks on it.
    assert [i["code"] for i in out["issues"]] == ["runs_from_archive"]
