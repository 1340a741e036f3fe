"""Install against the reference platform: dependency order, reuse, disabled triggers."""

from __future__ import annotations

import pytest

from bundle_operator.engine.plan import Options
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from tests.integration.engine.harness import TRIAGE_ENTITIES, example, install, workspace_state

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
TRIAGE = Options(substitutions={"model:gpt-4.1": "gpt-5"})


async def test_install_creates_everything_and_second_install_reuses(client: PlatformClient, ws: str) -> None:
    parsed, setup = example("github-triage")
    result, record = await install(client, ws, parsed, setup, options=TRIAGE)
    assert result.preview.blocking is False
    assert sorted(result.created) == sorted(TRIAGE_ENTITIES)
    state = await workspace_state(client, ws)
    assert len(state["agents"]) == 1 and len(state["triggers"]) == 1
    trigger = (await client.list_all(ws, kinds.TRIGGERS))[0]
    assert trigger.name == "github-triage:morning_digest"
    assert trigger.enabled is False
    again, _ = await install(client, ws, parsed, setup, record, TRIAGE)
    assert again.created == []
    assert sorted(again.reused) == sorted(result.created)
    assert await workspace_state(client, ws) == state
