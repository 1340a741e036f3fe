"""What the handlers keep per object goes when the object does: a cluster that creates and deletes
installations all day must not grow the operator by a lock and two timestamps each time."""

from __future__ import annotations

import asyncio

from bundle_operator.k8s.envelope import Envelope


def runtime() -> Envelope:
    return Envelope()


def test_a_deleted_objects_lock_and_times_are_forgotten() -> None:
    rt = runtime()
    rt.lock("gone")
    rt.last_run["gone"], rt.failed_at["gone"] = 1.0, 2.0
    rt.lock("kept")
    rt.forget("gone")
    assert "gone" not in rt.locks and "gone" not in rt.last_run and "gone" not in rt.failed_at
    assert "kept" in rt.locks


def test_a_lock_a_run_still_holds_is_kept_so_no_second_run_gets_another() -> None:
    rt = runtime()
    held = rt.lock("busy")

    async def run() -> None:
        async with held:
            rt.forget("busy")
            assert rt.lock("busy") is held

    asyncio.run(run())
