"""Log lines as a log pipeline sees them: one JSON object per line, naming the Kubernetes object the
way kopf's object loggers describe it, and secrets masked wherever they slipped in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any, cast

import kopf
import pytest
from kopf._core.actions.loggers import LocalObjectLogger

from bundle_operator.k8s.logs import REDACTOR, configure_logging, object_extra

BODY: dict[str, Any] = {
    "apiVersion": "bundle-operator.dev/v1alpha1",
    "kind": "BundleInstallation",
    "metadata": {"namespace": "team-a", "name": "helper", "uid": "6f1c0e4a-0000-4000-8000-000000000001"},
}


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    watched = [logging.getLogger(name) for name in ("kopf.objects", "asyncio")]
    saved_loggers = [(lg, list(lg.handlers), list(lg.filters), lg.propagate) for lg in watched]
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    for lg, handlers, filters, propagate in saved_loggers:
        lg.handlers[:], lg.filters[:], lg.propagate = handlers, filters, propagate
    REDACTOR.clear()


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.strip()]


def object_logger() -> LocalObjectLogger:
    return LocalObjectLogger(body=kopf.Body(cast(kopf.RawBody, BODY)), settings=kopf.OperatorSettings())


def test_kopf_object_logger_lines_name_the_object(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO")
    object_logger().info("reconciled: 3 entities up to date")

    (line,) = lines(capsys)
    assert line["message"] == "reconciled: 3 entities up to date"
    assert line["level"] == "INFO"
    assert line["logger"] == "kopf.objects"
    assert (line["kind"], line["namespace"], line["name"], line["uid"]) == (
        "BundleInstallation",
        "team-a",
        "helper",
        "6f1c0e4a-0000-4000-8000-000000000001",
    )
    assert line["time"].endswith("Z")
    assert datetime.fromisoformat(line["time"]).utcoffset() is not None


def test_own_loggers_name_the_object_through_extras(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("DEBUG")
    log = logging.getLogger("bundle_operator.k8s.test")
    log.debug("fetched source", extra=object_extra("Bundle", "team-b", "tools", "uid-2"))
    log.warning(
        "setup value missing",
        extra={"kind": "Bundle", "namespace": "team-c", "resource_name": "x", "uid": "u3"},
    )
    log.info("starting up\nwith two lines")

    first, second, third = lines(capsys)
    assert (first["level"], first["kind"], first["namespace"], first["name"], first["uid"]) == (
        "DEBUG",
        "Bundle",
        "team-b",
        "tools",
        "uid-2",
    )
    assert (second["namespace"], second["name"], second["uid"]) == ("team-c", "x", "u3")
    assert third["message"] == "starting up\nwith two lines"  # one JSON line, newline escaped
    assert "kind" not in third and "name" not in third


def test_exceptions_give_type_and_message_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()
    try:
        raise ValueError("spec.source.inline is not a bundle document")
    except ValueError:
        object_logger().exception("reconcile failed")

    output = capsys.readouterr().err
    assert len(output.splitlines()) == 1
    line = json.loads(output)
    assert line["exc_type"] == "ValueError: spec.source.inline is not a bundle document"
    assert "Traceback" not in output
    assert line["level"] == "ERROR"


def test_level_filters_lower_records(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("WARNING")
    logging.getLogger("bundle_operator").info("quiet")
    logging.getLogger("bundle_operator").warning("loud")
    assert [line["message"] for line in lines(capsys)] == ["loud"]
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging("CHATTY")


def test_no_duplicate_lines_after_kopf_configure_or_a_second_call(capsys: pytest.CaptureFixture[str]) -> None:
    kopf.configure(verbose=True)  # what `kopf run` does: a root handler of kopf's own
    configure_logging()
    configure_logging()
    logging.getLogger("bundle_operator").info("once")
    output = capsys.readouterr().err
    assert output.count("once") == 1
    assert json.loads(output)["message"] == "once"


def test_plain_text_mode(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=False)
    object_logger().warning("drift found")
    output = capsys.readouterr().err
    assert "[team-a/helper] drift found" in output
    assert not output.startswith("{")


def test_registered_secrets_are_masked_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()
    REDACTOR.add("tok_live_8f3a9c")
    REDACTOR.add('pa"ss\\word-1\n')  # read from a file: quote, backslash, trailing newline
    REDACTOR.add("abc")  # too short to mask safely: ignored
    log = logging.getLogger("bundle_operator.k8s.test")

    log.info("calling with token %s", "tok_live_8f3a9c")
    log.info('password is pa"ss\\word-1 and abc stays')
    try:
        raise RuntimeError("auth failed for tok_live_8f3a9c")
    except RuntimeError:
        log.exception("platform call failed")

    output = capsys.readouterr().err
    assert "tok_live_8f3a9c" not in output
    assert 'pa\\"ss' not in output and "word-1" not in output
    first, second, third = (json.loads(line) for line in output.splitlines())
    assert first["message"] == "calling with token ***"
    assert second["message"] == "password is *** and abc stays"
    assert third["exc_type"] == "RuntimeError: auth failed for ***"


def test_secrets_are_masked_before_kopf_turns_messages_into_events() -> None:
    configure_logging()
    REDACTOR.add("tok_live_8f3a9c")
    seen: list[str] = []

    class EventPoster(logging.Handler):  # stands in for kopf's K8sPoster on kopf.objects
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    poster = EventPoster()
    logging.getLogger("kopf.objects").addHandler(poster)
    object_logger().info("issued key tok_live_8f3a9c")
    assert seen == ["issued key ***"]
