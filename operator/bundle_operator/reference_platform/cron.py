"""Five-field cron schedules: validation and the next run time in a time zone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bundle_operator.document.schedule import timezone_exists

_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_NAMES = {3: {m: i + 1 for i, m in enumerate(_MONTHS)}, 4: {d: i for i, d in enumerate(_WEEKDAYS)}}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_FIELDS = ("minute", "hour", "day of month", "month", "day of week")
# A schedule that does not fire within this many days (e.g. 30 February) is refused.
_HORIZON_DAYS = 366 * 5
# ASCII digits only: str.isdigit() also accepts '²', which int() then refuses.
_NUMBER = re.compile(r"[0-9]{1,9}")


class CronError(ValueError):
    """A schedule that is not a valid five-field cron expression."""


@dataclass(frozen=True)
class Cron:
    """A parsed schedule: the allowed values of each field."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: datetime) -> bool:
        """Whether the schedule runs on this date; cron ORs day-of-month and day-of-week when both are set."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return dom or dow
        return dom and dow


def _value(text: str, index: int) -> int:
    upper = text.upper()
    if index in _NAMES and upper in _NAMES[index]:
        return _NAMES[index][upper]
    if not _NUMBER.fullmatch(text):
        raise CronError(f"{_FIELDS[index]}: a value is not a number or a name")
    low, high = _RANGES[index]
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{_FIELDS[index]}: a value is outside {low}-{high}")
    return value


def _field(text: str, index: int) -> frozenset[int]:
    low, high = _RANGES[index]
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
                raise CronError(f"{_FIELDS[index]}: a step must be a positive number")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _value(first, index), _value(last, index)
            if start > end:
                raise CronError(f"{_FIELDS[index]}: a range runs backwards")
        else:
            start = _value(base, index)
            end = high if slash else start
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:  # 7 is another spelling of Sunday
        values.discard(7)
        values.add(0)
    return frozenset(values)


def parse_cron(expression: str) -> Cron:
    """Parse a five-field cron expression; raises CronError naming the bad field."""
    parts = expression.split()
    if len(parts) != 5:
        raise CronError(f"a schedule has five fields (minute hour day month weekday), not {len(parts)}")
    fields = [_field(part, i) for i, part in enumerate(parts)]
    return Cron(
        minutes=fields[0],
        hours=fields[1],
        days=fields[2],
        months=fields[3],
        weekdays=fields[4],
        days_restricted=parts[2] != "*",
        weekdays_restricted=parts[4] != "*",
    )


def next_run(cron: Cron, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first run strictly after ``after`` (aware), in UTC; None when it never runs."""
    local = after.astimezone(zone).replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = local.replace(hour=0, minute=0)
    for _ in range(_HORIZON_DAYS):
        if cron.day_matches(day):
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    candidate = day.replace(hour=hour, minute=minute)
                    if candidate >= local:
                        return candidate.astimezone(UTC)
        day = (day + timedelta(days=1)).replace(hour=0, minute=0)
    return None


def parse_timezone(name: str) -> ZoneInfo:
    """An IANA time zone by name; raises ValueError (never naming it) when there is none."""
    # The form is checked first: zoneinfo would recurse through imports for a name of a few
    # hundred parts. The message never repeats the name sent.
    if not timezone_exists(name):
        raise ValueError("is not an IANA time zone such as Europe/Berlin or UTC")
    return ZoneInfo(name)
