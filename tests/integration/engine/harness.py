"""Helpers for engine tests: parse examples, run installs with an in-memory record, count entities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bundle_operator.document import ParsedBundle, parse_bundle_text
from bundle_operator.engine.apply import ApplyResult, Options, apply
from bundle_operator.engine.record import Record
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import FaultSpec

ROOT = Path(__file__).resolve().parents[3]


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
    result = await apply(client, ws, parsed, setup, record, store.persist, options)
    return result, record


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
