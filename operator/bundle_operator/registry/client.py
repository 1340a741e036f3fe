"""Reading an MCP Registry (API v0.1) behind the fetcher's guards: one record, or a page of a search.

Every request goes through ``fetch.fetch_bytes``: https only, public addresses only (checked again
at each redirect), a byte cap and a timeout, so a registry URL in a Bundle cannot make the operator
reach inside its own network. Failures are ``RegistryError`` with the Stalled reason they stand
for and whether they may pass by themselves.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from bundle_operator.fetch import FetchRefused, IPNetwork, fetch_bytes
from bundle_operator.registry.names import check_registry_url, record_path
from bundle_operator.registry.records import Record, RecordInvalid, parse_record, record_of

# A record is a few kilobytes; a list page of a hundred records well under a megabyte.
MAX_RECORD_BYTES = 1024 * 1024
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_PAGE_LIMIT = 100


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
            raise RegistryError(
                "RegistryRecordInvalid", f"the registry's record: {exc}", permanent=True
            ) from None
        # A registry that answers with another server's record is not to be believed about this one.
        if record.name != server:
            raise RegistryError(
                "RegistryRecordInvalid",
                f"asked for {server}, the registry answered with a record of another server",
                permanent=True,
            )
        if version != "latest" and record.version != version:
            raise RegistryError(
                "RegistryRecordInvalid",
                f"asked for {server} {version}, the registry answered with version {record.version[:64]}",
                permanent=True,
            )
        return record

    async def search(self, text: str, *, cursor: str | None = None, limit: int = 30) -> Page:
        """One page of the servers whose name contains ``text``, latest versions only."""
        query: dict[str, str] = {
            "search": text,
            "version": "latest",
            "limit": str(min(limit, MAX_PAGE_LIMIT)),
        }
        if cursor:
            query["cursor"] = cursor
        body = await self._get(f"{self.base}/v0.1/servers?{urlencode(query)}", MAX_PAGE_BYTES, not_found=None)
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise RegistryError(
                "RegistryRecordInvalid", "the registry's list is not JSON", permanent=True
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
            raise RegistryError(
                "RegistryRecordInvalid", "the registry's list has no servers array", permanent=True
            )
        listed = [_listed(item, i) for i, item in enumerate(data["servers"])]
        metadata = data.get("metadata")
        following = metadata.get("nextCursor") if isinstance(metadata, dict) else None
        return Page(listed, following if isinstance(following, str) and following else None)

    async def _get(self, url: str, max_bytes: int, *, not_found: str | None) -> bytes:
        try:
            return await fetch_bytes(
                url,
                max_bytes=max_bytes,
                allow_networks=self._allow,
                verify=self._verify,
                io_timeout=self._timeout,
                total_timeout=self._timeout,
            )
        except FetchRefused as refusal:
            raise _error(refusal, not_found) from None


def _listed(item: object, index: int) -> Listed:
    try:
        return Listed(record_of(item, f"servers/{index}"))
    except RecordInvalid as exc:
        return Listed(None, str(exc))


def _error(refusal: FetchRefused, not_found: str | None) -> RegistryError:
    """A refused read as the reason a Bundle stalls on, or a passing failure to retry."""
    status = refusal.status
    if status == 404 and not_found is not None:
        return RegistryError("RegistryRecordNotFound", not_found, permanent=True)
    if refusal.code == "too_large":
        return RegistryError(
            "RegistryRecordInvalid", f"the registry's answer is too large ({refusal.reason})", permanent=True
        )
    if refusal.transient:
        return RegistryError("RegistryUnavailable", f"the registry: {refusal.reason}", permanent=False)
    return RegistryError("RegistryRefused", f"the registry: {refusal.reason}", permanent=True)
