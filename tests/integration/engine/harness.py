"""Helpers for engine tests: parse examples, run installs with an in-memory record (or in a process
that crashes), count entities."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from bundle_operator.document import ParsedBundle, parse_bundle_text
from bundle_operator.engine.apply import ApplyResult, apply
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.engine.writer import Persist
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import FaultSpec
from bundle_operator.platform.protocol import PlatformAPI
from tests.integration.engine.conftest import TOKEN
from tests.integration.platform.platform_harness import PlatformProcess

ROOT = Path(__file__).resolve().parents[3]
# Every entity examples/github-triage.yaml installs, by kind:key.
TRIAGE_ENTITIES = (
    "mcp:github",
    "skill:triage",
    "skill:release_notes",
    "agent:triage_bot",
    "channel:maintainers_chat",
    "automation:morning_digest",
    "policy:answer_check",
    "policy:spend_cap",
)


def example(name: str) -> tuple[ParsedBundle, dict[str, Any]]:
    """An example bundle and its example setup values."""
    parsed = parse_bundle_text((ROOT / "examples" / f"{name}.yaml").read_text())
    setup = yaml.safe_load((ROOT / "examples" / "setup" / f"{name}.yaml").read_text())
    return parsed, setup


def parse(document: dict[str, Any]) -> ParsedBundle:
    """Parse a document given as data."""
    parsed = parse_bundle_text(yaml.safe_dump(document, sort_keys=False))
    assert parsed.bundle is not None, [i.to_json() for i in parsed.issues]
    return parsed


class Store:
    """Persists records in memory, keeping every persisted version (a crash can resume from any)."""

    def __init__(self, record: Record) -> None:
        self.record = record
        self.versions: list[str] = []

    async def persist(self, record: Record) -> None:
        self.versions.append(record.model_dump_json())


async def install(
    client: PlatformClient,
    ws: str,
    parsed: ParsedBundle,
    setup: dict[str, Any],
    record: Record | None = None,
    options: Options | None = None,
) -> tuple[ApplyResult, Record]:
    """Apply a bundle with a fresh or given record."""
    record = record or Record(installation="test/inst", workspace=ws)
    store = Store(record)
    result = await plan_and_apply(client, ws, parsed, setup, record, store.persist, options)
    return result, record


async def plan_and_apply(
    platform: PlatformAPI,
    ws: str,
    parsed: ParsedBundle,
    setup: Mapping[str, object],
    record: Record,
    persist: Persist,
    options: Options | None = None,
) -> ApplyResult:
    """Plan against the platform, then carry that plan out (what bundlectl install does)."""
    planned = await plan(platform, ws, parsed, setup, record, options)
    return await apply(platform, planned, record, persist)


async def workspace_state(client: PlatformClient, ws: str) -> dict[str, list[str]]:
    """Every entity id in a workspace, per collection (gateway contents aside)."""
    state: dict[str, list[str]] = {}
    for kind in kinds.ALL_KINDS:
        items = await client.list_all(ws, kind)
        state[kind.path] = sorted(item.id for item in items)
    return state


async def arm_fault(client: PlatformClient, **spec: Any) -> str:
    """Arm a fault on the reference platform (started with --enable-fault-injection)."""
    body = FaultSpec.model_validate(spec).model_dump_json().encode()
    response = await client.request("POST", "/_admin/faults", body=body, safe=False)
    return str(response.json()["id"])


async def clear_faults(client: PlatformClient) -> None:
    """Disarm every fault."""
    await client.request("DELETE", "/_admin/faults", safe=True)


# Runs one install of an example in a separate process and dies (no cleanup, like SIGKILL) right
# after the record was persisted for the N-th time ("pN"), right after the N-th platform create
# answered ("cN": the entity landed, the disk does not know its id), or right after the N-th
# knowledge source was put ("sN"): the state file on disk is what survives.
CRASHING_INSTALL = r"""
import asyncio, json, os, sys, yaml
from pathlib import Path
from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.apply import apply
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.platform.client import PlatformClient

url, token, ws, state, crash_at, root, name, substitutions = sys.argv[1:9]
counts = {"p": 0, "c": 0, "s": 0}

def reached(step):
    counts[step] += 1
    if crash_at == f"{step}{counts[step]}":
        os._exit(137)

async def persist(record):
    Path(state).write_text(record.model_dump_json())
    reached("p")

def counted(step, call):
    async def then_maybe_die(*args, **kwargs):
        made = await call(*args, **kwargs)
        reached(step)
        return made
    return then_maybe_die

async def main():
    parsed = parse_bundle_text(Path(root, "examples", f"{name}.yaml").read_text())
    setup = yaml.safe_load(Path(root, "examples", "setup", f"{name}.yaml").read_text())
    async with PlatformClient(url, token=token) as client:
        client.create = counted("c", client.create)
        client.put_source = counted("s", client.put_source)
        record = Record(installation="crash/test", workspace=ws)
        options = Options(substitutions=json.loads(substitutions))
        await apply(client, await plan(client, ws, parsed, setup, record, options), record, persist)

asyncio.run(main())
"""


def crash_install(
    platform: PlatformProcess, ws: str, state: Path, crash_at: str, name: str, options: Options
) -> int:
    """Install example ``name`` in a process that dies at ``crash_at``; its exit code."""
    substitutions = json.dumps(dict(options.substitutions))
    argv = [sys.executable, "-c", CRASHING_INSTALL, platform.url, TOKEN, ws, str(state), crash_at]
    argv += [str(ROOT), name, substitutions]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return done.returncode


def crashed_record(
    platform: PlatformProcess, ws: str, state: Path, crash_at: str, name: str, options: Options
) -> Record:
    """Install example ``name`` in a process killed at ``crash_at``; the record it left on disk."""
    assert crash_install(platform, ws, state, crash_at, name, options) == 137
    return Record.model_validate_json(state.read_text())
