"""How often Endpoints are refreshed: the chart's operator.endpointRefreshSeconds arrives as an
environment variable, read once; a bad value stops the operator at start with the variable named."""

from __future__ import annotations

import argparse

import pytest

from bundle_operator.k8s.process.options import (
    ENV_ENDPOINT_REFRESH,
    add_arguments,
    endpoint_refresh_seconds,
    options_from,
)


def test_the_interval_is_thirty_seconds_unless_the_variable_sets_one() -> None:
    assert endpoint_refresh_seconds({}) == 30.0
    assert endpoint_refresh_seconds({ENV_ENDPOINT_REFRESH: " "}) == 30.0
    assert endpoint_refresh_seconds({ENV_ENDPOINT_REFRESH: "5"}) == 5.0
    assert endpoint_refresh_seconds({ENV_ENDPOINT_REFRESH: "3600"}) == 3600.0


@pytest.mark.parametrize("raw", ["0", "0.5", "3601", "soon", "nan", "inf"])
def test_a_value_out_of_range_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=f"{ENV_ENDPOINT_REFRESH} must be a number of seconds from 1"):
        endpoint_refresh_seconds({ENV_ENDPOINT_REFRESH: raw})


def test_the_operator_refuses_to_start_with_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--namespace", "team-a"])
    monkeypatch.setenv(ENV_ENDPOINT_REFRESH, "0")
    with pytest.raises(SystemExit, match=f"bundlectl operator run: {ENV_ENDPOINT_REFRESH} must be"):
        options_from(args)
    monkeypatch.setenv(ENV_ENDPOINT_REFRESH, "10")
    assert options_from(args).namespaces == ("team-a",)
