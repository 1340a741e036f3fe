"""bundlectl list: a workspace's installations from the state files, with drift from the platform."""

from __future__ import annotations

import asyncio
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
OTHER = """
schema_version: "0.1.0"
name: small-kit
version: 2.0.0
mcps:
  - {key: docs, name: Docs, type: url, endpoint_url: "https://docs.example.com/mcp"}
"""


def run(tmp_path: Path, ws: str, *args: str, platform: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_PLATFORM_URL"}
    if platform is not None:
        env |= {"BUNDLE_PLATFORM_URL": platform, "BUNDLE_PLATFORM_TOKEN": TOKEN}
    return subprocess.run(
        [BUNDLECTL, *args, "--workspace", ws],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )


def test_list_shows_every_installation_with_version_digest_entities_and_drift(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str
) -> None:
    url = engine_platform.url
    done = run(tmp_path, ws, "list", "-o", "json", platform=url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"workspace": ws, "installations": []}

    triage = [TRIAGE, "--setup-file", TRIAGE_SETUP, "--substitute", "model:gpt-4.1=gpt-5", "-o", "json"]
    done = run(tmp_path, ws, "install", *triage, platform=url)
    assert done.returncode == 0, done.stderr
    installed = json.loads(done.stdout)
    (tmp_path / "small.yaml").write_text(OTHER)
    assert run(tmp_path, ws, "install", "small.yaml", platform=url).returncode == 0

    done = run(tmp_path, ws, "list", "-o", "json", platform=url)
    assert done.returncode == 0, done.stderr
    rows = {r["bundle"]: r for r in json.loads(done.stdout)["installations"]}
    assert sorted(rows) == ["github-triage", "small-kit"]
    triage_row = rows["github-triage"]
    assert triage_row["version"] == installed["bundle"]["version"]
    assert triage_row["digest"] == installed["bundle"]["digest"]
    assert triage_row["entities"] == len(installed["entities"])
    assert triage_row["drift"] == "in_sync" and triage_row["drifted_entities"] == []
    assert rows["small-kit"]["version"] == "2.0.0" and rows["small-kit"]["entities"] == 1

    agent_id = next(e["id"] for e in installed["entities"] if e["kind"] == "agent")

    async def edit() -> None:
        async with PlatformClient(url, token=TOKEN) as client:
            agent = await client.get(ws, kinds.AGENTS, agent_id)
            await client.update(
                ws, kinds.AGENTS, agent_id, AgentUpdate(model="gpt-local"), revision=agent.revision
            )

    asyncio.run(edit())
    done = run(tmp_path, ws, "list", platform=url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["BUNDLE", "VERSION", "DIGEST", "ENTITIES", "DRIFT"]
    triage_line = next(line for line in lines if line.startswith("github-triage"))
    assert "drifted (agent:triage_bot)" in triage_line
    assert installed["bundle"]["version"] in triage_line
    small_line = next(line for line in lines if line.startswith("small-kit"))
    assert small_line.split()[-1] == "in_sync"

    # Without a platform the state files still list; drift is unknown rather than guessed.
    done = run(tmp_path, ws, "list", "-o", "json", platform=None)
    assert done.returncode == 0, done.stderr
    assert {r["drift"] for r in json.loads(done.stdout)["installations"]} == {"unknown"}


def test_state_files_that_cannot_be_listed_say_why_with_every_key(tmp_path: Path) -> None:
    folder = tmp_path / ".bundlectl" / "ws-a"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{not json")
    (folder / "elsewhere.json").write_text(json.dumps({"installation": "x", "workspace": "ws-b"}))
    result = run(tmp_path, "ws-a", "list", "-o", "json", platform=None)
    assert result.returncode == 0, result.stderr
    rows = {Path(r["state"]).name: r for r in json.loads(result.stdout)["installations"]}
    assert rows["broken.json"]["drift"] == "unreadable"
    assert rows["elsewhere.json"]["drift"] == "other_workspace"
    keys = {"bundle", "version", "digest", "entities", "drift", "drifted_entities", "state"}
    assert all(set(row) == keys for row in rows.values())
