"""bundlectl analyze: analyze a bundle document and report what an install would do."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from typing import Any

from pydantic import ValidationError

from bundle_operator.commands.connection import (
    UsageError,
    add_install_flags,
    add_platform_flags,
    substitutions,
    uses_platform,
)
from bundle_operator.commands.exit_codes import EXIT_BLOCKED, EXIT_OK, EXIT_USAGE
from bundle_operator.commands.install import plan_command
from bundle_operator.commands.output import add_output_flag, emit_preview
from bundle_operator.commands.registry import trust
from bundle_operator.commands.setup_input import SetupInputError, add_setup_flags, read_setup
from bundle_operator.commands.source_input import (
    USAGE_REFUSALS,
    SourceFetchError,
    SourceInputError,
    fetch_source,
    is_url,
    read_source,
)
from bundle_operator.document import parse_bundle_text
from bundle_operator.document.issues import Code, Issue, blocking
from bundle_operator.document.parse import ParsedBundle
from bundle_operator.engine.analyze import analyze_offline
from bundle_operator.engine.preview import Preview
from bundle_operator.fetch import sha256_hex
from bundle_operator.k8s.installation.archives import SourceArchives
from bundle_operator.registry.names import LATEST
from bundle_operator.sources.downloads import fetch_error
from bundle_operator.sources.models import RegistrySource
from bundle_operator.sources.registry_source import resolve_registry
from bundle_operator.sources.resolution import SourceError, SourceSettings


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the analyze command."""
    parser = sub.add_parser(
        "analyze",
        help="analyze a bundle document without writing anything",
        description="Parse and check a bundle document and preview what an install would do. "
        "Exit 0 when nothing blocks, 1 when something blocks, 2 on usage errors.",
    )
    parser.add_argument(
        "file",
        help="the bundle document, YAML or JSON: a file, '-' for standard input, or an https URL "
        "(fetched behind the SSRF guard, 5 MiB cap); with --registry, a server's name in the registry",
    )
    fetch = parser.add_argument_group("fetching a URL")
    fetch.add_argument(
        "--sha256", metavar="HEX", help="refuse the fetched document unless its SHA-256 is HEX (optional)"
    )
    fetch.add_argument("--ca-file", metavar="PEM", help="trust this CA bundle for the https fetch")
    fetch.add_argument(
        "--allow-private-sources",
        action="store_true",
        help="let the URL reach loopback and private networks (unsafe; for tests and local setups)",
    )
    registry = parser.add_argument_group(
        "reading an MCP Registry record (its .mcpb package, verified as the operator does)"
    )
    registry.add_argument(
        "--registry", metavar="URL", help="the registry's base URL; FILE is then a server name"
    )
    registry.add_argument("--version", default=LATEST, help="the server's version (default: latest)")
    registry.add_argument(
        "--file-sha256", metavar="HEX", help="the archive's SHA-256, for a record without one"
    )
    add_setup_flags(parser)
    add_install_flags(parser)
    add_platform_flags(parser, required=False)
    add_output_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Analyze offline, or against a platform when --platform is given, and print the preview."""
    if args.registry:
        return _run_registry(args)
    if args.version != LATEST or args.file_sha256:
        print("bundlectl analyze: --version and --file-sha256 apply only with --registry", file=sys.stderr)
        return EXIT_USAGE
    if is_url(args.file):
        return _run_url(args)
    if args.sha256:
        print("bundlectl analyze: --sha256 applies only to a URL", file=sys.stderr)
        return EXIT_USAGE
    if uses_platform(args):
        return plan_command(args)
    try:
        text = read_source(args.file)
    except SourceInputError as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _run_offline(args, text)


def _run_url(args: argparse.Namespace) -> int:
    """Fetch the document (seed 000's source_url), then analyze it like a file."""
    try:
        text = fetch_source(
            args.file, sha256=args.sha256, allow_private=args.allow_private_sources, ca_file=args.ca_file
        )
    except SourceFetchError as exc:
        if exc.code in USAGE_REFUSALS:
            print(f"bundlectl analyze: {exc}", file=sys.stderr)
            return EXIT_USAGE
        # A refused source is a verdict like any other: a blocking issue naming the reason.
        return _refused(args, fetch_error(exc.refusal, "the document URL"))
    except SourceInputError as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not uses_platform(args):
        return _run_offline(args, text)
    return _plan_from(args, text)


def _plan_from(args: argparse.Namespace, text: bytes) -> int:
    # plan reads its document from a file: hand it a private copy, removed afterwards.
    handle, name = tempfile.mkstemp(prefix=".bundlectl-analyze-", suffix=".yaml")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text)
        args.file = name
        return plan_command(args)
    finally:
        os.unlink(name)


