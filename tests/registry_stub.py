"""An MCP Registry (API v0.1) for tests, served over HTTPS on 127.0.0.1 with its own CA.

It answers the three read routes the operator and bundlectl use (a version's record, with
``include_deleted``; the server list with ``search``, ``limit`` and ``cursor``) and serves the
package files its records point at. A test publishes records, and can make the registry answer a
sequence of different records to successive reads, answer slowly, answer raw bytes, redirect a
package URL elsewhere, or answer list pages smaller than asked for. No real registry can be
reached from here: this stands in for one, speaking the routes and shapes of the registry's OpenAPI
document (docs/reference/api/openapi.yaml upstream).
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.tls import QuietHandler, TlsFiles, https_server, throwaway_tls
from tests.unit.mcpb.craft import base_manifest, build

OFFICIAL = "io.modelcontextprotocol.registry/official"


def archive(name: str = "weather", version: str = "1.2.0", **manifest: Any) -> bytes:
    """An honest .mcpb archive (the weather server of tests/unit/mcpb/craft.py) as bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        return build(Path(tmp) / "a.mcpb", base_manifest(name=name, version=version, **manifest)).read_bytes()


@dataclass
class StubRegistry:
    """The registry's state; tests change it between reads."""

    port: int
    tls: TlsFiles
    records: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    # Served in turn to successive reads of one (server, version); the last one stays.
    sequences: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    raw: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # path -> status, body
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location
    delays: dict[str, float] = field(default_factory=dict)  # path -> seconds before answering
    huge: set[str] = field(default_factory=set)  # paths that declare a terabyte and send nothing
    page_size: int | None = None  # the most a list page holds, whatever limit is asked for
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The registry's base URL."""
        return f"https://127.0.0.1:{self.port}"

    def file_url(self, name: str) -> str:
        """The URL a package file is served at."""
        return f"{self.url}/files/{name}"

    def serve_file(self, name: str, body: bytes) -> tuple[str, str]:
        """Serve ``body`` as a package file; its URL and SHA-256."""
        self.files[f"/files/{name}"] = body
        return self.file_url(name), hashlib.sha256(body).hexdigest()

    def publish(
        self,
        server: str,
        version: str,
        body: bytes | None = None,
        *,
        sha256: str | bool | None = True,
        status: str = "active",
        status_message: str | None = None,
        packages: list[dict[str, Any]] | None = None,
        identifier: str | None = None,
        latest: bool = True,
    ) -> dict[str, Any]:
        """Publish one version with an mcpb package serving ``body``; returns the record.

        ``sha256=True`` gives the archive's real digest, a string gives that one, None none.
        ``packages`` replaces the package list altogether.
        """
        if packages is None:
            file_name = f"{server.replace('/', '_')}-{version}.mcpb"
            url, real = self.serve_file(file_name, body if body is not None else archive())
            package: dict[str, Any] = {
                "registryType": "mcpb",
                "identifier": identifier or url,
                "version": version,
                "transport": {"type": "stdio"},
            }
            if sha256 is True:
                package["fileSha256"] = real
            elif isinstance(sha256, str):
                package["fileSha256"] = sha256
            packages = [package]
        record = record_of(server, version, packages, status=status, status_message=status_message)
        self.records[(server, version)] = record
        if latest:
            self.latest[server] = version
        return record

    def answer_in_turn(self, server: str, version: str, *records: dict[str, Any]) -> None:
        """Answer successive reads of ``server`` at ``version`` with these records, in order."""
        self.sequences[(server, version)] = list(records)

    def record_hits(self, server: str, version: str) -> int:
        """How many times the record of ``server`` at ``version`` was read."""
        return self.hits[f"record:{server}@{version}"]

    def _record(self, server: str, version: str, include_deleted: bool) -> dict[str, Any] | None:
        with self.lock:
            self.hits[f"record:{server}@{version}"] += 1
            turn = self.sequences.get((server, version))
            if turn:
                return turn.pop(0) if len(turn) > 1 else turn[0]
        if version == "latest":
            version = self.latest.get(server, "")
        found = self.records.get((server, version))
        if found is None:
            return None
        if found["_meta"][OFFICIAL]["status"] == "deleted" and not include_deleted:
            return None
        return found

    def _list(self, query: dict[str, list[str]]) -> dict[str, Any]:
        text = (query.get("search") or [""])[0]
        limit = int((query.get("limit") or ["30"])[0])
        if self.page_size is not None:
            limit = min(limit, self.page_size)
        deleted = query.get("include_deleted") != ["true"]
        names = sorted(
            name
            for name in self.latest
            if text in name
            and not (
                deleted and self.records[(name, self.latest[name])]["_meta"][OFFICIAL]["status"] == "deleted"
            )
        )
        cursor = (query.get("cursor") or [None])[0]
        start = int(base64.urlsafe_b64decode(cursor).decode()) if cursor else 0
        page = names[start : start + limit]
        servers = [self.records[(name, self.latest[name])] for name in page]
        following = start + limit
        meta: dict[str, Any] = {"count": len(servers)}
        if following < len(names):
            meta["nextCursor"] = base64.urlsafe_b64encode(str(following).encode()).decode()
        return {"servers": servers, "metadata": meta}


