"""bundlectl registry: find servers in an MCP Registry and see whether a record can be installed.

``search`` lists up to ``--limit`` servers, following the registry's cursors (``metadata.nextCursor``)
as long as its pages are smaller than that, as ``gh search --limit`` does; ``show`` prints one record and the
verdict the operator would reach on it (DESIGN.md §9.3), without downloading anything. A record is
written by whoever published it: what bundlectl says of it (tables, names, messages) goes through
``printable``; the record itself, in ``show -o json``, keeps its strings as given, with JSON escapes
for what a terminal or UTF-8 cannot carry. Everywhere, the userinfo of its URLs is masked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import ssl
import sys
from typing import Any

from bundle_operator.commands.exit_codes import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from bundle_operator.commands.output import table_lines
from bundle_operator.document.issues import printable
from bundle_operator.document.issues import shown as quoted
from bundle_operator.fetch import PRIVATE_NETWORKS, sha256_hex, shown_text, tls_context
from bundle_operator.registry.client import MAX_PAGE_LIMIT, RegistryClient, RegistryError
from bundle_operator.registry.names import (
    LATEST,
    SERVER_NAME_MAX,
    VERSION_MAX,
    InvalidName,
    check_server_name,
    check_version,
)
from bundle_operator.registry.records import (
    Installable,
    NotInstallable,
    Record,
    installable,
    masked,
    masked_tree,
    record_label,
)

# A search stops here: a registry whose cursors never end must not keep bundlectl running.
MAX_PAGES = 50
MAX_SEARCH_LIMIT = 1000
# What json.dumps(ensure_ascii=False) leaves as it is but must not reach a terminal: DEL and the C1
# controls (0x9b is a CSI), and lone surrogates, which UTF-8 cannot encode.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\ud800-\udfff]")


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the registry command and its subcommands."""
    parser = sub.add_parser("registry", help="search an MCP Registry and check its records")
    actions = parser.add_subparsers(dest="registry_command", metavar="SUBCOMMAND", required=True)

    search = actions.add_parser("search", help="list the servers whose name contains TEXT")
    search.add_argument("text", help="a part of the server's name")
    add_registry_flags(search)
    search.add_argument(
        "--limit",
        type=int,
        default=30,
        help=f"at most this many servers, read over as many of the registry's pages as it takes "
        f"(1 to {MAX_SEARCH_LIMIT}; at most {MAX_PAGES} pages)",
    )
    search.add_argument("--cursor", help="where to start: the next_cursor a previous search printed")
    search.add_argument(
        "--all", action="store_true", help=f"every server, whatever --limit says (at most {MAX_PAGES} pages)"
    )
    search.add_argument("-o", "--output", choices=("table", "json"), default="table")
    search.set_defaults(func=_search)

    show = actions.add_parser("show", help="print a record and whether it can be installed, and why not")
    show.add_argument("server", help="the server's name, namespace/name")
    show.add_argument("--version", default=LATEST, help="the version (default: latest)")
    show.add_argument("--file-sha256", metavar="HEX", help="the digest a Bundle would pin (fileSha256)")
    add_registry_flags(show)
    show.add_argument("-o", "--output", choices=("table", "json"), default="table")
    show.set_defaults(func=_show)


def add_registry_flags(parser: argparse.ArgumentParser) -> None:
    """Add --registry, --ca-file and --allow-private-sources."""
    parser.add_argument("--registry", metavar="URL", required=True, help="the registry's base URL (https)")
    parser.add_argument(
        "--ca-file", metavar="PEM", help="trust this CA bundle (default: $SSL_CERT_FILE or the system's)"
    )
    parser.add_argument(
        "--allow-private-sources",
        action="store_true",
        help="let requests reach loopback and private networks (unsafe; for tests and local setups)",
    )


def trust(ca_file: str | None) -> ssl.SSLContext:
    """The TLS trust for --ca-file, else $SSL_CERT_FILE or the system store; ValueError names the file."""
    if ca_file is None:
        return tls_context()
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--ca-file {ca_file}: cannot be read as PEM ({type(exc).__name__})") from None


def client_for(args: argparse.Namespace) -> RegistryClient:
    """A registry client for the flags; ValueError (InvalidName included) on a usage error."""
    return RegistryClient(
        args.registry,
        allow_networks=PRIVATE_NETWORKS if args.allow_private_sources else (),
        verify=trust(args.ca_file),
    )


