"""A run killed at any persisted step resumes with no orphan and no duplicate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundle_operator.engine.plan import Options
from bundle_operator.engine.record import Record
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
TRIAGE = Options(substitutions={"model:gpt-4.1": "gpt-5"})


def crash_install(platform: PlatformProcess, ws: str, state: Path, crash_at: str) -> int:
    """Install the github-triage example in a process that dies at ``crash_at`` (see harness)."""
    return crash_example(platform, ws, state, crash_at, "github-triage", TRIAGE)


async def assert_owned_exactly(client: PlatformClient, ws: str, record: Record) -> dict[str, list[str]]:
    """No orphan and no duplicate: the workspace holds exactly what the record owns, plus the one
    secret the platform keeps for the channel's bot token."""
    state = await workspace_state(client, ws)
    owned = {part.id for recorded in record.entities for part in recorded.parts}
    everything = {i for path, ids in state.items() if path != "secrets" for i in ids}
    assert everything == {i for i in owned if not i.startswith("sec_")}
    ours = {i for i in owned if i.startswith("sec_")}
    assert ours <= set(state["secrets"])
    assert len(state["secrets"]) == len(ours) + len(state["channels"])
    return state


async def test_a_complete_run_persists_a_known_number_of_times(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    assert crash_install(engine_platform, ws, tmp_path / "state.json", "never") == 0
    assert Record.model_validate_json((tmp_path / "state.json").read_text()).journal == []


# The example's install persists its record twice (the run's start with every create journaled
# ahead, and its end) and makes 10 creates: a crash after each of them.
@pytest.mark.parametrize("crash_at", ["p1", *(f"c{n}" for n in range(1, 11)), "p2"])
async def test_resume_after_a_crash_at_each_step(
    client: PlatformClient, engine_platform: PlatformProcess, tmp_path: Path, ws: str, crash_at: str
) -> None:
    record = crashed_record(engine_platform, ws, tmp_path / "state.json", crash_at, "github-triage", TRIAGE)
    parsed, setup = example("github-triage")
    store = Store(record)

    result = await plan_and_apply(client, ws, parsed, setup, record, store.persist, TRIAGE)
    assert not result.preview.blocking
    assert record.journal == []
    state_now = await assert_owned_exactly(client, ws, record)
    assert len(state_now["agents"]) == 1 and len(state_now["mcp-instances"]) == 1
    assert len(state_now["policies"]) == 2 and len(state_now["triggers"]) == 1
    assert json.loads(record.model_dump_json())["entities"]


@pytest.mark.parametrize("crash_at", ["c1", "c4", "c9"])
async def test_a_create_whose_id_never_reached_the_disk_is_found_by_its_key(
    client: PlatformClient, engine_platform: PlatformProcess, tmp_path: Path, ws: str, crash_at: str
) -> None:
    record = crashed_record(engine_platform, ws, tmp_path / "state.json", crash_at, "github-triage", TRIAGE)
    # Every create was journaled ahead; the ones that landed are known to the platform only.
    assert len(record.journal) == 10 and all(e.state == "pending" for e in record.journal)
    parsed, setup = example("github-triage")
    # Other inputs: the interrupted run cannot be replayed, only rolled back.
    result, _ = await install(client, ws, parsed, {**setup, "org": "another-org"}, record, TRIAGE)
    assert len(result.created) == 8
    await assert_owned_exactly(client, ws, record)


async def test_resume_with_other_inputs_rolls_the_interrupted_run_back(
    client: PlatformClient, engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    record = crashed_record(engine_platform, ws, tmp_path / "state.json", "c6", "github-triage", TRIAGE)
    parsed, setup = example("github-triage")
    result, _ = await install(client, ws, parsed, {**setup, "org": "another-org"}, record, TRIAGE)
    assert len(result.created) == 8
    await assert_owned_exactly(client, ws, record)


@pytest.mark.parametrize("fail_at", [1, 2])
async def test_a_record_that_cannot_be_stored_stops_the_run_and_the_next_one_resumes(
    client: PlatformClient, ws: str, fail_at: int
) -> None:
    from bundle_operator.engine.apply import PersistFailed

    parsed, setup = example("github-triage")
    stored: list[str] = []

    async def persist(record: Record) -> None:
        if len(stored) + 1 == fail_at:
            raise RuntimeError("the API server is restarting")
        stored.append(record.model_dump_json())

    record = Record(installation="test/persist", workspace=ws)
    with pytest.raises(PersistFailed, match="restarting"):
        await plan_and_apply(client, ws, parsed, setup, record, persist, TRIAGE)
    # Nothing was rolled back: what the run created stays for the next run to find by its keys (a
    # rollback would delete entities and then fail to record that too).
    created_before = sum(len(ids) for ids in (await workspace_state(client, ws)).values())
    assert created_before == (0 if fail_at == 1 else 11)  # 10 creates + the channel's token secret
    resumed = Record.model_validate_json(stored[-1]) if stored else Record(installation="x", workspace=ws)
    store = Store(resumed)
    result = await plan_and_apply(client, ws, parsed, setup, resumed, store.persist, TRIAGE)
    assert not result.preview.blocking and resumed.journal == []
    await assert_owned_exactly(client, ws, resumed)
