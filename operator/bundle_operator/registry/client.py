"""Reading an MCP Registry (API v0.1) behind the fetcher's guards: one record, or a page of a search.

Every request goes through ``fetch.fetch_answer``: https only, public addresses only (checked again
at each redirect), a byte cap and a timeout, so a registry URL in a Bundle cannot make the operator
reach inside its own network. Failures are ``RegistryError`` with the Stalled reason they stand
for and whether they may pass by themselves.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from bundle_operator.document.issues import printable
from bundle_operator.document.issues import shown as quoted
from bundle_operator.fetch import FetchRefused, IPNetwork, fetch_answer
from bundle_operator.registry.names import InvalidName, check_registry_url, check_version, record_path
from bundle_operator.registry.records import Record, RecordInvalid, load_json, parse_record, record_of

# A record is a few kilobytes; a list page of a hundred records well under a megabyte.
MAX_RECORD_BYTES = 1024 * 1024
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_PAGE_LIMIT = 100
# The official registry's cursors are a server name and a version: a few hundred characters.
MAX_CURSOR = 1024


class RegistryError(Exception):
    """The registry could not be read; ``reason`` is CamelCase, ``permanent`` when retrying is useless."""

    def __init__(self, reason: str, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class Listed:
    """One entry of a search page: its record, or why it could not be read."""

    record: Record | None
    problem: str | None = None


@dataclass(frozen=True)
class Page:
    """One page of a search, and the cursor of the next one (None on the last page)."""

    servers: list[Listed]
    next_cursor: str | None


class RegistryClient:
    """Reads one registry; every call is a fresh, guarded request."""

    def __init__(
        self,
        url: str,
        *,
        allow_networks: Sequence[IPNetwork | str] = (),
        verify: ssl.SSLContext | bool = True,
        timeout: float = 30.0,
    ) -> None:
        self.base = check_registry_url(url)
        self._allow = allow_networks
        self._verify = verify
        self._timeout = timeout

    async def record(self, server: str, version: str) -> Record:
        """The record of ``server`` at ``version`` (or ``latest``), deleted versions included."""
        url = f"{self.base}{record_path(server, version)}?include_deleted=true"
        body = await self._get(url, MAX_RECORD_BYTES, not_found=f"{server} {version} is not in the registry")
        try:
            record = parse_record(body)
        except RecordInvalid as exc:
            raise _invalid(f"the registry's record: {exc}") from None
        # A registry that answers with another server's record is not to be believed about this one.
        if record.name != server:
            raise _invalid(f"asked for {server}, the registry answered with a record of another server")
        try:
            # It becomes status.source.version, and the version a Bundle pins: it must be one.
            check_version(record.version)
        except InvalidName:
            raise _invalid(
                f"asked for {server} {version}, the registry answered with a version that is not one "
                f"({quoted(record.version)})"
            ) from None
        if version != "latest" and record.version != version:
            raise _invalid(
                f"asked for {server} {version}, the registry answered with version {quoted(record.version)}"
            )
        return record

    async def search(self, text: str, *, cursor: str | None = None, limit: int = 30) -> Page:
        """One page of the servers whose name contains ``text``, latest versions only."""
        asked = min(limit, MAX_PAGE_LIMIT)
        query = {"search": text, "version": "latest", "limit": str(asked)}
        if cursor:
            query["cursor"] = cursor
        body = await self._get(f"{self.base}/v0.1/servers?{urlencode(query)}", MAX_PAGE_BYTES, not_found=None)
        return _page(body, asked)

    async def _get(self, url: str, max_bytes: int, *, not_found: str | None) -> bytes:
        try:
            answer = await fetch_answer(
                url,
                max_bytes=max_bytes,
                allow_networks=self._allow,
                verify=self._verify,
                io_timeout=self._timeout,
                total_timeout=self._timeout,
            )
        except FetchRefused as refusal:
            raise _error(refusal, not_found) from None
        return answer.body


def _page(body: bytes, limit: int) -> Page:
    """A search page from its bytes: at most ``limit`` servers, and a cursor that can be sent back."""
    try:
        data = load_json(body)
    except RecordInvalid as exc:
        raise _invalid(f"the registry's list: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
        raise _invalid("the registry's list has no servers array")
    servers: list[object] = data["servers"]
    # Each entry costs a record, a verdict and a line of output; a page of millions of "{}" would
    # take minutes and gigabytes where the hundred it may hold take a moment.
    if len(servers) > limit:
        raise _invalid(f"the registry's page has {len(servers)} servers, more than the {limit} asked for")
    metadata = data.get("metadata")
    following = metadata.get("nextCursor") if isinstance(metadata, dict) else None
    return Page([_listed(item, i) for i, item in enumerate(servers)], _cursor(following))


def _cursor(value: object) -> str | None:
    """The next page's cursor, None on the last page; it goes back in a URL and onto a terminal."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) > MAX_CURSOR or not value.isprintable():
        raise _invalid(
            f"the registry's nextCursor is not a cursor: it must be printable text of at most {MAX_CURSOR} "
            "characters"
        )
    return value


def _invalid(message: str) -> RegistryError:
    return RegistryError("RegistryRecordInvalid", message, permanent=True)


def _listed(item: object, index: int) -> Listed:
    try:
        return Listed(record_of(item, f"servers/{index}"))
    except RecordInvalid as exc:
        return Listed(None, str(exc))


def _error(refusal: FetchRefused, not_found: str | None) -> RegistryError:
    """A refused read as the reason a Bundle stalls on, or a passing failure to retry."""
    status = refusal.status
    # A redirect's Location is the registry's text, and a refusal may quote its host and path.
    reason = printable(refusal.reason)
    if status == 404 and not_found is not None:
        return RegistryError("RegistryRecordNotFound", not_found, permanent=True)
    if refusal.code == "too_large":
        return _invalid(f"the registry's answer is too large ({reason})")
    if refusal.transient:
        return RegistryError("RegistryUnavailable", f"the registry: {reason}", permanent=False)
    return RegistryError("RegistryRefused", f"the registry: {reason}", permanent=True)
