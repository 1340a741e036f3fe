"""Cron automations: five-field schedules and time zones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.cli import main
from bundle_operator.document.schedule import cron_problem, timezone_exists
from tests.unit.document.builders import analyze, analyze_data, only_issue


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "0 8 * * 1-5",
        "*/15 9-17 * * MON-FRI",
        "0 0 1,15 jan,jul *",
        "30 4 * * 7",
        "0 0-23/2 * * *",
    ],
)
def test_valid_schedules(expression: str) -> None:
    assert cron_problem(expression) is None


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("* * * *", "five fields"),
        ("0 8 * * 1-5 2026", "five fields"),
        ("60 * * * *", "minute field"),
        ("0 24 * * *", "hour field"),
        ("0 0 0 * *", "day of month field"),
        ("0 0 * 13 *", "month field"),
        ("0 0 * * 8", "day of week field"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("@daily", "five fields"),
        ("? * * * *", "not a value"),
        ("9" * 5000 + " * * * *", "not a value"),
    ],
)
def test_invalid_schedules_say_which_field(expression: str, words: str) -> None:
    problem = cron_problem(expression)
    assert problem is not None and words in problem


def test_invalid_schedule_blocks_with_its_path(doc: dict[str, Any]) -> None:
    doc["automations"][0]["schedule"] = "every morning"
    issue = only_issue(analyze(doc), "invalid_schedule")
    assert (issue.path, issue.entity) == ("/automations/0/schedule", "automation:daily")


@pytest.mark.parametrize(
    ("zone", "ok"),
    [("Europe/Berlin", True), ("UTC", True), ("Mars/Olympus", False), ("../etc/passwd", False)],
)
def test_timezone_must_exist(doc: dict[str, Any], zone: str, ok: bool) -> None:
    doc["automations"][0]["timezone"] = zone
    preview = analyze(doc)
    assert (not [i for i in preview.issues if i.code == "invalid_timezone"]) == ok


def test_automations_and_channels_default_to_disabled(doc: dict[str, Any]) -> None:
    from bundle_operator.document import parse_bundle_data

    bundle = parse_bundle_data(doc).bundle
    assert bundle is not None
    assert bundle.automations[0].enabled is False
    assert bundle.channels[0].enabled is False
    assert bundle.automations[0].timezone == "UTC"


@pytest.mark.parametrize(
    "zone",
    [
        "/".join(["a"] * 400),  # zoneinfo would recurse through the import system (issue 15)
        "/".join(["Europe"] * 40),
        "a." * 300 + "b",
        "Europe/" + "B" * 5000,
        "Europe/Berlin\x00",
        "Europe\\Berlin",
        "Europe//Berlin",
        "Europe/Berlin/",
        ".",
        "Europe/.",
        "",
        " Asia/Tokyo",
        "tzdata/__init__.py",
        "America",  # a directory of zones, not a zone
    ],
)
def test_any_name_that_is_not_a_time_zone_is_an_issue_at_its_path(doc: dict[str, Any], zone: str) -> None:
    doc["automations"][0]["timezone"] = zone
    issue = only_issue(analyze_data(doc), "invalid_timezone")
    assert (issue.path, issue.entity) == ("/automations/0/timezone", "automation:daily")
    assert "timezone" in issue.message
    if len(zone) > 3:
        assert zone not in issue.message


@pytest.mark.parametrize("zone", ["America/Argentina/ComodRivadavia", "Etc/GMT+10", "EST5EDT", "Etc/GMT-14"])
def test_real_names_of_every_shape_are_time_zones(zone: str) -> None:
    assert timezone_exists(zone)


def test_deep_time_zone_does_not_crash_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any]
) -> None:
    doc["automations"][0]["timezone"] = "/".join(["a"] * 400)
    path = tmp_path / "bundle.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["analyze", str(path), "--setup", "github_token=t", "--setup", "bot_token=1:b", "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    paths = [i["path"] for i in report["issues"] if i["code"] == "invalid_timezone"]
    assert paths == ["/automations/0/timezone"]
