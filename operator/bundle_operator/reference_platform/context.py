"""What every handler of the reference platform shares: its settings, store and HTTP session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bundle_operator.platform.models import ARTIFACT_MAX_BYTES
from bundle_operator.reference_platform.storage import Store

DEFAULT_GITHUB_BASE_URL = "https://raw.githubusercontent.com"


@dataclass
class ServerConfig:
    """Settings of one reference platform process."""

    db_path: Path
    token: str | None = None
    fault_injection: bool = False
    count_calls: bool = False  # the /_admin/calls counters, for benchmarks
    # The gateway's public MCP base; endpoint URLs are ``{public_url}/{name}/mcp``. None means
    # ``http://<host>:<port>/mcp`` of the bound socket.
    public_url: str | None = None
    # Host names endpoint requests may carry besides the public URL's and loopback's ("*": any).
    allowed_hosts: tuple[str, ...] = ()
    github_base_url: str = DEFAULT_GITHUB_BASE_URL
    github_timeout: float = 10.0
    # Seconds between discoveries of a gateway member (a member's list_changed comes sooner).
    discovery_interval: float = 60.0
    # Lets OAuth endpoints use an issuer on loopback or a private network (tests, local setups).
    allow_private_issuers: bool = False
    audit_max_entries: int = 100_000
    audit_max_age_days: float = 30.0
    # Seconds an instance's own process may go unused before it is stopped (stdio_runner.py).
    instance_idle_seconds: float = 300.0
    # The first wait before a crashed instance process is started again; it doubles up to 60 s.
    instance_backoff_seconds: float = 1.0
    # How often the tree of each running instance process is checked again (a changed one stops it).
    instance_tree_check_seconds: float = 60.0
    # Where uploaded archives are extracted; None means ``artifacts/`` beside the database file,
    # or a temporary folder (removed at shutdown) when the database is in memory.
    artifacts_dir: Path | None = None
    artifact_max_bytes: int = ARTIFACT_MAX_BYTES

    @property
    def in_memory(self) -> bool:
        """Whether the database lives in memory only."""
        return str(self.db_path) == ":memory:"


@dataclass
class Context:
    """The live state of a running reference platform."""

    config: ServerConfig
    store: Store
    public_url: str = "http://127.0.0.1/mcp"
    session: aiohttp.ClientSession | None = field(default=None)
    # The health of an instance the platform runs itself, by id (None: not looked at yet).
    instance_health: Callable[[str], dict[str, Any] | None] = field(default=lambda _instance_id: None)
    # Told once the listener is bound (the loopback bridge's address is known then).
    on_bound: list[Callable[[], None]] = field(default_factory=list)
    # Set when the server starts (see app.open_store).
    artifacts_dir: Path | None = None
    artifacts_temporary: bool = False

    def artifacts(self) -> Path:
        """The folder uploaded archives are extracted under."""
        if self.artifacts_dir is None:
            raise RuntimeError("the artifacts folder is not open")
        return self.artifacts_dir

    def http(self) -> aiohttp.ClientSession:
        """The shared outbound HTTP session (GitHub skill fetches)."""
        if self.session is None:
            self.session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.config.github_timeout)
            )
        return self.session


CONTEXT: web.AppKey[Context] = web.AppKey("platform_context", Context)
