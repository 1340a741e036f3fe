"""The official MCP conformance suite against our conformance member, directly.

`@modelcontextprotocol/conformance` 0.1.16 (from npm, cached with a Node >= 22 by `make
conformance-tools`: tests/conformance/build.py) runs its 32 server scenarios (`--suite all`)
against tests/conformance_member.py over real HTTP, bounded at 75 s (run.SUITE_TIMEOUT_SECONDS).
The same suite then runs through an ApiKey Endpoint of the reference platform whose gateway
bundle has that member as its one member (as `make conformance` does), and every scenario that
passes directly must pass through the gateway, other than the bare-name prompt ones
(run.BY_DESIGN): progress, logging, sampling, elicitation, templates and subscriptions included.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# This folder is on sys.path as itself (no __init__.py); the pieces live in the tests package.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.conformance import run

from bundle_operator.platform.client import PlatformClient
from bundle_operator.reference_platform.process import start_platform

TOKEN = "conformance-token-not-secret"

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


@dataclass
class Runs:
    direct: run.SuiteRun
    gateway: run.SuiteRun
    out: Path


async def _both(out: Path) -> Runs:
    async with run.member_process() as member_url:
        direct = await run.run_suite(member_url, out / "direct")
        platform = start_platform(out / "platform.db", "--token", TOKEN, log=out / "platform.log")
        try:
            async with (
                PlatformClient(platform.url, token=TOKEN, timeout=10.0) as api,
                run.served_gateway(api, member_url) as (_, endpoint_url, key),
                run.key_relay(endpoint_url, key) as relayed,
            ):
                gateway = await run.run_suite(relayed, out / "gateway")
        finally:
            platform.stop()
    return Runs(direct, gateway, out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """One run of the whole suite against the member, and one through the gateway."""
    return asyncio.run(_both(tmp_path_factory.mktemp("conformance")))


def _report(runs: Runs, tmp_path: Path) -> str:
    text = run.table(runs.direct.outcomes, runs.gateway.outcomes)
    seconds = f"{runs.direct.seconds:.1f}s + {runs.gateway.seconds:.1f}s"
    text += f"\n(suite time: {seconds}; raw results under {runs.out})"
    (tmp_path / "conformance-table.txt").write_text(text + "\n")
    print("\n" + text)
    return text


def test_the_member_passes_every_server_scenario_directly(runs: Runs, tmp_path: Path) -> None:
    _report(runs, tmp_path)
    assert len(runs.direct.outcomes) == 32, runs.direct.summary
    failed = [name for name, outcome in runs.direct.outcomes.items() if not outcome.ok]
    assert not failed, f"failing directly: {failed}\n{runs.direct.summary}"


def test_the_gateway_passes_every_scenario_the_member_passes(runs: Runs, tmp_path: Path) -> None:
    _report(runs, tmp_path)
    assert set(runs.gateway.outcomes) == set(runs.direct.outcomes), runs.gateway.summary
    regressions = run.gateway_regressions(runs.direct.outcomes, runs.gateway.outcomes)
    assert not regressions, f"passing directly, failing through the gateway: {regressions}"
    # The scenarios that relay a member's messages to the client, named so none passes vacuously.
    for relayed in (
        "tools-call-with-progress",
        "tools-call-with-logging",
        "logging-set-level",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "resources-templates-read",
        "resources-subscribe",
        "resources-unsubscribe",
    ):
        outcome = runs.gateway.outcomes[relayed]
        assert outcome.ok and outcome.passed > 0, f"{relayed}: {outcome}"
