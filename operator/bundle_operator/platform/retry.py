"""When and how long the client waits before repeating a call."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """Up to ``attempts`` calls with full-jitter exponential backoff between them."""

    attempts: int = 4
    base_delay: float = 0.2
    max_delay: float = 5.0
    # A Retry-After longer than this is cut short: the caller's own deadline matters more.
    max_retry_after: float = 30.0

    def delay(self, retry_index: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based), honouring Retry-After."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * (2**retry_index))
        return rng.uniform(0.0, ceiling)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    # ASCII digits only: str.isdigit() also accepts '²', which float() refuses.
    if re.fullmatch(r"[0-9]{1,18}", value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
