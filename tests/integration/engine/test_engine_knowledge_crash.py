"""A knowledge-set install killed between the set's create and its sources resumes whole: the same
set, every source, no second set; with other inputs it rolls back to nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle_operator.engine.plan import Options
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from tests.integration.engine.harness import (
    Store,
    crashed_record,
    example,
    install,
    plan_and_apply,
    workspace_state,
)
from tests.integration.engine.harness import crash_install as crash_example
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
MAPPED = Options(substitutions={"knowledge_source:s3:acme-bylaws": "s3:dormagen-bylaws"})


def crash_install(platform: PlatformProcess, ws: str, state: Path, crash_at: str) -> int:
    """Install the building-office example in a process that dies at ``crash_at`` (see harness)."""
    return crash_example(platform, ws, state, crash_at, "building-office", MAPPED)


async def owned_exactly(client: PlatformClient, ws: str, record: Record) -> dict[str, list[str]]:
    """The workspace holds what the record owns and, besides, only the sources' stored credentials."""
    state = await workspace_state(client, ws)
    owned = {part.id for recorded in record.entities for part in recorded.parts}
    assert {i for path, ids in state.items() if path != "secrets" for i in ids} == owned
    return state


# Creates: MCP server (c1), instance (c2), the set (c3), then its two sources (s1, s2).
@pytest.mark.parametrize("crash_at", ["c3", "s1", "s2"])
async def test_resume_after_a_crash_around_the_sources(
    client: PlatformClient, engine_platform: PlatformProcess, tmp_path: Path, ws: str, crash_at: str
) -> None:
    record = crashed_record(engine_platform, ws, tmp_path / "state.json", crash_at, "building-office", MAPPED)
    parsed, setup = example("building-office")
    result = await plan_and_apply(client, ws, parsed, setup, record, Store(record).persist, MAPPED)
    assert not result.preview.blocking and record.journal == []
    workspace = await owned_exactly(client, ws, record)
    assert len(workspace[kinds.KNOWLEDGE_SETS.path]) == 1
    [knowledge_set] = await client.list_all(ws, kinds.KNOWLEDGE_SETS)
    assert sorted(s.key or "" for s in knowledge_set.sources) == ["s3-1", "statutes-1"]
    # Two credentials of one source, stored once each: the replayed put replaced, not added.
    assert len(workspace["secrets"]) == 2


async def test_other_inputs_after_a_crash_between_the_sources_roll_the_set_back(
    client: PlatformClient, engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    record = crashed_record(engine_platform, ws, tmp_path / "state.json", "s1", "building-office", MAPPED)
    parsed, setup = example("building-office")
    other = Options(substitutions={"knowledge_source:s3:acme-bylaws": "s3:zons-bylaws"})
    result, _ = await install(client, ws, parsed, setup, record, other)
    assert len(result.created) == 4
    await owned_exactly(client, ws, record)
    [knowledge_set] = await client.list_all(ws, kinds.KNOWLEDGE_SETS)
    assert {s.key: s.bucket for s in knowledge_set.sources}["s3-1"] == "zons-bylaws"
