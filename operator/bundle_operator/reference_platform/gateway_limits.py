"""Per-client rate limits on an endpoint's tool calls: a token bucket per (endpoint, client).

A bucket holds ``burst`` calls and refills at ``requests_per_minute``; a call that finds it empty is
refused with how long until the next call fits (HTTP 429, ``Retry-After``). Only ``tools/call``
counts: session set-up, lists and notifications never use up a client's calls. Buckets live in
memory; idle full ones are dropped when there are many, so made-up client names cannot grow it, and
then the oldest down to nine tenths of the bound, so the scan that finds them runs once per tenth of
the bound of new clients rather than for every one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_BUCKETS = 100_000
# A prune leaves at most this many buckets.
PRUNED_TO = MAX_BUCKETS - MAX_BUCKETS // 10


@dataclass
class _Bucket:
    tokens: float
    at: float
    rate: float  # calls per second, of the endpoint the bucket counts for
    burst: int

    def full(self, now: float) -> bool:
        """Whether the bucket has refilled completely: then it holds no information."""
        return self.tokens + (now - self.at) * self.rate >= self.burst


class RateLimiter:
    """Token buckets keyed by (endpoint id, client)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def take(self, key: tuple[str, str], per_minute: int, burst: int) -> float | None:
        """Spend one call; None when it fits, else the seconds until one would."""
        now = self._clock()
        rate = per_minute / 60.0
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._prune(now)
            bucket = self._buckets[key] = _Bucket(float(burst), now, rate, burst)
        else:
            bucket.rate, bucket.burst = rate, burst  # the endpoint's limit may have changed
            bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / rate

    def _prune(self, now: float) -> None:
        # Each bucket judged by its own endpoint's limit: another's could call a slow one full.
        full = [k for k, b in self._buckets.items() if b.full(now)]
        for key in full:
            del self._buckets[key]
        # Then the oldest, with room to spare: a scan per new client would cost the whole map each.
        while len(self._buckets) > PRUNED_TO:
            del self._buckets[next(iter(self._buckets))]


def retry_after(seconds: float) -> str:
    """A Retry-After value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


def json_message(body: bytes) -> Any:
    """The JSON a request body holds, or None when it is not JSON the door can read.

    Read once per request, for the rate limit and the direct path alike. Not only
    JSONDecodeError: bad UTF-8 and an integer literal past Python's digit limit raise a plain
    ValueError, deep nesting RecursionError; the SDK answers such a body, and it calls no tool.
    """
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def tool_calls(message: Any) -> list[str]:
    """The tool names of the ``tools/call`` requests in a JSON-RPC message (one or a batch)."""
    messages = message if isinstance(message, list) else [message]
    names: list[str] = []
    for item in messages:
        if isinstance(item, dict) and item.get("method") == "tools/call":
            params = item.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            names.append(name if isinstance(name, str) else "")
    return names
