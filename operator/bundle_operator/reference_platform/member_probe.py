"""Whether a connected member still answers: the cheapest request its wire has, bounded in time."""

from __future__ import annotations

import asyncio

from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# Between discoveries a member is probed this often, and a probe that takes longer than
# PROBE_TIMEOUT fails: together under the 10 s in which a stopped member must show unhealthy.
PROBE_SECONDS = 5.0
PROBE_TIMEOUT = 4.0


class MemberUnreachable(Exception):
    """A probe found the member gone."""


async def probe(client: Client, failure: str) -> None:
    """Raise ``MemberUnreachable`` (``failure``) unless the member answers within PROBE_TIMEOUT."""
    try:
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # ping is gone on the 2026-07-28 wire; server/discover is its cheapest request.
            await asyncio.wait_for(client.session.send_discover(client.protocol_version), PROBE_TIMEOUT)
        else:
            # The session's: the Client's own send_ping warns that it is deprecated on every wire.
            await asyncio.wait_for(client.session.send_ping(), PROBE_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise MemberUnreachable(f"{failure}: {error_text(exc)}") from None


def error_text(exc: BaseException) -> str:
    """An exception as a reason: its type and message, the first few of a group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(error_text(e) for e in exc.exceptions[:3])
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
