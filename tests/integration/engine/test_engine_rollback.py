"""All-or-nothing: a failure at any create step leaves the workspace exactly as it was."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bundle_operator.engine.apply import InstallFailed
from bundle_operator.engine.plan import Options
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Refused
from bundle_operator.platform.models import AgentCreate
from tests.integration.engine.harness import arm_fault, clear_faults, example, install, workspace_state

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
TRIAGE = Options(substitutions={"model:gpt-4.1": "gpt-5"})
CREATES_IN_TRIAGE = 10  # 1 secret, server, instance, 2 skills, agent, channel, trigger, 2 policies


@pytest.fixture
async def faults(client: PlatformClient) -> AsyncIterator[None]:
    yield
    await clear_faults(client)


async def seed_foreign_entities(client: PlatformClient, ws: str) -> None:
    """Someone else's agent, named like the bundle's: never touched, never reused."""
    await client.create(
        ws, kinds.AGENTS, AgentCreate(name="Triage Bot", model="gpt-5"), idempotency_key="foreign-1"
    )


async def count_posts(client: PlatformClient, ws: str) -> int:
    parsed, setup = example("github-triage")
    fault = await arm_fault(
        client, method="POST", path=f"/v1/workspaces/{ws}/*", after=1000, times=1, status=500
    )
    await install(client, ws, parsed, setup, options=TRIAGE)
    faults = (await client.request("GET", "/_admin/faults", safe=True)).json()["items"]
    return int(next(f for f in faults if f["id"] == fault)["matched"])


async def test_the_example_makes_the_expected_number_of_creates(
    client: PlatformClient, ws: str, faults: None
) -> None:
    assert await count_posts(client, ws) == CREATES_IN_TRIAGE


@pytest.mark.parametrize("step", range(CREATES_IN_TRIAGE))
@pytest.mark.parametrize("when", ["before", "after"])
async def test_failure_at_each_create_step_leaves_nothing_behind(
    client: PlatformClient, ws: str, faults: None, step: int, when: str
) -> None:
    await seed_foreign_entities(client, ws)
    before = await workspace_state(client, ws)
    parsed, setup = example("github-triage")
    # 422 is never retried; with when=after the platform did create the entity, then answered 422.
    await arm_fault(
        client, method="POST", path=f"/v1/workspaces/{ws}/*", after=step, times=1, status=422, when=when
    )
    record = Record(installation="test/inst", workspace=ws)
    with pytest.raises(InstallFailed) as failed:
        await install(client, ws, parsed, setup, record, TRIAGE)
    assert isinstance(failed.value.cause, Refused)  # the original error is what the caller sees
    assert failed.value.rollback_failures == []
    assert await workspace_state(client, ws) == before
    assert record.entities == [] and record.journal == []
    # A retry afterwards creates everything fresh.
    await clear_faults(client)
    result, _ = await install(client, ws, parsed, setup, record, TRIAGE)
    assert len(result.created) == 8


async def test_a_failing_delete_during_rollback_is_reported_and_the_rest_still_go(
    client: PlatformClient, ws: str, faults: None
) -> None:
    before = await workspace_state(client, ws)
    parsed, setup = example("github-triage")
    await arm_fault(client, method="POST", path=f"/v1/workspaces/{ws}/policies", after=1, times=1, status=422)
    await arm_fault(client, method="DELETE", path=f"/v1/workspaces/{ws}/skills/*", times=100, status=500)
    with pytest.raises(InstallFailed) as failed:
        await install(client, ws, parsed, setup, options=TRIAGE)
    assert isinstance(failed.value.cause, Refused)
    assert len(failed.value.rollback_failures) == 2  # both skills stayed
    after = await workspace_state(client, ws)
    assert len(after["skills"]) == 2
    assert {k: v for k, v in after.items() if k != "skills"} == {
        k: v for k, v in before.items() if k != "skills"
    }


async def test_a_transient_delete_failure_is_retried(client: PlatformClient, ws: str, faults: None) -> None:
    before = await workspace_state(client, ws)
    parsed, setup = example("github-triage")
    await arm_fault(client, method="POST", path=f"/v1/workspaces/{ws}/policies", after=1, times=1, status=422)
    await arm_fault(client, method="DELETE", path=f"/v1/workspaces/{ws}/*/*", times=1, status=503)
    with pytest.raises(InstallFailed):
        await install(client, ws, parsed, setup, options=TRIAGE)
    assert await workspace_state(client, ws) == before


async def test_a_create_that_cannot_be_confirmed_during_rollback_is_found_and_deleted_by_the_next_run(
    client: PlatformClient, ws: str, faults: None
) -> None:
    parsed, setup = example("github-triage")
    # The agent is created but every answer is lost, and the platform cannot say what a key made.
    await arm_fault(
        client, method="POST", path=f"/v1/workspaces/{ws}/agents", times=1000, status=503, when="after"
    )
    await arm_fault(
        client, method="GET", path=f"/v1/workspaces/{ws}/idempotency-keys/*", times=1000, status=503
    )
    record = Record(installation="test/inst", workspace=ws)
    with pytest.raises(InstallFailed):
        await install(client, ws, parsed, setup, record, TRIAGE)
    assert len((await workspace_state(client, ws))["agents"]) == 1  # landed, unconfirmed
    assert [e.entity for e in record.unresolved] == ["agent:triage_bot"]

    await clear_faults(client)
    result, _ = await install(client, ws, parsed, setup, record, TRIAGE)
    assert "agent:triage_bot" in result.created
    assert len((await workspace_state(client, ws))["agents"]) == 1  # the orphan went, one agent is left
    assert record.unresolved == []
