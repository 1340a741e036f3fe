"""bundlectl platform: serve starts and stops cleanly, check tells whether a platform answers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from platform_harness import BUNDLECTL, TOKEN, PlatformProcess, start_platform

pytestmark = pytest.mark.integration


def check(url: str | None, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUNDLE_PLATFORM_")}
    if url:
        env["BUNDLE_PLATFORM_URL"] = url
    if token:
        env["BUNDLE_PLATFORM_TOKEN"] = token
    return subprocess.run(
        [BUNDLECTL, "platform", "check", "--workspace", "acme"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_reports_a_platform_that_answers(platform: PlatformProcess) -> None:
    ok = check(platform.url, TOKEN)
    assert ok.returncode == 0, ok.stderr
    assert f"platform at {platform.url} answers" in ok.stdout


def test_check_fails_without_the_token_and_without_a_url(platform: PlatformProcess) -> None:
    denied = check(platform.url)
    assert denied.returncode == 1
    assert "401 unauthorized" in denied.stderr
    usage = check(None)
    assert usage.returncode == 2
    assert "BUNDLE_PLATFORM_URL" in usage.stderr


def test_serve_stops_on_sigterm_and_refuses_a_bad_port(tmp_path: Path) -> None:
    running = start_platform(tmp_path / "nested" / "platform.db")
    assert running.stop() == 0
    assert (tmp_path / "nested" / "platform.db").exists()
    bad = subprocess.run(
        [BUNDLECTL, "platform", "serve", "--port", "70000", "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert bad.returncode == 2 and "--port" in bad.stderr


def test_serve_takes_its_token_from_a_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    running = start_platform(tmp_path / "platform.db", "--token-file", str(token_file))
    try:
        assert check(running.url).returncode != 0  # no token: refused
        assert check(running.url, TOKEN).returncode == 0
    finally:
        assert running.stop() == 0
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path, reason in ((empty, "is empty"), (tmp_path / "missing", "cannot read --token-file")):
        refused = subprocess.run(
            [
                BUNDLECTL,
                "platform",
                "serve",
                "--port",
                "0",
                "--db",
                str(tmp_path / "x.db"),
                "--token-file",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert refused.returncode == 2 and reason in refused.stderr