def _usage(command: str, message: str) -> int:
    print(f"bundlectl registry {command}: {message}", file=sys.stderr)
    return EXIT_USAGE


def _refused(command: str, exc: RegistryError) -> int:
    print(f"bundlectl registry {command}: {printable(exc.message)} ({exc.reason})", file=sys.stderr)
    return EXIT_REFUSED


def _emit_json(data: object) -> None:
    """Print JSON with escapes for what a terminal or stdout's encoding cannot take."""
    text = _JSON_UNSAFE.sub(_json_escape, json.dumps(data, indent=2, ensure_ascii=False))
    if not _encodes(text):
        text = json.dumps(data, indent=2, ensure_ascii=True)  # every non-ASCII character escaped
    sys.stdout.write(text + "\n")


def _emit_text(text: str) -> None:
    """Print printable text, with escapes for the characters stdout's encoding has not."""
    if not _encodes(text):
        text = text.encode(_encoding(), "backslashreplace").decode(_encoding())
    sys.stdout.write(text + "\n")


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _encoding() -> str:
    return getattr(sys.stdout, "encoding", None) or "utf-8"


def _encodes(text: str) -> bool:
    try:
        text.encode(_encoding())
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _shown_url(url: str) -> str:
    """A URL as the verdict shows it (no userinfo, no query), printable, whatever the text is."""
    try:
        return printable(shown_text(url))
    except UnicodeError:  # httpx's own errors for a lone surrogate or a bad IDNA label
        return "(a URL that cannot be read)"


# ----------------------------------------------------------------------------------------- search


