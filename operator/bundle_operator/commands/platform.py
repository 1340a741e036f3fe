"""bundlectl platform: run the reference platform, and check that bundlectl can reach a platform."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from bundle_operator import __version__
from bundle_operator.commands.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from bundle_operator.platform import kinds
from bundle_operator.platform.client import ENV_TOKEN, ENV_URL, PlatformClient
from bundle_operator.platform.errors import PlatformError
from bundle_operator.telemetry import tracing

# The service name the reference platform's spans carry (the operator's are "bundle-operator").
PLATFORM_SERVICE = "bundle-platform"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``platform serve`` and ``platform check``."""
    parser = sub.add_parser("platform", help="run or reach the agent platform")
    actions = parser.add_subparsers(dest="platform_command", metavar="ACTION", required=True)

    run = actions.add_parser("serve", help="run the reference platform (HTTP API v1 on a SQLite file)")
    run.add_argument("--port", type=int, required=True, help="TCP port; 0 picks a free one")
    run.add_argument(
        "--db", type=Path, required=True, help="SQLite file; created when missing, kept across runs"
    )
    run.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    tokens = run.add_mutually_exclusive_group()
    tokens.add_argument("--token", help="require 'Authorization: Bearer TOKEN' on every API call")
    tokens.add_argument(
        "--token-file",
        type=Path,
        help="the same, with the token read from this file at start (keeps it out of the process list)",
    )
    run.add_argument(
        "--enable-fault-injection",
        action="store_true",
        help="add the /_admin/faults routes that make chosen calls fail or slow down (tests only)",
    )
    run.add_argument(
        "--count-calls",
        action="store_true",
        help="count API calls by method, kind and workspace at /_admin/calls (for benchmarks)",
    )
    run.add_argument("--public-url", help="the gateway's public MCP base URL (default http://HOST:PORT/mcp)")
    run.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a Host name endpoint requests may carry besides the public URL's and loopback's "
        "(repeatable; '*' turns the DNS-rebinding check off)",
    )
    run.add_argument(
        "--github-base-url",
        help="where GitHub skills' SKILL.md files are fetched from (default: GitHub's raw file host)",
    )
    run.add_argument(
        "--discovery-interval",
        type=float,
        default=60.0,
        help="seconds between discoveries of each gateway member (default 60; list_changed comes sooner)",
    )
    run.add_argument(
        "--instance-idle-seconds",
        type=float,
        default=300.0,
        help="seconds an MCP instance the platform runs may go unused before its process stops (default 300)",
    )
    run.add_argument(
        "--instance-backoff-seconds",
        type=float,
        default=1.0,
        help="first wait before a crashed instance process starts again; it doubles up to 60 (default 1)",
    )
    run.add_argument(
        "--instance-tree-check-seconds",
        type=float,
        default=60.0,
        help="how often the unpacked tree of a running instance process is checked again; a changed "
        "one stops it (default 60)",
    )
    run.add_argument(
        "--allow-private-issuers",
        action="store_true",
        help="let OAuth endpoints use an issuer on loopback or a private network (tests and local setups)",
    )
    run.add_argument(
        "--audit-max-entries",
        type=int,
        default=100_000,
        help="gateway tool calls kept in the audit at most (default 100000)",
    )
    run.add_argument(
        "--audit-max-age-days",
        type=float,
        default=30.0,
        help="days a gateway tool call stays in the audit at most (default 30)",
    )
    run.add_argument(
        "--artifacts-dir",
        type=Path,
        help="folder uploaded .mcpb archives are extracted under (default: artifacts/ beside --db)",
    )
    run.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send traces over OTLP/HTTP to this base URL (spans go to URL/v1/traces); default: the "
        "standard OTEL_EXPORTER_OTLP_ENDPOINT variables, and no tracing when none is set",
    )
    run.set_defaults(func=_serve)

    check = actions.add_parser("check", help="check that a platform answers, with the token if one is needed")
    check.add_argument(
        "--url", default=os.environ.get(ENV_URL), help=f"platform base URL (default ${ENV_URL})"
    )
    check.add_argument("--workspace", default="default", help="workspace to read from (default 'default')")
    check.set_defaults(func=_check)


