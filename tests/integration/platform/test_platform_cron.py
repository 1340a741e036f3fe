"""The reference platform's cron schedules: when a trigger next runs."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bundle_operator.reference_platform.cron import CronError, next_run, parse_cron

pytestmark = pytest.mark.integration

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("*/15 * * * *", "2026-03-02T10:07:30", "2026-03-02T10:15:00"),
        ("0 9 * * MON-FRI", "2026-03-06T09:00:00", "2026-03-09T09:00:00"),  # Friday 09:00 -> Monday
        ("0 0 1 JAN *", "2026-06-01T00:00:00", "2027-01-01T00:00:00"),
        ("0 12 13 * 5", "2026-03-01T00:00:00", "2026-03-06T12:00:00"),  # day 13 OR Friday: Friday first
        ("0 0 * * 7", "2026-03-02T00:00:00", "2026-03-08T00:00:00"),  # 7 is Sunday too
        ("0 0 29 2 *", "2026-03-01T00:00:00", "2028-02-29T00:00:00"),
    ],
)
def test_next_run_in_utc(schedule: str, after: str, expected: str) -> None:
    assert next_run(parse_cron(schedule), ZoneInfo("UTC"), at(after)) == at(expected)


def test_next_run_follows_the_time_zone_across_daylight_saving() -> None:
    daily = parse_cron("30 2 * * *")
    # 29 March 2026: Berlin skips 02:00-03:00; the run that day lands after the gap, in UTC terms.
    before_change = next_run(daily, BERLIN, at("2026-03-27T12:00:00"))
    assert before_change == at("2026-03-28T01:30:00")  # 02:30 CET
    after_change = next_run(daily, BERLIN, at("2026-03-29T12:00:00"))
    assert after_change == at("2026-03-30T00:30:00")  # 02:30 CEST


@pytest.mark.parametrize(
    "schedule", ["* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "5-1 * * * *", "*/x * * * *"]
)
def test_invalid_schedules_name_the_problem(schedule: str) -> None:
    with pytest.raises(CronError):
        parse_cron(schedule)


def test_a_schedule_that_never_fires_has_no_next_run() -> None:
    assert next_run(parse_cron("0 0 31 4 *"), ZoneInfo("UTC"), at("2026-01-01T00:00:00")) is None
