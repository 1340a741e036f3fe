"""bundlectl plan / install / diff / drift / uninstall / export against the reference platform."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentUpdate
from tests.integration.engine.conftest import TOKEN
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[3]
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
TRIAGE = str(ROOT / "examples" / "github-triage.yaml")
TRIAGE_SETUP = str(ROOT / "examples" / "setup" / "github-triage.yaml")


def bundlectl(platform: PlatformProcess, tmp_path: Path, ws: str, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "BUNDLE_PLATFORM_URL": platform.url, "BUNDLE_PLATFORM_TOKEN": TOKEN}
    done = subprocess.run(
        [BUNDLECTL, *args, "--workspace", ws],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def triage(*extra: str) -> list[str]:
    return [TRIAGE, "--setup-file", TRIAGE_SETUP, "--substitute", "model:gpt-4.1=gpt-5", *extra]


def test_plan_install_twice_diff_drift_uninstall(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    code, out, err = bundlectl(engine_platform, tmp_path, ws, "plan", *triage("-o", "json"))
    assert code == 0, err
    planned = json.loads(out)
    assert {e["action"] for e in planned["entities"]} == {"CREATE"}
    assert set(planned) == {"bundle", "entities", "issues", "blocking"}

    code, out, err = bundlectl(engine_platform, tmp_path, ws, "install", *triage("-o", "json"))
    assert code == 0, err
    installed = json.loads(out)
    assert all(e["id"] for e in installed["entities"])
    assert (installed["code"], installed["failure"]) == (None, None)  # the keys are there on success
    state = tmp_path / ".bundlectl" / ws / "github-triage.json"
    assert state.exists()
    assert "EXAMPLE-ONLY" not in state.read_text()  # the state file holds no secret value

    code, out, _ = bundlectl(engine_platform, tmp_path, ws, "install", *triage("-o", "json"))
    assert code == 0
    assert {e["action"] for e in json.loads(out)["entities"]} == {"REUSE"}

    code, out, _ = bundlectl(engine_platform, tmp_path, ws, "diff", *triage())
    assert code == 0 and "No changes" in out

    code, out, _ = bundlectl(
        engine_platform, tmp_path, ws, "drift", "--bundle", "github-triage", "-o", "json"
    )
    assert code == 0 and json.loads(out)["drifted"] is False

    agent_id = next(e["id"] for e in installed["entities"] if e["kind"] == "agent")

    async def edit() -> None:
        async with PlatformClient(engine_platform.url, token=TOKEN) as client:
            agent = await client.get(ws, kinds.AGENTS, agent_id)
            await client.update(
                ws, kinds.AGENTS, agent_id, AgentUpdate(model="gpt-local"), revision=agent.revision
            )

    import asyncio

    asyncio.run(edit())
    code, out, _ = bundlectl(
        engine_platform, tmp_path, ws, "drift", "--bundle", "github-triage", "-o", "json"
    )
    assert code == 1
    assert json.loads(out)["entities"] == [{"entity": "agent:triage_bot", "paths": ["/model"]}]

    code, out, _ = bundlectl(
        engine_platform, tmp_path, ws, "uninstall", "--bundle", "github-triage", "-o", "json"
    )
    assert code == 0
    result = json.loads(out)
    assert [k["entity"] for k in result["kept"]] == [
        "agent:triage_bot",
        "skill:release_notes",
        "skill:triage",
        "mcp:github",
    ]
    assert "policy:spend_cap" in result["deleted"]


def test_analyze_with_platform_flags_and_usage_errors(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    code, out, _ = bundlectl(
        engine_platform, tmp_path, ws, "analyze", *triage("--platform", engine_platform.url, "-o", "json")
    )
    assert code == 0
    assert json.loads(out)["blocking"] is False
    code, out, _ = bundlectl(
        engine_platform, tmp_path, ws, "plan", TRIAGE, "--setup-file", TRIAGE_SETUP, "-o", "json"
    )
    assert code == 1  # the model requirement wants a substitution
    assert "substitution_required" in out
    code, _, err = bundlectl(engine_platform, tmp_path, ws, "plan", *triage("--substitute", "nonsense"))
    assert code == 2 and "KIND:REF=VALUE" in err
    code, _, err = bundlectl(engine_platform, tmp_path, ws, "drift")
    assert code == 2


def test_install_failure_is_rolled_back_and_reported(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    import asyncio

    from tests.integration.engine.harness import arm_fault, clear_faults

    async def arm() -> None:
        async with PlatformClient(engine_platform.url, token=TOKEN) as client:
            await arm_fault(client, method="POST", path=f"/v1/workspaces/{ws}/policies", times=1, status=422)

    async def clear() -> None:
        async with PlatformClient(engine_platform.url, token=TOKEN) as client:
            await clear_faults(client)

    asyncio.run(arm())
    try:
        code, out, _ = bundlectl(engine_platform, tmp_path, ws, "install", *triage("-o", "json"))
    finally:
        asyncio.run(clear())
    assert code == 1
    report = json.loads(out)
    # The platform refused the policy (422): the bundle is invalid for it, not a failed step.
    assert [i["code"] for i in report["issues"] if i["severity"] == "blocking"] == ["install_refused"]
    assert report["code"] == "bundle_invalid" and report["failure"]["entity"].startswith("policy:")
    assert {e["action"] for e in report["entities"]} == {"CREATE"}  # nothing is left to reuse