def record_of(
    server: str,
    version: str,
    packages: list[dict[str, Any]],
    *,
    status: str = "active",
    status_message: str | None = None,
) -> dict[str, Any]:
    """A ServerResponse as the registry answers it."""
    official: dict[str, Any] = {
        "status": status,
        "publishedAt": "2026-11-01T10:00:00Z",
        "updatedAt": "2026-11-01T10:00:00Z",
        "isLatest": True,
    }
    if status_message is not None:
        official["statusMessage"] = status_message
    return {
        "server": {
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": server,
            "description": f"The {server.split('/')[-1]} server",
            "version": version,
            "repository": {"url": f"https://github.com/{server.split('/')[-1]}", "source": "github"},
            "packages": packages,
        },
        "_meta": {OFFICIAL: official},
    }


@contextmanager
def stub_registry(tmp: Path) -> Iterator[StubRegistry]:
    """Run a stub registry with a throwaway CA (its file is ``registry.tls.ca_file``)."""
    tls = throwaway_tls(tmp, "stub registry CA")
    state: dict[str, StubRegistry] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            registry = state["registry"]
            parts = urlsplit(self.path)
            path = parts.path
            with registry.lock:
                registry.hits[path] += 1
            delay = registry.delays.get(path)
            if delay:
                time.sleep(delay)
            if path in registry.huge:
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 40))
                self.end_headers()
            elif path in registry.raw:
                status, body = registry.raw[path]
                self.answer(status, body, {"Content-Type": "application/json"})
            elif path in registry.redirects:
                self.answer(302, b"", {"Location": registry.redirects[path]})
            elif path in registry.files:
                self.answer(200, registry.files[path], {"Content-Type": "application/octet-stream"})
            elif path == "/v0.1/servers":
                self._json(200, registry._list(parse_qs(parts.query)))
            elif path.startswith("/v0.1/servers/") and "/versions/" in path:
                # The name's '/' arrives encoded (%2F): split on the path's own slashes first.
                encoded_name, _, encoded_version = path.removeprefix("/v0.1/servers/").partition("/versions/")
                server, version = unquote(encoded_name), unquote(encoded_version)
                include = parse_qs(parts.query).get("include_deleted") == ["true"]
                found = registry._record(server, version, include)
                if found is None:
                    self._json(404, {"error": "Server not found"})
                else:
                    self._json(200, found)
            else:
                self._json(404, {"error": "not found"})

        def _json(self, status: int, data: object) -> None:
            self.answer(status, json.dumps(data).encode(), {"Content-Type": "application/json"})

    with https_server(Handler, tls) as port:
        state["registry"] = StubRegistry(port=port, tls=tls)
        yield state["registry"]
