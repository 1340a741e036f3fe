"""MCPs made from an .mcpb: install delivers the archive before the MCP, and takes back what it delivered.

Against the reference platform over real HTTP (DESIGN.md §9.7): the archive is uploaded once per
digest and workspace, recorded as the MCP's part only when this installation uploaded it, deleted
by rollback and uninstall once no server spec runs from it, and never uploaded from a file whose
content is not the digest the document names.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.engine.apply import InstallFailed
from bundle_operator.engine.artifacts import ArchiveFiles
from bundle_operator.engine.export import export_workspace
from bundle_operator.engine.plan import Options, plan
from bundle_operator.engine.record import Record
from bundle_operator.engine.uninstall import uninstall
from bundle_operator.mcpb.convert import to_bundle
from bundle_operator.mcpb.reader import inspect_file
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import NotFound
from tests.integration.engine.harness import Store, arm_fault, clear_faults, install, parse
from tests.unit.mcpb.craft import base_manifest, build

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
async def faults(client: PlatformClient) -> AsyncIterator[None]:
    yield
    await clear_faults(client)


def archive(tmp_path: Path, name: str = "weather", text: str = "// v1\n") -> tuple[Path, str]:
    """A node .mcpb (its own content, so its own digest) and that digest."""
    path = build(
        tmp_path / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.mcpb",
        base_manifest(name=name),
        files={"server/index.js": text.encode()},
    )
    return path, "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def document(path: Path) -> dict[str, Any]:
    """What ``bundlectl mcpb to-bundle`` prints for the archive."""
    return to_bundle(inspect_file(path, platform="linux")).document


SETUP = {"api_key": "k" * 20}


async def test_install_uploads_the_archive_before_the_mcp_and_uninstall_takes_it_back(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    path, digest = archive(tmp_path)
    options = Options(artifacts=ArchiveFiles.of([path]))
    result, record = await install(client, ws, parse(document(path)), SETUP, options=options)
    assert "mcp:weather" in result.created
    stored = await client.get_artifact(ws, digest)
    [server] = await client.list_all(ws, kinds.MCP_SERVERS)
    assert stored.referenced_by == [server.id] and stored.size == path.stat().st_size
    assert server.runtime == "node" and server.artifact is not None
    assert (server.artifact.digest, server.artifact.entry) == (digest, "server/index.js")
    assert server.command == "node" and server.args == []  # args go on the instance
    [mcp] = [e for e in record.entities if e.kind == "mcp"]
    assert [(p.role, p.id) for p in mcp.parts if p.role == "artifact"] == [("artifact", digest)]

    # A second run finds everything in place: no upload, nothing written.
    again = await plan(client, ws, parse(document(path)), SETUP, record, options)
    assert not again.writes() and not again.preview.blocking

    await uninstall(client, ws, record, Store(record).persist)
    assert record.leftovers == [] and record.entities == []
    with pytest.raises(NotFound):
        await client.get_artifact(ws, digest)


async def test_an_archive_neither_the_platform_nor_the_run_has_blocks_the_plan(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    path, digest = archive(tmp_path)
    other, _ = archive(tmp_path, text="// someone else's\n")
    record = Record(installation="test/inst", workspace=ws)
    for options in (Options(), Options(artifacts=ArchiveFiles.of([other]))):
        planned = await plan(client, ws, parse(document(path)), SETUP, record, options)
        [issue] = [i for i in planned.preview.issues if i.blocking]
        assert (issue.code, issue.path, issue.entity) == (
            "artifact_unavailable",
            "/mcps/0/artifact/digest",
            "mcp:weather",
        )
        assert digest in issue.message and "--artifact" in issue.message
    assert await client.list_artifacts(ws) == []


async def test_an_archive_already_on_the_platform_is_used_and_never_taken_by_uninstall(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    path, digest = archive(tmp_path)
    await client.put_artifact(ws, digest, path.read_bytes())  # a person uploaded it first
    # Nothing given to the run: the platform has it.
    result, record = await install(client, ws, parse(document(path)), SETUP)
    assert "mcp:weather" in result.created
    [mcp] = [e for e in record.entities if e.kind == "mcp"]
    assert "artifact" not in {p.role for p in mcp.parts}
    await uninstall(client, ws, record, Store(record).persist)
    assert (await client.get_artifact(ws, digest)).referenced_by == []


async def test_an_archive_another_installation_runs_from_stays_when_the_uploader_goes(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    path, digest = archive(tmp_path)
    options = Options(artifacts=ArchiveFiles.of([path]))
    first = document(path)
    second = {**document(path), "name": "weather-two"}
    second["mcps"] = [{**second["mcps"][0], "name": "Weather Two"}]
    _, record1 = await install(client, ws, parse(first), SETUP, options=options)
    _, record2 = await install(
        client, ws, parse(second), SETUP, Record(installation="test/two", workspace=ws), options
    )
    await uninstall(client, ws, record1, Store(record1).persist)
    assert record1.leftovers == []  # in use elsewhere is not a failure to retry
    [server] = await client.list_all(ws, kinds.MCP_SERVERS)
    assert (await client.get_artifact(ws, digest)).referenced_by == [server.id]
    await uninstall(client, ws, record2, Store(record2).persist)  # not its upload: it stays
    assert (await client.get_artifact(ws, digest)).referenced_by == []


async def test_a_failure_after_the_upload_rolls_the_archive_back(
    client: PlatformClient, ws: str, tmp_path: Path, faults: None
) -> None:
    path, _ = archive(tmp_path)
    await arm_fault(client, method="POST", path=f"/v1/workspaces/{ws}/mcp-instances", times=1, status=422)
    with pytest.raises(InstallFailed):
        await install(
            client, ws, parse(document(path)), SETUP, options=Options(artifacts=ArchiveFiles.of([path]))
        )
    assert await client.list_artifacts(ws) == []
    assert await client.list_all(ws, kinds.MCP_SERVERS) == []


async def test_an_update_to_a_new_archive_uploads_it_and_retires_the_old_one(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    old, old_digest = archive(tmp_path, text="// v1\n")
    new, new_digest = archive(tmp_path, text="// v2\n")
    options = Options(artifacts=ArchiveFiles.of([old, new]))
    _, record = await install(client, ws, parse(document(old)), SETUP, options=options)
    result, _ = await install(client, ws, parse(document(new)), SETUP, record, options)
    assert result.updated == ["mcp:weather"]
    [server] = await client.list_all(ws, kinds.MCP_SERVERS)
    assert server.artifact is not None and server.artifact.digest == new_digest
    assert [a.digest for a in await client.list_artifacts(ws)] == [new_digest]
    [mcp] = [e for e in record.entities if e.kind == "mcp"]
    assert [p.id for p in mcp.parts if p.role == "artifact"] == [new_digest]
    assert old_digest != new_digest


async def test_a_file_whose_content_is_not_the_named_digest_is_never_uploaded(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    path, _ = archive(tmp_path)
    parsed, files = parse(document(path)), ArchiveFiles.of([path])
    path.write_bytes(path.read_bytes() + b"\0")  # changed after it was indexed
    with pytest.raises(InstallFailed) as failed:
        await install(client, ws, parsed, SETUP, options=Options(artifacts=files))
    assert "changed since it was read" in str(failed.value)
    assert await client.list_artifacts(ws) == []


async def test_the_plan_says_what_will_run_before_anything_is_uploaded(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    # What a person approving a Manual plan reads: the command, runtime, entry and digest.
    path, digest = archive(tmp_path)
    record = Record(installation="test/inst", workspace=ws)
    options = Options(artifacts=ArchiveFiles.of([path]))
    planned = await plan(client, ws, parse(document(path)), SETUP, record, options)
    [said] = [i for i in planned.preview.issues if i.code == "runs_from_archive"]
    assert said.message == (
        "MCP 'weather' will run `node ${__dirname}/server/index.js --units=${setup.units}` "
        f"(node, entry server/index.js) from the archive {digest}, which install uploads to the platform"
    )
    assert not planned.preview.blocking
    assert await client.list_artifacts(ws) == []


async def test_an_export_runs_from_the_same_archive(client: PlatformClient, ws: str, tmp_path: Path) -> None:
    path, digest = archive(tmp_path)
    await install(
        client, ws, parse(document(path)), SETUP, options=Options(artifacts=ArchiveFiles.of([path]))
    )
    exported = yaml.safe_load(await export_workspace(client, ws, "again", "1.0.0"))
    [mcp] = exported["mcps"]
    assert (mcp["runtime"], mcp["artifact"]) == ("node", {"digest": digest, "entry": "server/index.js"})
    assert mcp["command"] == "node" and mcp["args"][0] == "${__dirname}/server/index.js"
    # The export names the archive by content: another workspace needs the file, and its plan says so.
    parsed = parse(exported)
    planned = await plan(client, f"{ws}-x", parsed, SETUP, Record(installation="t/x", workspace=f"{ws}-x"))
    assert "artifact_unavailable" in [i.code for i in planned.preview.issues if i.blocking]
