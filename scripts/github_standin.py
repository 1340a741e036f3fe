"""A loopback stand-in for raw GitHub content, so `make run` needs no internet.

The reference platform fetches a GitHub skill's SKILL.md from
`<github-base-url>/<owner>/<repo>/<ref>/<path>/SKILL.md` (the layout of raw.githubusercontent.com).
This serves the one skill the example bundle (examples/k8s/) refers to; any other path is a 404.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

# https://github.com/acme-labs/agent-skills/tree/main/skills/release-notes, as the platform asks for it.
FILES: dict[str, str] = {
    "/acme-labs/agent-skills/main/skills/release-notes/SKILL.md": (
        "---\n"
        "name: release-notes\n"
        "description: Draft release notes from the pull requests merged since the last tag.\n"
        "---\n"
        "# Release notes\n"
        "\n"
        "1. List the pull requests merged since the last tag.\n"
        "2. Group them under Features, Fixes and Other; one line each, linked by number.\n"
        "3. Put breaking changes first, with what users have to do.\n"
    ),
}


class GitHubStandIn:
    """Serves `files` (URL path -> text) on a free loopback port from a daemon thread."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(FILES if files is None else files)
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> GitHubStandIn:
        """Listen on 127.0.0.1 (a free port) and serve in the background."""
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                standin.requests.append(self.path)
                body = standin.files.get(self.path.split("?", 1)[0])
                data = (body if body is not None else "404: Not Found\n").encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="github-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> GitHubStandIn:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
