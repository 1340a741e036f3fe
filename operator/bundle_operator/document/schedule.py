"""Cron automations: five-field schedules and IANA time zones."""

from __future__ import annotations

import re
import zoneinfo
from functools import lru_cache

from bundle_operator.document.issues import Code, Issue, blocking, blocking_for
from bundle_operator.document.models import Bundle
from bundle_operator.document.pointer import join_pointer

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (field name, lowest, highest, names for values starting at `lowest`)
_FIELDS: tuple[tuple[str, int, int, list[str]], ...] = (
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day of month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# Bounded runs: a value of thousands of digits is refused here, not by int().
_ITEM = re.compile(r"^(?P<range>\*|[0-9a-zA-Z]{1,9}(?:-[0-9a-zA-Z]{1,9})?)(?:/(?P<step>[0-9]{1,9}))?\Z")


def cron_problem(expression: str) -> str | None:
    """Why a five-field cron expression is invalid, or None."""
    fields = expression.split()
    if len(fields) != 5:
        return f"a schedule has five fields (minute hour day-of-month month day-of-week), not {len(fields)}"
    for text, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for item in text.split(","):
            problem = _item_problem(item, low, high, names)
            if problem is not None:
                return f"the {name} field: {problem}"
    return None


def _item_problem(item: str, low: int, high: int, names: list[str]) -> str | None:
    match = _ITEM.match(item)
    if match is None:
        return f"'{item[:20]}' is not a value, range, list or step"
    step = match.group("step")
    if step is not None and int(step) == 0:
        return "a step must be at least 1"
    part = match.group("range")
    if part == "*":
        return None
    bounds = part.split("-")
    numbers: list[int] = []
    for bound in bounds:
        value = _value(bound, low, names)
        if value is None or not low <= value <= high:
            return f"'{bound}' is outside {low}-{high}"
        numbers.append(value)
    if len(numbers) == 2 and numbers[0] > numbers[1]:
        return f"the range '{part}' runs backwards"
    return None


def _value(text: str, low: int, names: list[str]) -> int | None:
    if text.isdigit():
        return int(text)
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + low
    return None


# The form of an IANA name: at most four '/'-separated parts (the database has at most three) of
# ASCII letters, digits and '_', '+', '-', '.' (not leading, so no '.' or '..'), each at most 30
# characters (the database's longest is 14). Checked before zoneinfo sees the name: zoneinfo
# turns each part into a package to import from tzdata, so a few hundred parts recurse through the
# import system until RecursionError, and other shapes reach the file system.
_TIMEZONE_PART = r"[A-Za-z0-9_+-][A-Za-z0-9_+.-]{0,29}"
_TIMEZONE_FORM = re.compile(rf"{_TIMEZONE_PART}(?:/{_TIMEZONE_PART}){{0,3}}")


def timezone_name_is_plausible(name: str) -> bool:
    """Whether ``name`` has the form of an IANA time zone name (it may still not exist)."""
    return _TIMEZONE_FORM.fullmatch(name) is not None


# Bounded: a long-running operator reads documents from many users.
@lru_cache(maxsize=1024)
def timezone_exists(name: str) -> bool:
    """Whether the IANA time zone database knows the name; False for anything not of its form."""
    if not timezone_name_is_plausible(name):
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError, ImportError, RecursionError):
        # What zoneinfo raises for unknown keys, files that are not TZif data, directories and
        # paths, and what the tzdata package lookup can raise; none may escape analyze.
        return False
    return True


def cron_issues(expression: str, subject: str, pointer: str, entity: str) -> list[Issue]:
    """The blocking issue when ``expression``, the field ``subject`` names, is not valid cron."""
    problem = cron_problem(expression)
    return blocking_for(problem, Code.INVALID_SCHEDULE, f"{subject} is not valid cron:", pointer, entity)


def check_automations(bundle: Bundle) -> list[Issue]:
    """Every automation's schedule and time zone."""
    issues: list[Issue] = []
    for index, automation in enumerate(bundle.automations):
        entity = f"automation:{automation.key}"
        subject = f"schedule of automation '{automation.key}'"
        where = join_pointer("/automations", index, "schedule")
        issues += cron_issues(automation.schedule, subject, where, entity)
        if not timezone_exists(automation.timezone):
            issues.append(
                blocking(
                    Code.INVALID_TIMEZONE,
                    f"timezone of automation '{automation.key}' is not an IANA time zone such as "
                    "Europe/Berlin or UTC",
                    join_pointer("/automations", index, "timezone"),
                    entity,
                )
            )
    return issues
