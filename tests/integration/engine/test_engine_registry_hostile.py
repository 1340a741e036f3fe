"""bundlectl registry search/show against a hostile registry: what it prints, and what it costs.

A record is written by whoever published it. Whatever it holds (lone surrogates, terminal escapes,
passwords in URLs, numbers Python will not convert, pages of millions of entries), bundlectl prints
without a traceback, never hands a control character to the terminal, never prints a password,
and reads a page in time and memory bounded by what it asked for.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.registry_stub import StubRegistry, archive, stub_registry

pytestmark = [pytest.mark.integration]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
LIST = "/v0.1/servers"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b2J"  # sets the terminal's title, clears it (C0 and C1 CSI)
UNSAFE = ("\x1b", "\x07", "\x9b")


def record_path(server: str, version: str = "latest") -> str:
    return f"/v0.1/servers/{server.replace('/', '%2F')}/versions/{version}"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubRegistry]:
    with stub_registry(tmp_path_factory.mktemp("registry")) as registry:
        yield registry


@pytest.fixture
def registry(running: StubRegistry) -> Iterator[StubRegistry]:
    """The module's registry, emptied after each test."""
    yield running
    for part in (running.records, running.latest, running.raw, running.redirects, running.sequences):
        part.clear()


def bundlectl(
    registry: StubRegistry, *args: str | bytes, env: dict[str, str] | None = None, memory: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run bundlectl as a user does; ``memory`` caps its address space (bytes)."""

    def cap() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    flags = ["--registry", registry.url, "--allow-private-sources", "--ca-file", str(registry.tls.ca_file)]
    return subprocess.run(
        [BUNDLECTL, "registry", *args, *flags],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        check=False,
        env=env or {},
        preexec_fn=cap,
    )


def clean(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The output of a run that exited with ``code``, without a traceback or a control character."""
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for char in UNSAFE:
        assert char not in done.stdout and char not in done.stderr
    return done.stdout


def as_json(done: subprocess.CompletedProcess[str], code: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(clean(done, code))
    return data


def page(servers: list[Any], cursor: str | None = None) -> bytes:
    return json.dumps({"servers": servers, "metadata": {"nextCursor": cursor} if cursor else {}}).encode()


# ------------------------------------------------------------------------------- lone surrogates


def test_lone_surrogates_anywhere_in_a_record_print_as_escapes(registry: StubRegistry) -> None:
    server = "io.github.evil/surrogates"
    record = registry.publish(server, "1.0.0", archive(), status="deprecated", status_message="old \udfff")
    record["server"]["description"] = "weather \ud800 reports"
    record["server"]["repository"]["url"] = "https://github.com/evil/\ud800"
    record["server"]["x-extra"] = {"deep": [{"k\udc80": ["\udbff", 1]}]}

    shown = as_json(bundlectl(registry, "show", server, "-o", "json"), 0)
    assert shown["record"]["description"] == "weather \ud800 reports"  # the record, as given
    assert shown["record"]["x-extra"] == {"deep": [{"k\udc80": ["\udbff", 1]}]}
    assert shown["status_message"] == "old \\udfff"  # what bundlectl says of it, as the table says it
    text = clean(bundlectl(registry, "show", server), 0)
    assert "weather \\ud800 reports" in text and "status: old \\udfff" in text
    assert "repository: https://github.com/evil/\\ud800" in text

    found = as_json(bundlectl(registry, "search", "evil", "-o", "json"), 0)
    assert found["servers"][0]["description"] == "weather \\ud800 reports"
    assert "weather \\ud800 reports" in clean(bundlectl(registry, "search", "evil"), 0)


def test_a_lone_surrogate_in_the_version_or_a_package_url_is_shown_not_raised(registry: StubRegistry) -> None:
    server = "io.github.evil/versions"
    registry.publish(server, "1.0\ud800", packages=[{"registryType": "npm", "identifier": "@evil/\udfff"}])
    found = as_json(bundlectl(registry, "search", "evil", "-o", "json"), 0)
    assert found["servers"][0]["version"] == "1.0\\ud800"
    # A version no Bundle could pin is no version: the record is refused, the version shown escaped.
    shown = as_json(bundlectl(registry, "show", server, "-o", "json"), 1)
    assert shown["reason"] == "RegistryRecordInvalid"
    assert shown["message"].endswith("a version that is not one (1.0\\ud800)")
    assert "(1.0\\ud800)" in clean(bundlectl(registry, "show", server), 1)
    registry.publish(server, "1.0.0", packages=[{"registryType": "npm", "identifier": "@evil/\udfff"}])
    shown = as_json(bundlectl(registry, "show", server, "-o", "json"), 1)
    assert (shown["version"], shown["reason"]) == ("1.0.0", "RegistryNoMcpbPackage")
    assert "  npm  @evil/\\udfff" in clean(bundlectl(registry, "show", server), 1)

    # httpx raises UnicodeEncodeError for a surrogate and IDNAError for a bad label, not InvalidURL.
    for url in ("https://example.com/\udfff.mcpb", "https://xn--/x.mcpb"):
        registry.publish(server, "2.0.0", identifier=url)
        shown = as_json(bundlectl(registry, "show", server, "-o", "json"), 1)
        assert (shown["reason"], shown["message"]) == (
            "InsecurePackageUrl",
            "the mcpb package URL cannot be read as a URL",
        )
        assert "  mcpb  (a URL that cannot be read)" in clean(bundlectl(registry, "show", server), 1)


def test_json_output_survives_a_terminal_that_is_not_utf8(registry: StubRegistry) -> None:
    server = "io.github.evil/unicode"
    record = registry.publish(server, "1.0.0", archive())
    record["server"]["description"] = "météo 日本 😀"
    ascii_only = {"PYTHONIOENCODING": "ascii"}
    shown = as_json(bundlectl(registry, "show", server, "-o", "json", env=ascii_only), 0)
    assert shown["record"]["description"] == "météo 日本 😀"
    found = as_json(bundlectl(registry, "search", "evil", "-o", "json", env=ascii_only), 0)
    assert found["servers"][0]["description"] == "météo 日本 😀"
    assert "m\\xe9t\\xe9o" in clean(bundlectl(registry, "search", "evil", env=ascii_only), 0)
    assert "m\\xe9t\\xe9o" in clean(bundlectl(registry, "show", server, env=ascii_only), 0)


# ---------------------------------------------------------------------- terminal escapes, passwords


def test_terminal_escapes_from_the_registry_never_reach_the_terminal(registry: StubRegistry) -> None:
    server = "io.github.evil/escapes"
    npm = {"registryType": f"npm{ESCAPES}", "identifier": f"@evil/{ESCAPES}"}
    registry.publish(server, f"1.0{ESCAPES}", packages=[npm], status="deprecated", status_message=ESCAPES)
    registry.publish(f"io.github.evil/name{ESCAPES}", "1.0.0", packages=[npm])
    text = clean(bundlectl(registry, "show", server), 1)
    assert "a version that is not one (1.0\\x1b]0;pwned\\x07\\x1b[2J\\x9b2J)" in text
    table = clean(bundlectl(registry, "search", "evil"), 0)
    assert "1.0\\x1b]0;pwned" in table  # listed, escaped

    registry.publish(server, "1.0.0", packages=[npm], status="deprecated", status_message=ESCAPES)
    record = registry.records[(server, "1.0.0")]
    record["server"]["description"] = f"weather {ESCAPES}"
    record["server"]["repository"]["url"] = f"https://github.com/{ESCAPES}"
    text = clean(bundlectl(registry, "show", server), 1)
    assert "installable: no (RegistryNoMcpbPackage): io.github.evil/escapes 1.0.0" in text
    assert "weather \\x1b]0;pwned\\x07\\x1b[2J\\x9b2J" in text
    shown = as_json(bundlectl(registry, "show", server, "-o", "json"), 1)
    assert shown["record"]["description"] == f"weather {ESCAPES}"  # JSON-escaped, read back as given
    assert shown["status_message"] == "\\x1b]0;pwned\\x07\\x1b[2J\\x9b2J"
    table = clean(bundlectl(registry, "search", "evil"), 0)
    assert "io.github.evil/name\\x1b]0;pwned" in table
    found = as_json(bundlectl(registry, "search", "evil", "-o", "json"), 0)
    assert {s["reason"] for s in found["servers"]} == {"RegistryNoMcpbPackage"}
    assert any("\\x9b2J 1.0.0 has no mcpb package" in s["message"] for s in found["servers"])


def test_an_error_that_quotes_the_registry_is_escaped(registry: StubRegistry) -> None:
    server = "io.github.evil/moved"
    # The stub sends the Location header as Latin-1: 0x9b arrives as a C1 CSI in the URL's path.
    registry.redirects[record_path(server)] = "http://127.0.0.1/\x9b2J"
    registry.redirects[LIST] = "http://127.0.0.1/\x9b2J"
    shown = as_json(bundlectl(registry, "show", server, "-o", "json"), 1)
    assert shown["message"] == "the registry: http://127.0.0.1/\\x9b2J is not an https address"
    assert "/\\x9b2J is not an https address" in clean(bundlectl(registry, "show", server), 1)
    done = bundlectl(registry, "search", "evil")
    clean(done, 1)
    assert "/\\x9b2J is not an https address (RegistryRefused)" in done.stderr

    registry.redirects.clear()
    registry.publish(server, "2.0.0", archive())
    registry.records[(server, "1.0.0")] = registry.records[(server, "2.0.0")]
    registry.records[(server, "2.0.0")]["server"]["version"] = f"2.0{ESCAPES}"
    shown = as_json(bundlectl(registry, "show", server, "--version", "1.0.0", "-o", "json"), 1)
    assert shown["message"].endswith("a version that is not one (2.0\\x1b]0;pwned\\x07\\x1b[2J\\x9b2J)")


def test_passwords_in_the_record_s_urls_are_never_printed(registry: StubRegistry) -> None:
    server = "io.github.evil/secrets"
    record = registry.publish(
        server, "1.0.0", archive(), identifier="https://user:s3cr3t-1@example.com/x.mcpb"
    )
    record["server"]["packages"].append({"registryType": "oci", "identifier": "oci://bot:s3cr3t-2@ghcr.io/x"})
    record["server"]["repository"]["url"] = "https://s3cr3t-3@github.com/evil/secrets"
    record["server"]["description"] = (
        "mirror: https://me:s3cr3t-4@mirror.example/x, see https://ok.example/a@b"
    )
    record["server"]["remotes"] = [{"url": "https://u:p@ss:s3cr3t-5@example.com/mcp?x=1"}]

    outputs = [
        clean(bundlectl(registry, "show", server, "-o", "json"), 1),
        clean(bundlectl(registry, "show", server), 1),
        clean(bundlectl(registry, "search", "evil", "-o", "json"), 0),
        clean(bundlectl(registry, "search", "evil"), 0),
    ]
    for out in outputs:
        assert "s3cr3t" not in out
    shown = json.loads(outputs[0])["record"]
    assert shown["packages"][0]["identifier"] == "https://user:***@example.com/x.mcpb"
    assert shown["packages"][1]["identifier"] == "oci://bot:***@ghcr.io/x"
    assert shown["repository"]["url"] == "https://***@github.com/evil/secrets"
    assert shown["description"] == "mirror: https://me:***@mirror.example/x, see https://ok.example/a@b"
    assert shown["remotes"] == [{"url": "https://u:***@example.com/mcp?x=1"}]
    assert "  oci  oci://bot:***@ghcr.io/x" in outputs[1]
    assert "repository: https://***@github.com/evil/secrets" in outputs[1]


# ----------------------------------------------------------------------------- what a page costs


def test_a_page_of_millions_of_empty_entries_is_refused_at_once(registry: StubRegistry) -> None:
    count = (8 * 1024 * 1024 - 32) // 3
    registry.raw[LIST] = (200, b'{"servers": [' + b",".join([b"{}"] * count) + b"]}")
    started = time.monotonic()
    # A search asks a page for the servers it still wants (30 by default); --all reads pages of 100.
    for every, asked in (((), 30), (("--all",), 100)):
        done = bundlectl(registry, "search", "evil", *every, "-o", "json", memory=1 << 30)
        clean(done, 1)
        assert done.stderr == (
            f"bundlectl registry search: the registry's page has {count} servers, more than the {asked} "
            "asked for (RegistryRecordInvalid)\n"
        )
    assert time.monotonic() - started < 30  # it took 52.7 s a run, and ended in MemoryError


def test_a_page_with_more_entries_than_asked_for_is_refused(registry: StubRegistry) -> None:
    entry = {"server": {"name": "io.github.evil/x", "version": "1.0.0"}}
    registry.raw[LIST] = (200, page([entry] * 11))
    done = bundlectl(registry, "search", "evil", "--limit", "10")
    clean(done, 1)
    assert "the registry's page has 11 servers, more than the 10 asked for" in done.stderr
    registry.raw[LIST] = (200, page([entry] * 10))
    assert (
        len(as_json(bundlectl(registry, "search", "evil", "--limit", "10", "-o", "json"), 0)["servers"]) == 10
    )


def test_every_page_keeps_only_what_it_prints(registry: StubRegistry) -> None:
    # 50 pages of 30 records, each record 60 KB of "{}" (1.3 MB as Python objects): kept whole,
    # the pages weighed 2 GB; a summary per record is all that --all needs to keep.
    junk = [{}] * 20_000
    for n in range(1500):
        record = registry.publish(f"io.github.evil/heavy-{n:04}", "1.0.0", packages=[])
        record["server"]["junk"] = junk
    done = bundlectl(registry, "search", "heavy", "--all", "-o", "json", memory=1 << 30)
    found = as_json(done, 0)
    assert len(found["servers"]) == 1500 and found["next_cursor"] is None


def test_a_next_cursor_that_cannot_be_sent_back_is_refused(registry: StubRegistry) -> None:
    entry = {"server": {"name": "io.github.evil/x", "version": "1.0.0"}}
    for cursor in ("\ud800", f"c{ESCAPES}", "c" * 1025):
        registry.raw[LIST] = (200, page([entry], cursor))
        for every in ((), ("--all",)):
            done = bundlectl(registry, "search", "evil", *every, "-o", "json")
            clean(done, 1)
            assert "the registry's nextCursor is not a cursor: it must be printable text of at most 1024" in (
                done.stderr
            )


# ----------------------------------------------------------------------------- other bad answers


RECORD = b'{"server": {"name": "io.github.evil/x", "version": "1", "n": %s}}'
TOO_LONG = "the answer is not JSON (a number too long to read, or NaN or Infinity)"


@pytest.mark.parametrize(
    ("value", "show_says", "search_says"),
    [
        (b"9" * 5000, TOO_LONG, f"the registry's list: {TOO_LONG} (RegistryRecordInvalid)"),
        (b"NaN", TOO_LONG, f"the registry's list: {TOO_LONG} (RegistryRecordInvalid)"),
        (b"[" * 500 + b"]" * 500, "the answer nests too deeply to be a record (over 32 levels)", ""),
    ],
    ids=["long-integer", "nan", "deep"],
)
def test_a_record_python_cannot_take_is_refused_with_a_message(
    registry: StubRegistry, value: bytes, show_says: str, search_says: str
) -> None:
    body = RECORD % value
    registry.raw[record_path("io.github.evil/x")] = (200, body)
    shown = as_json(bundlectl(registry, "show", "io.github.evil/x", "-o", "json"), 1)
    assert (shown["reason"], shown["message"]) == (
        "RegistryRecordInvalid",
        f"the registry's record: {show_says}",
    )
    registry.raw[LIST] = (200, b'{"servers": [' + body + b"]}")
    done = bundlectl(registry, "search", "evil", "-o", "json")
    if search_says:  # the page is not JSON as RFC 8259 has it: nothing on it can be believed
        clean(done, 1)
        assert done.stderr == f"bundlectl registry search: {search_says}\n"
    else:  # one entry that is not a record: the page still lists it, as unreadable
        [entry] = as_json(done, 0)["servers"]
        assert (entry["name"], entry["reason"]) == (None, "RegistryRecordInvalid")
        assert entry["message"] == "servers/0 nests too deeply to be a record (over 32 levels)"


def test_arguments_that_are_not_utf8_are_usage_errors(registry: StubRegistry) -> None:
    done = bundlectl(registry, "search", b"caf\xe9")
    clean(done, 2)
    assert "TEXT and --cursor must be printable UTF-8 text" in done.stderr
    done = bundlectl(registry, "search", "x", "--cursor", b"\xff")
    clean(done, 2)
    done = subprocess.run(
        [BUNDLECTL, "registry", "show", "io.github.evil/x", "--registry", b"https://r\xff.example"],
        capture_output=True,
        text=True,
        check=False,
        env={},
    )
    clean(done, 2)
    assert (
        "the registry URL must be https, with no query string, fragment or control characters" in done.stderr
    )