def _search(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_SEARCH_LIMIT:
        return _usage("search", f"--limit must be 1 to {MAX_SEARCH_LIMIT}")
    if not _is_text(args.text) or (args.cursor is not None and not _is_text(args.cursor)):
        return _usage("search", "TEXT and --cursor must be printable UTF-8 text")
    try:
        client = client_for(args)
    except ValueError as exc:
        return _usage("search", str(exc))
    try:
        servers, following = asyncio.run(_found(client, args.text, args.cursor, args.limit, args.all))
    except RegistryError as exc:
        return _refused("search", exc)
    if args.output == "json":
        _emit_json({"servers": servers, "next_cursor": following})
        return EXIT_OK
    rows = [
        [s["name"] or "(unreadable)", s["version"] or "", s["status"] or "", _mcpb(s), s["description"][:80]]
        for s in servers
    ]
    lines = table_lines(["NAME", "VERSION", "STATUS", "MCPB", "DESCRIPTION"], rows)
    if following:
        lines += ["", f"more: --cursor {printable(following)}"]
    _emit_text("\n".join(lines))
    return EXIT_OK


def _is_text(text: str) -> bool:
    """Whether an argument is text a URL can carry (an argument that was not UTF-8 is not)."""
    return text.isprintable()


async def _found(
    client: RegistryClient, text: str, cursor: str | None, limit: int, every: bool
) -> tuple[list[dict[str, Any]], str | None]:
    """The summaries of up to ``limit`` servers (every one with ``every``), and the cursor after them.

    A registry may answer with smaller pages than asked for, so cursors are followed until the
    limit is reached; each page asks only for what is still missing, so no row is read and dropped.
    """
    servers: list[dict[str, Any]] = []
    seen = {cursor}
    for _ in range(MAX_PAGES):
        wanted = MAX_PAGE_LIMIT if every else min(limit - len(servers), MAX_PAGE_LIMIT)
        # Only the summaries are kept: a page's records may weigh a hundred times its bytes.
        page = await client.search(text, cursor=cursor, limit=wanted)
        servers += [_summary(item.record, item.problem) for item in page.servers]
        cursor = page.next_cursor
        if cursor is None or cursor in seen:  # a cursor that leads back: the list would never end
            break
        seen.add(cursor)
        if not every and len(servers) >= limit:
            break
    return servers, cursor


def _summary(record: Record | None, problem: str | None) -> dict[str, Any]:
    if record is None:
        return {
            "name": None,
            "version": None,
            "status": None,
            "description": "",
            "installable": False,
            "reason": "RegistryRecordInvalid",
            "message": problem,
        }
    verdict = installable(record)
    return {
        "name": quoted(record.name, SERVER_NAME_MAX),
        "version": quoted(record.version, VERSION_MAX),
        "status": record.status,
        "description": record.description,
        "installable": isinstance(verdict, Installable),
        "reason": None if isinstance(verdict, Installable) else verdict.reason,
        "message": verdict.warning if isinstance(verdict, Installable) else verdict.message,
    }


def _mcpb(summary: dict[str, Any]) -> str:
    if summary["installable"]:
        return "yes"
    return {
        "RegistryNoMcpbPackage": "-",
        "RegistryChecksumMissing": "no digest",
        "InsecurePackageUrl": "insecure URL",
        "RegistryRecordDeleted": "deleted",
    }.get(summary["reason"], "no")


# ------------------------------------------------------------------------------------------- show


def _show(args: argparse.Namespace) -> int:
    try:
        check_server_name(args.server)
        check_version(args.version)
        pin = _pin(args.file_sha256)
        client = client_for(args)
    except (ValueError, InvalidName) as exc:
        return _usage("show", str(exc))
    try:
        record = asyncio.run(client.record(args.server, args.version))
    except RegistryError as exc:
        message = printable(exc.message)
        answer = {
            "registry": client.base,
            "server": args.server,
            "version": args.version,
            "status": None,
            "status_message": None,
            "is_latest": None,
            "installable": False,
            "reason": exc.reason,
            "message": message,
            "package": None,
            "record": None,
        }
        if args.output == "json":
            _emit_json(answer)
        else:
            _emit_text(f"{args.server} {args.version}: not installable ({exc.reason}): {message}")
        return EXIT_REFUSED
    verdict = installable(record, pin)
    if args.output == "json":
        _emit_json(_shown(client.base, record, verdict))
    else:
        _emit_text(_text(record, verdict))
    return EXIT_OK if isinstance(verdict, Installable) else EXIT_REFUSED


def _pin(text: str | None) -> str | None:
    if text is None:
        return None
    digest = sha256_hex(text)
    if digest is None:
        raise ValueError("--file-sha256 must be 64 hex digits")
    return digest


def _shown(base: str, record: Record, verdict: Installable | NotInstallable) -> dict[str, Any]:
    if isinstance(verdict, Installable):
        ok, reason, message = True, None, verdict.warning
        package: dict[str, Any] | None = {
            "url": _shown_url(verdict.package_url),
            "sha256": verdict.sha256,
            "digest_from": verdict.digest_from,
        }
    else:
        ok, reason, message, package = False, verdict.reason, verdict.message, None
    return {
        "registry": base,
        "server": quoted(record.name, SERVER_NAME_MAX),
        "version": quoted(record.version, VERSION_MAX),
        "status": record.status,
        "status_message": record.status_message,
        "is_latest": record.is_latest,
        "installable": ok,
        "reason": reason,
        "message": message,
        "package": package,
        "record": masked_tree(record.server),
    }


def _text(record: Record, verdict: Installable | NotInstallable) -> str:
    """The record and its verdict for a person; every string from the registry made printable."""
    latest = ", latest" if record.is_latest else ""
    lines = [f"{record_label(record)} ({record.status}{latest})"]
    if record.description:
        lines.append(record.description)
    if record.status_message:
        lines.append(f"status: {record.status_message}")
    repository = record.server.get("repository")
    if isinstance(repository, dict) and isinstance(repository.get("url"), str):
        lines.append(f"repository: {printable(masked(repository['url']))}")
    lines.append("packages:" if record.packages else "packages: none")
    lines += [
        _package_line(package.registry_type, package.identifier, package.file_sha256)
        for package in record.packages
    ]
    if isinstance(verdict, Installable):
        source = "its registry record" if verdict.digest_from == "record" else "--file-sha256"
        lines.append(
            f"installable: yes: {_shown_url(verdict.package_url)}, checked against the SHA-256 {source} "
            f"gives ({verdict.sha256})"
        )
        if len(record.mcpb_packages()) > 1:
            lines.append(
                "several mcpb packages: the one used is the first whose archive's manifest supports the "
                "platform, read when it is downloaded"
            )
        if verdict.warning:
            lines.append(f"warning: {printable(verdict.warning)}")
    else:
        lines.append(f"installable: no ({verdict.reason}): {printable(verdict.message)}")
    return "\n".join(lines)


def _package_line(kind: str, identifier: str, digest: str | None) -> str:
    """One package of the record: an mcpb archive's URL as the verdict shows it, and its digest."""
    if kind != "mcpb":
        return f"  {printable(kind)}  {printable(masked(identifier))}"
    checked = f"  sha256 {digest}" if digest else "  (no fileSha256)"
    return f"  mcpb  {_shown_url(identifier)}{checked}"
