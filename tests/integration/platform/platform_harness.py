"""Starting the reference platform as a subprocess, and the settings the platform tests share.

Kept out of conftest.py so test modules import it by a name no other test folder uses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bundle_operator.platform.retry import RetryPolicy
from bundle_operator.reference_platform.process import BUNDLECTL, PlatformProcess, start_platform

TOKEN = "test-token-not-secret"
FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, max_retry_after=2.0)
# Spans leave in batches every 5 s by default; a short delay keeps the tracing tests quick.
QUICK_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50"}


# One launcher for tests, benchmarks and `make run`.
__all__ = [
    "BUNDLECTL",
    "FAST_RETRY",
    "QUICK_EXPORT",
    "TOKEN",
    "GitHubStub",
    "PlatformProcess",
    "github_stub",
    "start_platform",
    "start_traced_platform",
]


def start_traced_platform(db: Path, otlp_endpoint: str, *extra: str) -> PlatformProcess:
    """The platform with the tests' token, tracing to ``otlp_endpoint`` with quick exports."""
    return start_platform(db, "--token", TOKEN, "--otlp-endpoint", otlp_endpoint, *extra, env=QUICK_EXPORT)


@dataclass
class GitHubStub:
    """Serves ``files`` (path -> SKILL.md text) like raw.githubusercontent.com; other paths 404."""

    url: str
    files: dict[str, str] = field(default_factory=dict)
    fail_with: int | None = None


@contextmanager
def github_stub(files: dict[str, str] | None = None) -> Iterator[GitHubStub]:
    """A loopback stand-in for raw GitHub content, for the platform's GitHub skills."""
    stub = GitHubStub(url="", files=dict(files or {}))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = stub.files.get(self.path) if stub.fail_with is None else None
            status = stub.fail_with or (200 if body is not None else 404)
            data = (body or "").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
