"""bundlectl analyze URL: seed 000's source_url, fetched through the SSRF-guarded fetcher (5 MiB cap).

The server is a real HTTPS server on 127.0.0.1 whose certificate a throwaway CA issued (the approach
of tests/integration/k8s/test_sources.py); the CLI trusts that CA with --ca-file and reaches loopback
only with --allow-private-sources.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.integration.engine.conftest import TOKEN
from tests.integration.platform.platform_harness import PlatformProcess
from tests.tls import QuietHandler, https_server, throwaway_tls

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[3]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
TRIAGE = (ROOT / "examples" / "github-triage.yaml").read_bytes()
TRIAGE_SETUP = str(ROOT / "examples" / "setup" / "github-triage.yaml")
BLOCKED = b'schema_version: "0.1.0"\nname: broken\nagents:\n  - {key: a, name: A, mcps: [nowhere]}\n'


@dataclass
class Server:
    port: int
    ca_file: Path
    files: dict[str, bytes] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tls = throwaway_tls(tmp_path_factory.mktemp("tls"))
    files = {
        "/triage.yaml": TRIAGE,
        "/broken.yaml": BLOCKED,
        "/huge.yaml": b"# " + b"x" * (5 * 1024 * 1024) + b"\n",
    }

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/redirect-inward":
                self.answer(302, headers={"Location": "https://169.254.169.254/latest/meta-data"})
            elif path in files:
                self.answer(200, files[path])
            else:
                self.answer(404, b"not here")

    with https_server(Handler, tls) as port:
        yield Server(port=port, ca_file=tls.ca_file, files=files)


def analyze(server: Server, url: str, *extra: str, trusted: bool = True) -> subprocess.CompletedProcess[str]:
    flags = ["--ca-file", str(server.ca_file), "--allow-private-sources"] if trusted else []
    return subprocess.run(
        [BUNDLECTL, "analyze", url, *flags, *extra], capture_output=True, text=True, check=False, env={}
    )


def test_an_https_url_is_fetched_without_a_checksum_and_analyzed(server: Server) -> None:
    done = analyze(server, server.url("/triage.yaml"), "--setup-file", TRIAGE_SETUP, "-o", "json")
    out = json.loads(done.stdout)
    assert out["bundle"]["name"] == "github-triage"
    assert out["bundle"]["digest"].startswith("sha256:")
    assert {e["key"] for e in out["entities"]} >= {"github", "triage_bot"}
    done = analyze(server, server.url("/broken.yaml"), "-o", "json")
    assert done.returncode == 1 and "unknown_reference" in done.stdout


def refusal(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The one blocking issue of a refused source, from analyze's JSON answer (exit 1)."""
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert (out["bundle"], out["entities"], out["blocking"]) == (None, [], True)
    [issue] = out["issues"]
    assert issue["severity"] == "blocking"
    return dict(issue)


def test_a_given_checksum_must_match(server: Server) -> None:
    good = hashlib.sha256(BLOCKED).hexdigest()
    done = analyze(server, server.url("/broken.yaml"), "--sha256", good, "-o", "json")
    assert json.loads(done.stdout)["bundle"]["name"] == "broken"
    issue = refusal(analyze(server, server.url("/broken.yaml"), "--sha256", "0" * 64, "-o", "json"))
    assert issue["code"] == "checksum_mismatch" and "SHA-256" in str(issue["message"])
    done = analyze(server, server.url("/broken.yaml"), "--sha256", "0" * 64)
    assert (
        done.returncode == 1
        and "checksum_mismatch" in done.stdout
        and "Nothing would be written" in done.stdout
    )
    done = analyze(server, server.url("/broken.yaml"), "--sha256", "nothex")
    assert done.returncode == 2


def test_the_ssrf_guard_and_the_cap_hold(server: Server) -> None:
    # Loopback is refused unless the flag for tests says otherwise: a verdict with its reason.
    done = analyze(
        server,
        server.url("/triage.yaml?token=do-not-show"),
        "--ca-file",
        str(server.ca_file),
        "-o",
        "json",
        trusted=False,
    )
    issue = refusal(done)
    assert issue["code"] == "fetch_failed"
    assert "resolves to a non-public address (127.0.0.1)" in str(issue["message"])
    assert "do-not-show" not in done.stdout + done.stderr  # a URL is shown without its query string
    # So is a redirect into a private network, even with loopback allowed.
    issue = refusal(analyze(server, server.url("/redirect-inward"), "-o", "json"))
    assert "169.254.169.254 resolves to a non-public address" in str(issue["message"])
    issue = refusal(analyze(server, server.url("/huge.yaml"), "-o", "json"))
    assert "at most 5242880" in str(issue["message"])
    done = analyze(server, f"http://127.0.0.1:{server.port}/triage.yaml")
    assert done.returncode == 2 and "not an https address" in done.stderr
    # A certificate nobody trusts is refused too, and says so.
    issue = refusal(
        analyze(server, server.url("/triage.yaml"), "--allow-private-sources", "-o", "json", trusted=False)
    )
    assert "certificate" in str(issue["message"])


def test_an_url_analyzes_against_a_platform_as_well(
    server: Server, engine_platform: PlatformProcess, ws: str
) -> None:
    done = analyze(
        server,
        server.url("/triage.yaml"),
        "--setup-file",
        TRIAGE_SETUP,
        "--substitute",
        "model:gpt-4.1=gpt-5",
        "--platform",
        engine_platform.url,
        "--token",
        TOKEN,
        "--workspace",
        ws,
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["bundle"]["name"] == "github-triage" and out["blocking"] is False
