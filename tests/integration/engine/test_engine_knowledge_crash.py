"""A knowledge-set install killed between the set's create and its sources resumes whole: the same
set, every source, no second set; with other inputs it rolls back to nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bundle_operator.engine.apply import Options, apply
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from tests.integration.engine.conftest import TOKEN
from tests.integration.engine.harness import Store, example, install, workspace_state
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
MAPPED = Options(substitutions={"knowledge_source:s3:acme-bylaws": "s3:dormagen-bylaws"})
ROOT = Path(__file__).resolve().parents[3]

# One install in a separate process that dies (no cleanup, like SIGKILL) right after the N-th
# platform create answered ("cN") or the N-th source was put ("sN").
CRASHING_INSTALL = r"""
import asyncio, os, sys, yaml
from pathlib import Path
from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.apply import Options, apply
from bundle_operator.engine.record import Record
from bundle_operator.platform.client import PlatformClient

url, token, ws, state, crash_at, root = sys.argv[1:7]
counts = {"c": 0, "s": 0}

async def persist(record):
    Path(state).write_text(record.model_dump_json())

def counted(letter, call):
    async def wrapper(*args, **kwargs):
        made = await call(*args, **kwargs)
        counts[letter] += 1
        if crash_at == f"{letter}{counts[letter]}":
            os._exit(137)
        return made
    return wrapper

async def main():
    parsed = parse_bundle_text(Path(root, "examples/building-office.yaml").read_text())
    setup = yaml.safe_load(Path(root, "examples/setup/building-office.yaml").read_text())
    async with PlatformClient(url, token=token) as client:
        client.create = counted("c", client.create)
        client.put_source = counted("s", client.put_source)
        record = Record(installation="crash/knowledge", workspace=ws)
        options = Options(substitutions={"knowledge_source:s3:acme-bylaws": "s3:dormagen-bylaws"})
        await apply(client, ws, parsed, setup, record, persist, options)

asyncio.run(main())
"""


def crash_install(platform: PlatformProcess, ws: str, state: Path, crash_at: str) -> int:
    argv = [sys.executable, "-c", CRASHING_INSTALL, platform.url, TOKEN, ws, str(state), crash_at, str(ROOT)]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60).returncode


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
    state = tmp_path / "state.json"
    assert crash_install(engine_platform, ws, state, crash_at) == 137
    record = Record.model_validate_json(state.read_text())
    parsed, setup = example("building-office")
    result = await apply(client, ws, parsed, setup, record, Store(record).persist, MAPPED)
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
    state = tmp_path / "state.json"
    assert crash_install(engine_platform, ws, state, "s1") == 137
    record = Record.model_validate_json(state.read_text())
    parsed, setup = example("building-office")
    other = Options(substitutions={"knowledge_source:s3:acme-bylaws": "s3:zons-bylaws"})
    result, _ = await install(client, ws, parsed, setup, record, other)
    assert len(result.created) == 4
    await owned_exactly(client, ws, record)
    [knowledge_set] = await client.list_all(ws, kinds.KNOWLEDGE_SETS)
    assert {s.key: s.bucket for s in knowledge_set.sources}["s3-1"] == "zons-bylaws"
