"""The official MCP conformance suite against our conformance member, directly and through a gateway.

    make conformance                      (= python scripts/conformance.py)
    python scripts/conformance.py --direct-only
    python scripts/conformance.py --scenario tools-call-with-progress --out tmp/conformance

Starts tests/conformance_member.py and a reference platform (its own database in a temporary
directory), serves the member through an ApiKey Endpoint whose gateway bundle has it as its one
member (tools presented by their own names), runs the suite's server scenarios
(`@modelcontextprotocol/conformance`, pinned and cached by `make conformance-tools`) against the
member and through the Endpoint, prints both summaries as the suite printed them and the
per-scenario table, and writes everything under --out. Exit status 1 when a scenario passes
directly and not through the gateway, other than those that fail by design (bare prompt names).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "operator"))

from tests.conformance import run  # noqa: E402

from bundle_operator.platform.client import PlatformClient  # noqa: E402
from bundle_operator.reference_platform.process import start_platform  # noqa: E402

TOKEN = "conformance-token-not-secret"


async def compare(out: Path, scenario: str | None, direct_only: bool) -> int:
    started = time.monotonic()
    async with run.member_process() as member_url:
        direct = await run.run_suite(member_url, out / "direct", scenario=scenario)
        print(f"--- direct: {member_url} ({direct.seconds:.1f}s)\n{direct.summary}\n", flush=True)
        if direct_only:
            return 0 if all(o.ok for o in direct.outcomes.values()) else 1
        platform = start_platform(out / "platform.db", "--token", TOKEN, log=out / "platform.log")
        try:
            async with (
                PlatformClient(platform.url, token=TOKEN, timeout=10.0) as api,
                run.served_gateway(api, member_url) as (_, endpoint_url, key),
                run.key_relay(endpoint_url, key) as relayed,
            ):
                gateway = await run.run_suite(relayed, out / "gateway", scenario=scenario)
        finally:
            platform.stop()
    print(f"--- gateway: {endpoint_url} ({gateway.seconds:.1f}s)\n{gateway.summary}\n")
    text = run.table(direct.outcomes, gateway.outcomes)
    (out / "table.txt").write_text(text + "\n")
    print(text)
    regressions = run.gateway_regressions(direct.outcomes, gateway.outcomes)
    print(f"\n{time.monotonic() - started:.1f}s in all; results under {out}")
    if regressions:
        print("passing directly, failing through the gateway: " + ", ".join(regressions))
        return 1
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="results directory (default: a fresh temporary one)")
    parser.add_argument("--scenario", help="run only this scenario")
    parser.add_argument("--direct-only", action="store_true", help="only against the member itself")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    sys.exit(asyncio.run(compare(out.resolve(), args.scenario, args.direct_only)))


if __name__ == "__main__":
    main()