def _run_registry(args: argparse.Namespace) -> int:
    """Resolve a registry record exactly as a Bundle's registry source is, then analyze the bundle."""
    if is_url(args.file) or args.sha256:
        print("bundlectl analyze: with --registry, give a server's name (and --file-sha256)", file=sys.stderr)
        return EXIT_USAGE
    try:
        spec = RegistrySource(
            url=args.registry, server=args.file, version=args.version, file_sha256=_digest(args.file_sha256)
        )
        settings = SourceSettings(
            allow_private_sources=args.allow_private_sources, verify=trust(args.ca_file)
        )
    except ValidationError as exc:
        field = {"url": "--registry", "server": "the server name", "version": "--version"}
        where = field.get(str(exc.errors()[0]["loc"][0]), "--file-sha256")
        print(f"bundlectl analyze: {where}: {_registry_rule(where)}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        resolved = asyncio.run(resolve_registry(spec, settings))
    except SourceError as exc:
        return _refused(args, exc)
    assert resolved.source is not None
    used = resolved.source
    print(
        f"source: registry {used.server} {used.version}, {used.package_url} (sha256 {used.sha256})",
        file=sys.stderr,
    )
    for warning in resolved.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not uses_platform(args) or resolved.parsed.bundle is None:
        return _analyze(args, resolved.parsed)
    document = resolved.parsed.bundle.model_dump(mode="json", exclude_unset=True, by_alias=True)
    args.held_archives = SourceArchives(frozenset(resolved.archives))
    return _plan_from(args, json.dumps(document).encode())


def _digest(text: str | None) -> str | None:
    # A text that is not a digest goes through as given: the spec's own pattern refuses it.
    return None if text is None else sha256_hex(text) or text


def _registry_rule(where: str) -> str:
    return {
        "--registry": "must be an https base URL with no query string",
        "the server name": "must be namespace/name: one '/', parts of letters, digits, '.', '_' or '-', "
        "neither part '.' or '..'",
        "--version": "must be latest or a published version (letters, digits, '.', '_', '+', '-')",
    }.get(where, "must be 64 hex digits")


def _refused(args: argparse.Namespace, refusal: SourceError) -> int:
    """Print a refused source as analyze's answer: no bundle, one blocking issue naming the reason."""
    emit_preview(Preview(bundle=None, issues=[source_issue(refusal)]), args.output)
    return EXIT_BLOCKED


def source_issue(refusal: SourceError) -> Issue:
    """The blocking issue of a refused source; its code is the Bundle's Stalled reason in snake case."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", refusal.reason).lower()
    code = Code(snake) if snake in Code._value2member_map_ else Code.FETCH_FAILED
    return blocking(code, refusal.message)


def _run_offline(args: argparse.Namespace, text: bytes) -> int:
    return _analyze(args, parse_bundle_text(text))


def _analyze(args: argparse.Namespace, parsed: ParsedBundle) -> int:
    try:
        supplied = read_setup(args.setup, args.setup_file)
        mapped = substitutions(args.substitute)
    except (SetupInputError, UsageError) as exc:
        print(f"bundlectl analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    preview = analyze_offline(parsed, supplied, mapped)
    emit_preview(preview, args.output)
    return EXIT_BLOCKED if preview.blocking else EXIT_OK
