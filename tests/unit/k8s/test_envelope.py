"""The one envelope every door runs an object's work in: its kind's bound, the object's lock, the
object as the platform gate's caller, and kopf's retries for a handler's failures."""

from __future__ import annotations

import asyncio

import kopf
import pytest

from bundle_operator.k8s.envelope import Envelope
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.reconcile import Retry
from bundle_operator.platform.gate import CALLER

META = {"uid": "u1", "namespace": "ns", "name": "one"}


def test_the_work_runs_as_its_object_and_a_run_is_remembered() -> None:
    envelope = Envelope()
    seen: list[str] = []

    async def work() -> ReconcileResult:
        seen.append(CALLER.get())
        return "success"

    assert asyncio.run(envelope.run("Endpoint", "u1", work)) == "success"
    assert seen == ["u1"] and CALLER.get() == ""
    assert "u1" in envelope.last_run


def test_work_that_found_nothing_to_do_is_not_a_run() -> None:
    envelope = Envelope()

    async def nothing() -> ReconcileResult | None:
        return None

    assert asyncio.run(envelope.run("Bundle", "u1", nothing)) is None
    assert "u1" not in envelope.last_run


def test_runs_of_one_kind_wait_for_a_slot() -> None:
    envelope = Envelope(workers=1)
    order: list[str] = []

    async def work(name: str) -> ReconcileResult:
        order.append(f"{name} in")
        await asyncio.sleep(0.01)
        order.append(f"{name} out")
        return "success"

    async def both() -> None:
        await asyncio.gather(
            envelope.run("Endpoint", "a", lambda: work("a")), envelope.run("Endpoint", "b", lambda: work("b"))
        )

    asyncio.run(both())
    assert order == ["a in", "a out", "b in", "b out"]


def test_a_handlers_retry_becomes_kopfs_with_its_delay() -> None:
    envelope = Envelope()

    async def passing() -> ReconcileResult:
        raise Retry("the platform is busy", 7.0)

    with pytest.raises(kopf.TemporaryError) as caught:
        asyncio.run(envelope.handled("Endpoint", META, 0, passing))
    assert caught.value.delay == 7.0
    assert "u1" in envelope.failed_at


def test_an_unknown_failure_is_retried_with_backoff_never_at_once() -> None:
    envelope = Envelope()

    async def broken() -> ReconcileResult:
        raise ValueError("bug")

    with pytest.raises(kopf.TemporaryError, match="unexpected ValueError") as caught:
        asyncio.run(envelope.handled("Endpoint", META, 3, broken))
    assert caught.value.delay is not None and caught.value.delay > 0
    assert "u1" not in envelope.failed_at


def test_background_runs_under_one_share_take_turns_with_a_reconcile_as_one_owner() -> None:
    """Fifty Endpoint refreshes at once under the refreshes' share, and one installation: the gate
    serves the two owners in turn, so the installation's calls are not queued behind fifty."""
    from bundle_operator.k8s.refreshes import ENDPOINT_REFRESHES
    from bundle_operator.platform.gate import OK, CallGate

    envelope = Envelope()
    gate = CallGate(limit=1)
    served: list[str] = []

    async def call(who: str) -> None:
        async with gate.slot() as report:
            served.append(who)
            await asyncio.sleep(0)
            report(OK)

    async def refresh() -> ReconcileResult:
        for _ in range(3):
            await call("refresh")
        return "success"

    async def install() -> ReconcileResult:
        for _ in range(3):
            await call("install")
        return "success"

    async def fleet() -> None:
        refreshes = [envelope.run("Endpoint", f"e{i}", refresh, share=ENDPOINT_REFRESHES) for i in range(50)]
        await asyncio.sleep(0)
        await asyncio.gather(*refreshes, envelope.run("BundleInstallation", "i1", install))

    asyncio.run(fleet())
    # Round-robin between two owners: the installation's three calls are done within its first
    # turns, long before the 150 refresh calls are.
    assert served.count("install") == 3
    assert max(i for i, who in enumerate(served) if who == "install") < 10
