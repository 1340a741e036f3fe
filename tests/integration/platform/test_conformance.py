"""The official MCP conformance suite: our member passes it, and the gateway passes it as the member does.

`@modelcontextprotocol/conformance` 0.1.16 (from npm, cached with a Node >= 22 by `make
conformance-tools`: tests/conformance/build.py) runs its 32 server scenarios (`--suite all`)
against tests/conformance_member.py directly, then through an ApiKey Endpoint of the reference
platform whose gateway bundle has that member as its only member (tools presented by their own
names), over real HTTP; tests/conformance/run.py has the pieces. The per-scenario table (direct vs
gateway) is printed (`-s`) and written to `conformance-table.txt` in the test's tmp dir.
`make conformance` (scripts/conformance.py) prints the same comparison outside pytest.
Both runs take about 10 s together; each is bounded at 75 s (run.SUITE_TIMEOUT_SECONDS).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from platform_harness import TOKEN, start_platform

from bundle_operator.platform.client import PlatformClient

# This folder is on sys.path as itself (no __init__.py); the pieces live in the tests package.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.conformance import run

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

# MERGE DECISION (issue 40, item 5): the gateway's relay (progress, logging, sampling, elicitation,
# templates, subscriptions, Origin/Host checks: items 1-3) is being built in other branches. Until it
# lands, the gateway test is an expected failure; once it passes, drop this mark (it shows XPASS).
GATEWAY_RELAY_LANDED = False


@dataclass
class Runs:
    direct: run.SuiteRun
    gateway: run.SuiteRun | None
    gateway_error: BaseException | None
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
        except Exception as error:  # reported by the gateway test; the direct one stands alone
            return Runs(direct, None, error, out)
        finally:
            platform.stop()
    return Runs(direct, gateway, None, out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """One direct run and one gateway run of the whole suite, shared by the tests of this module."""
    return asyncio.run(_both(tmp_path_factory.mktemp("conformance")))


def _report(runs: Runs, tmp_path: Path) -> str:
    gateway = runs.gateway.outcomes if runs.gateway is not None else {}
    text = run.table(runs.direct.outcomes, gateway)
    seconds = runs.direct.seconds + (runs.gateway.seconds if runs.gateway is not None else 0.0)
    text += f"\n(suite time: {seconds:.1f}s; raw results under {runs.out})"
    (tmp_path / "conformance-table.txt").write_text(text + "\n")
    print("\n" + text)
    return text


def test_the_member_passes_every_server_scenario_directly(runs: Runs, tmp_path: Path) -> None:
    _report(runs, tmp_path)
    assert len(runs.direct.outcomes) == 32, runs.direct.summary
    failed = [name for name, outcome in runs.direct.outcomes.items() if not outcome.ok]
    assert not failed, f"failing directly: {failed}\n{runs.direct.summary}"


@pytest.mark.xfail(
    not GATEWAY_RELAY_LANDED,
    reason="issue 40 items 1-3 (the gateway relay) not merged yet: see GATEWAY_RELAY_LANDED",
    strict=False,
)
def test_through_the_gateway_every_scenario_passes_that_passes_directly(runs: Runs, tmp_path: Path) -> None:
    """Other than the scenarios that ask for member prompts by bare name (run.BY_DESIGN)."""
    text = _report(runs, tmp_path)
    if runs.gateway_error is not None:
        raise runs.gateway_error
    assert runs.gateway is not None
    regressions = run.gateway_regressions(runs.direct.outcomes, runs.gateway.outcomes)
    assert not regressions, f"passing directly, failing through the gateway: {regressions}\n{text}"