def _serve(args: argparse.Namespace) -> int:
    # The reference platform is a program of its own: only this command loads it, so no other
    # command (and not the operator) pays for its server stack.
    from bundle_operator.reference_platform.context import DEFAULT_GITHUB_BASE_URL, ServerConfig
    from bundle_operator.reference_platform.server import serve

    if not 0 <= args.port <= 65535:
        print("bundlectl platform serve: --port must be 0..65535", file=sys.stderr)
        return EXIT_USAGE
    if not 0.1 <= args.discovery_interval <= 86400:
        print("bundlectl platform serve: --discovery-interval must be 0.1..86400 seconds", file=sys.stderr)
        return EXIT_USAGE
    if not 0.1 <= args.instance_idle_seconds <= 86400 or not 0.01 <= args.instance_backoff_seconds <= 60:
        print("bundlectl platform serve: --instance-idle-seconds must be 0.1..86400 seconds, "
              "--instance-backoff-seconds 0.01..60", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if not 0.1 <= args.instance_tree_check_seconds <= 86400:
        print(
            "bundlectl platform serve: --instance-tree-check-seconds must be 0.1..86400 seconds",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.audit_max_entries < 1 or not 0 < args.audit_max_age_days <= 36500:
        print("bundlectl platform serve: --audit-max-entries must be 1 or more, --audit-max-age-days "
              "0 to 36500", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    token = args.token
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            print(f"bundlectl platform serve: cannot read --token-file: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
        if not token:
            print("bundlectl platform serve: --token-file is empty", file=sys.stderr)
            return EXIT_USAGE
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # The gateway's member clients would log every request they send.
    for chatty in ("httpx", "httpx2", "mcp"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    config = ServerConfig(
        db_path=args.db,
        token=token,
        fault_injection=args.enable_fault_injection,
        count_calls=args.count_calls,
        public_url=args.public_url,
        allowed_hosts=tuple(args.allowed_host),
        github_base_url=args.github_base_url or DEFAULT_GITHUB_BASE_URL,
        discovery_interval=args.discovery_interval,
        allow_private_issuers=args.allow_private_issuers,
        audit_max_entries=args.audit_max_entries,
        audit_max_age_days=args.audit_max_age_days,
        artifacts_dir=args.artifacts_dir,
        instance_idle_seconds=args.instance_idle_seconds,
        instance_backoff_seconds=args.instance_backoff_seconds,
        instance_tree_check_seconds=args.instance_tree_check_seconds,
    )

    def ready(url: str) -> None:
        faults = ", fault injection on" if config.fault_injection else ""
        print(f"reference platform listening on {url} (db {config.db_path}{faults})", flush=True)

    tracing.configure(
        PLATFORM_SERVICE, endpoint=args.otlp_endpoint, attributes={"service.version": __version__}
    )
    try:
        asyncio.run(serve(config, args.host, args.port, ready))
    except OSError as exc:
        print(
            f"bundlectl platform serve: cannot listen on {args.host}:{args.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    finally:
        tracing.shutdown()  # sends the spans still waiting in the batch
    return EXIT_OK


async def _probe(url: str, token: str | None, workspace: str) -> int:
    async with PlatformClient(url, token=token, timeout=5.0) as client:
        await client.health()
        page = await client.list_page(workspace, kinds.AGENTS, limit=1)
    agents = f"{len(page.items)}{'+' if page.next_cursor else ''}"
    print(f"platform at {url} answers; workspace '{workspace}' lists {agents} agent(s) on its first page")
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    if not args.url:
        print(f"bundlectl platform check: give --url or set {ENV_URL}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_probe(args.url, os.environ.get(ENV_TOKEN) or None, args.workspace))
    except PlatformError as exc:
        print(f"bundlectl platform check: {exc}", file=sys.stderr)
        return EXIT_FAILED
