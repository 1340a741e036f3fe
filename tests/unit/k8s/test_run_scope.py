"""Which namespace scopes let the operator skip kopf's scanning (and so need no cluster-wide RBAC)."""

from __future__ import annotations

import argparse

import pytest

from bundle_operator.k8s.process.options import add_arguments, options_from
from bundle_operator.k8s.process.run import exact_namespaces


def options(*flags: str) -> bool:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return exact_namespaces(options_from(parser.parse_args(list(flags))))


@pytest.mark.parametrize(
    ("flags", "exact"),
    [
        (("--namespace", "agents"), True),
        (("--namespace", "agents", "--namespace", "agents-staging"), True),
        (("--all-namespaces",), False),
        (("--namespace", "team-*"), False),
        (("--namespace", "!kube-system"), False),
        (("--namespace", "a,b"), False),
        (("--namespace", "team-[ab]"), False),
        (("--namespace", "agents", "--namespace", "team-?"), False),
    ],
)
def test_only_named_namespaces_turn_scanning_off(flags: tuple[str, ...], exact: bool) -> None:
    assert options(*flags) is exact
