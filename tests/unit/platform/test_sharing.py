"""Shared lists: one list per workspace and collection serves every installation that may use it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bundle_operator.platform.gate import CALLER
from bundle_operator.platform.sharing import READ_POLICY, ReadPolicy, SharedReads
from tests.unit.platform.conftest import Clock

pytestmark = pytest.mark.anyio


@contextmanager
def as_caller(owner: str, not_before: float | None) -> Iterator[None]:
    caller = CALLER.set(owner)
    policy = READ_POLICY.set(None if not_before is None else ReadPolicy(not_before))
    try:
        yield
    finally:
        READ_POLICY.reset(policy)
        CALLER.reset(caller)


class Platform:
    """Counts the lists it is asked for; each answer names the list's number."""

    def __init__(self, delay: float = 0.0) -> None:
        self.lists = 0
        self.delay = delay
        self.fail = False

    async def list(self) -> list[int]:
        self.lists += 1
        number = self.lists
        await asyncio.sleep(self.delay)
        if self.fail:
            raise ConnectionError("down")
        return [number]


async def read(
    shared: SharedReads, platform: Platform, owner: str, not_before: float | None, ws: str = "w"
) -> list[int]:
    with as_caller(owner, not_before):
        got: list[int] = await shared.read(ws, "agents", None, platform.list)
        return got


async def test_installations_of_one_workspace_share_one_list_in_flight() -> None:
    clock = Clock(100.0)
    shared, platform = SharedReads(clock), Platform(delay=0.01)
    results = await asyncio.gather(*(read(shared, platform, f"inst-{i}", 90.0) for i in range(100)))
    assert platform.lists == 1
    assert all(r == [1] for r in results)


async def test_a_finished_list_serves_later_callers_whose_policy_allows_it() -> None:
    clock = Clock(100.0)
    shared, platform = SharedReads(clock), Platform()
    assert await read(shared, platform, "a", 90.0) == [1]
    clock.now = 130.0
    assert await read(shared, platform, "b", 95.0) == [1]  # started at 100, allowed from 95
    assert await read(shared, platform, "c", 120.0) == [2]  # too old for this one: listed again
    assert await read(shared, platform, "a", 90.0) == [2]
    assert platform.lists == 2


async def test_a_caller_always_sees_its_own_writes() -> None:
    clock = Clock(100.0)
    shared, platform = SharedReads(clock), Platform()
    assert await read(shared, platform, "a", 0.0) == [1]
    clock.now = 101.0
    with as_caller("a", 0.0):
        shared.wrote("w")
    # "a" wrote after the list started: it needs a newer one; "b" did not and may share.
    assert await read(shared, platform, "b", 0.0) == [1]
    assert await read(shared, platform, "a", 0.0) == [2]
    assert await read(shared, platform, "a", 0.0) == [2]
    # A write to another workspace does not matter for this one.
    clock.now = 102.0
    shared.wrote("elsewhere", owner="a")
    assert await read(shared, platform, "a", 0.0) == [2]


async def test_workspaces_and_filters_are_listed_separately() -> None:
    shared, platform = SharedReads(Clock(100.0)), Platform()
    assert await read(shared, platform, "a", 0.0, ws="w1") == [1]
    assert await read(shared, platform, "a", 0.0, ws="w2") == [2]
    with as_caller("a", 0.0):
        assert await shared.read("w1", "agents", {"name": "x"}, platform.list) == [3]
        assert await shared.read("w1", "agents", {"name": "x"}, platform.list) == [3]
        assert await shared.read("w1", "agents", {"name": "y"}, platform.list) == [4]


async def test_a_failed_list_is_not_kept() -> None:
    shared, platform = SharedReads(Clock(100.0)), Platform(delay=0.01)
    platform.fail = True
    results = await asyncio.gather(
        *(read(shared, platform, f"i{i}", 0.0) for i in range(5)), return_exceptions=True
    )
    assert platform.lists == 1 and all(isinstance(r, ConnectionError) for r in results)
    platform.fail = False
    assert await read(shared, platform, "i0", 0.0) == [2]


async def test_without_a_policy_every_list_goes_to_the_platform() -> None:
    shared, platform = SharedReads(Clock(100.0)), Platform()
    assert await read(shared, platform, "a", None) == [1]
    assert await read(shared, platform, "a", None) == [2]
    assert await read(shared, platform, "", 0.0) == [3]  # no caller: not shared either


async def test_one_caller_giving_up_does_not_cancel_the_list_for_the_others() -> None:
    shared, platform = SharedReads(Clock(100.0)), Platform(delay=0.05)
    first = asyncio.ensure_future(read(shared, platform, "a", 0.0))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(read(shared, platform, "b", 0.0))
    await asyncio.sleep(0.01)
    first.cancel()
    assert await second == [1]
    assert platform.lists == 1


async def test_a_finished_list_is_let_go_once_its_interval_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kept for ever, the last list of every collection would hold the whole workspace in memory.
    monkeypatch.setattr("bundle_operator.platform.sharing.KEEP_FINISHED_SECONDS", 0.05)
    clock = Clock(100.0)
    shared, platform = SharedReads(clock), Platform()
    assert await read(shared, platform, "a", 90.0) == [1]
    assert await read(shared, platform, "b", 90.0) == [1]
    await asyncio.sleep(0.1)
    assert await read(shared, platform, "c", 90.0) == [2]
    assert platform.lists == 2
