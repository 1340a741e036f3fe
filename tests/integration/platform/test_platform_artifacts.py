"""Artifacts over real HTTP: an archive stored by its digest, extracted into a folder of its own,
referred to by MCP server specs, and deleted only once nothing refers to it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_builders import create
from platform_harness import FAST_RETRY, TOKEN, PlatformProcess, start_platform
from tests.unit.mcpb.craft import base_manifest, build

from bundle_operator.mcpb.treedigest import tree_digest
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Conflict, NotFound, Refused, Unavailable
from bundle_operator.platform.models import (
    ArtifactRef,
    FaultSpec,
    McpServer,
    McpServerCreate,
    McpServerUpdate,
)
from bundle_operator.platform.retry import RetryPolicy
from bundle_operator.reference_platform import ServerConfig, start
from bundle_operator.reference_platform.context import CONTEXT

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

OCTETS = {"Content-Type": "application/octet-stream"}


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def archive(tmp_path: Path, text: str = "console.log('weather');\n") -> bytes:
    """An honest node .mcpb whose server file holds ``text`` (so each test gets its own digest)."""
    path = build(tmp_path / "weather.mcpb", files={"server/index.js": text.encode()})
    return path.read_bytes()


def folders(platform: PlatformProcess, ws: str) -> list[Path]:
    """The extracted folders of a workspace, where the platform keeps them by default."""
    root = platform.db.parent / "artifacts" / ws
    return sorted(root.iterdir()) if root.exists() else []


def problem_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "code", "detail", "errors"} <= body.keys()
    assert body["status"] == response.status_code
    return body


async def node_server(client: PlatformClient, ws: str, digest: str, **changes: Any) -> McpServer:
    spec: dict[str, Any] = {
        "name": "weather",
        "type": "command",
        "command": "node",
        "args": ["${__dirname}/server/index.js", "--home=${HOME}"],
        "runtime": "node",
        "artifact": {"digest": digest, "entry": "server/index.js"},
    }
    spec.update(changes)
    return await create(client, ws, kinds.MCP_SERVERS, McpServerCreate.model_validate(spec))


@pytest.fixture
async def raw(platform: PlatformProcess) -> AsyncIterator[httpx.AsyncClient]:
    """Plain HTTP, for statuses and headers the typed client does not show."""
    async with httpx.AsyncClient(
        base_url=platform.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0
    ) as http:
        yield http


async def test_an_upload_is_created_once_and_answered_the_same_after(
    raw: httpx.AsyncClient, platform: PlatformProcess, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    digest = digest_of(data)
    first = await raw.put(f"/v1/workspaces/{ws}/artifacts/{digest}", content=data, headers=OCTETS)
    assert first.status_code == 201, first.text
    shown = first.json()
    assert shown["digest"] == digest and shown["size"] == len(data)
    assert shown["media_type"] == "application/zip" and shown["referenced_by"] == []
    [folder] = folders(platform, ws)
    assert shown["tree_digest"] == tree_digest(folder)
    assert (folder / "server" / "index.js").read_text() == "console.log('weather');\n"
    assert folder.stat().st_mode & 0o077 == 0  # private to the platform's user

    again = await raw.put(f"/v1/workspaces/{ws}/artifacts/{digest}", content=data, headers=OCTETS)
    assert (again.status_code, again.json()) == (200, shown)
    assert folders(platform, ws) == [folder]  # nothing extracted a second time
    read = await raw.get(f"/v1/workspaces/{ws}/artifacts/{digest}")
    assert (read.status_code, read.json()) == (200, shown)


async def test_bytes_that_hash_otherwise_are_refused_and_not_kept(
    raw: httpx.AsyncClient, platform: PlatformProcess, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    claimed = digest_of(b"something else")
    answer = await raw.put(f"/v1/workspaces/{ws}/artifacts/{claimed}", content=data, headers=OCTETS)
    assert answer.status_code == 422
    problem = problem_of(answer)
    assert problem["code"] == "digest_mismatch" and digest_of(data) in problem["detail"]
    assert [e["field"] for e in problem["errors"]] == ["digest"]
    assert (await raw.get(f"/v1/workspaces/{ws}/artifacts/{claimed}")).status_code == 404
    assert folders(platform, ws) == []


async def test_an_archive_the_reader_refuses_is_not_stored(
    raw: httpx.AsyncClient, platform: PlatformProcess, ws: str, tmp_path: Path
) -> None:
    manifest = base_manifest()
    manifest["server"]["entry_point"] = "../outside.js"
    data = build(tmp_path / "bad.mcpb", manifest=manifest).read_bytes()
    answer = await raw.put(f"/v1/workspaces/{ws}/artifacts/{digest_of(data)}", content=data, headers=OCTETS)
    problem = problem_of(answer)
    assert (answer.status_code, problem["code"]) == (422, "artifact_refused")
    assert problem["detail"].startswith("the archive was refused (") and "entry_point" in problem["detail"]
    assert [e["field"] for e in problem["errors"]] == ["body"]
    assert (await raw.get(f"/v1/workspaces/{ws}/artifacts")).json()["items"] == []
    assert folders(platform, ws) == []

    not_a_zip = b"just some text, no archive"
    answer = await raw.put(
        f"/v1/workspaces/{ws}/artifacts/{digest_of(not_a_zip)}", content=not_a_zip, headers=OCTETS
    )
    assert (answer.status_code, problem_of(answer)["code"]) == (422, "artifact_refused")
    assert folders(platform, ws) == []


async def test_a_malformed_digest_is_refused_naming_it(raw: httpx.AsyncClient, ws: str) -> None:
    for method in ("GET", "PUT", "DELETE"):
        answer = await raw.request(method, f"/v1/workspaces/{ws}/artifacts/sha256:ABC", content=b"x")
        problem = problem_of(answer)
        assert (answer.status_code, problem["code"]) == (422, "invalid_request")
        assert [e["field"] for e in problem["errors"]] == ["digest"]


async def test_an_unknown_digest_is_not_found(raw: httpx.AsyncClient, ws: str) -> None:
    digest = digest_of(b"never uploaded")
    for method in ("GET", "DELETE"):
        answer = await raw.request(method, f"/v1/workspaces/{ws}/artifacts/{digest}")
        assert (answer.status_code, problem_of(answer)["code"]) == (404, "not_found")


async def test_a_server_spec_holds_its_artifact_until_it_is_deleted(
    client: PlatformClient, platform: PlatformProcess, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    digest = digest_of(data)
    stored = await client.put_artifact(ws, digest, data)
    server = await node_server(client, ws, digest)
    assert (server.runtime, server.artifact) == ("node", ArtifactRef(digest=digest, entry="server/index.js"))
    assert (await client.get_artifact(ws, digest)).referenced_by == [server.id]
    assert [(a.digest, a.referenced_by) for a in await client.list_artifacts(ws)] == [(digest, [server.id])]

    with pytest.raises(Conflict) as held:
        await client.delete_artifact(ws, digest)
    assert (held.value.code, held.value.holders) == ("artifact_in_use", [server.id])
    assert server.id in held.value.detail
    [folder] = folders(platform, ws)
    assert tree_digest(folder) == stored.tree_digest

    await client.delete(ws, kinds.MCP_SERVERS, server.id)
    assert (await client.get_artifact(ws, digest)).referenced_by == []
    await client.delete_artifact(ws, digest)
    assert not folder.exists() and folders(platform, ws) == []
    with pytest.raises(NotFound):
        await client.get_artifact(ws, digest)
    with pytest.raises(NotFound):
        await client.delete_artifact(ws, digest)
    assert await client.list_artifacts(ws) == []


async def test_a_server_spec_naming_an_unknown_artifact_is_refused(client: PlatformClient, ws: str) -> None:
    with pytest.raises(Refused) as refused:
        await node_server(client, ws, digest_of(b"not uploaded"))
    assert refused.value.code == "artifact_missing"
    assert [e.field for e in refused.value.errors] == ["artifact.digest"]
    assert await client.list_all(ws, kinds.MCP_SERVERS) == []


async def test_the_rules_of_a_server_spec_with_an_artifact(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    digest = digest_of(data)
    await client.put_artifact(ws, digest, data)
    ref = {"digest": digest, "entry": "server/index.js"}
    refusals: list[tuple[dict[str, Any], str, str]] = [
        ({"artifact": None}, "runtime", "invalid_request"),
        ({"runtime": None}, "runtime", "invalid_request"),
        ({"command": "python"}, "command", "unsupported_runtime"),
        ({"runtime": "python", "command": "node"}, "command", "unsupported_runtime"),
        ({"runtime": "binary", "command": "node"}, "command", "unsupported_runtime"),
        ({"runtime": "binary", "command": "${__dirname}/../escape"}, "command", "unsupported_runtime"),
        ({"artifact": {**ref, "entry": "/etc/passwd"}}, "artifact.entry", "invalid_request"),
        (
            {"type": "url", "command": None, "args": [], "endpoint_url": "https://example.com/mcp"},
            "artifact",
            "invalid_request",
        ),
    ]
    for changes, field, code in refusals:
        with pytest.raises(Refused) as refused:
            await node_server(client, ws, digest, **changes)
        assert (refused.value.code, [e.field for e in refused.value.errors]) == (code, [field]), changes

    # Forms an archive may run in, none of them an allowed runtime on its own.
    python = await node_server(client, ws, digest, name="py", runtime="python", command="python3")
    binary = await node_server(
        client, ws, digest, name="bin", runtime="binary", command="${__dirname}/bin/weather", args=["--stdio"]
    )
    assert (python.command, binary.command) == ("python3", "${__dirname}/bin/weather")
    # A plain command server keeps the usual runtime rule.
    with pytest.raises(Refused) as refused:
        await create(
            client,
            ws,
            kinds.MCP_SERVERS,
            McpServerCreate(name="local", type="command", command="${__dirname}/bin/weather"),
        )
    assert refused.value.code == "unsupported_runtime"


async def test_an_update_can_set_and_clear_the_artifact(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    digest = digest_of(data)
    await client.put_artifact(ws, digest, data)
    plain = await create(
        client, ws, kinds.MCP_SERVERS, McpServerCreate(name="weather", type="command", command="node")
    )
    assert (plain.runtime, plain.artifact) == (None, None)
    with pytest.raises(Refused) as refused:
        await client.update(
            ws, kinds.MCP_SERVERS, plain.id, McpServerUpdate(runtime="node"), revision=plain.revision
        )
    assert [e.field for e in refused.value.errors] == ["runtime"]
    moved = await client.update(
        ws,
        kinds.MCP_SERVERS,
        plain.id,
        McpServerUpdate.model_validate(
            {"runtime": "node", "artifact": {"digest": digest, "entry": "server/index.js"}}
        ),
        revision=plain.revision,
    )
    assert (await client.get_artifact(ws, digest)).referenced_by == [moved.id]
    cleared = await client.update(
        ws, kinds.MCP_SERVERS, plain.id, McpServerUpdate(runtime=None, artifact=None), revision=moved.revision
    )
    assert (cleared.runtime, cleared.artifact) == (None, None)
    await client.delete_artifact(ws, digest)


async def test_the_client_refuses_a_malformed_digest_before_sending(client: PlatformClient, ws: str) -> None:
    for call in (
        client.get_artifact(ws, "sha256:../../agents"),
        client.delete_artifact(ws, "md5:abc"),
        client.put_artifact(ws, "sha256:" + "A" * 64, b""),
    ):
        with pytest.raises(ValueError, match="not an artifact digest"):
            await call


async def test_the_client_maps_refusals_to_typed_errors(
    client: PlatformClient, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    with pytest.raises(Refused) as mismatch:
        await client.put_artifact(ws, digest_of(b"other"), data)
    assert mismatch.value.code == "digest_mismatch"
    with pytest.raises(Refused) as bad:
        await client.put_artifact(ws, digest_of(b"no zip"), b"no zip")
    assert bad.value.code == "artifact_refused"


async def arm(client: PlatformClient, **spec: Any) -> str:
    response = await client.request(
        "POST", "/_admin/faults", body=FaultSpec.model_validate(spec).model_dump_json().encode(), safe=False
    )
    return str(response.json()["id"])


async def injected(client: PlatformClient, fault_id: str) -> int:
    faults = (await client.request("GET", "/_admin/faults", safe=True)).json()["items"]
    return int(next(f["injected"] for f in faults if f["id"] == fault_id))


async def test_an_upload_is_repeated_through_a_fault_and_a_lost_answer(
    client: PlatformClient, platform: PlatformProcess, ws: str, tmp_path: Path
) -> None:
    data = archive(tmp_path)
    digest = digest_of(data)
    path = f"/v1/workspaces/{ws}/artifacts/{digest}"
    unavailable = await arm(client, method="PUT", path=path, status=503, times=1)
    stored = await client.put_artifact(ws, digest, data)
    assert stored.digest == digest and await injected(client, unavailable) == 1
    await client.delete_artifact(ws, digest)

    # The platform stores it and the answer is lost: the repeat finds the same artifact.
    lost = await arm(client, method="PUT", path=path, status=502, when="after")
    again = await client.put_artifact(ws, digest, data)
    assert await injected(client, lost) == 1
    assert [a.digest for a in await client.list_artifacts(ws)] == [digest]
    assert len(folders(platform, ws)) == 1
    assert again.tree_digest == stored.tree_digest

    # A single attempt shows the injected problem as the typed error.
    async with PlatformClient(platform.url, token=TOKEN, retry=RetryPolicy(attempts=1)) as once:
        await arm(once, method="GET", path=path, status=500)
        with pytest.raises(Unavailable) as failed:
            await once.get_artifact(ws, digest)
        assert (failed.value.status, failed.value.code) == (500, "injected_fault")


async def test_a_body_over_the_limit_is_refused_with_or_without_a_length(tmp_path: Path) -> None:
    running = await start(ServerConfig(db_path=tmp_path / "p.db", artifact_max_bytes=4096))
    try:
        artifacts = running.runner.app[CONTEXT].artifacts()
        assert artifacts == (tmp_path / "artifacts").resolve()
        big = os.urandom(5000)  # refused before anything reads it as an archive
        digest = digest_of(big)
        url = f"{running.url}/v1/workspaces/w/artifacts/{digest}"
        async with httpx.AsyncClient(timeout=30.0) as http:
            declared = await http.put(url, content=big, headers=OCTETS)
            assert (declared.status_code, problem_of(declared)["code"]) == (413, "too_large")

            async def chunks() -> AsyncIterator[bytes]:
                for start_at in range(0, len(big), 1000):
                    yield big[start_at : start_at + 1000]

            streamed = await http.put(url, content=chunks(), headers=OCTETS)
            assert (streamed.status_code, problem_of(streamed)["code"]) == (413, "too_large")
            assert "4096" in problem_of(streamed)["detail"]
            assert (await http.get(f"{running.url}/v1/workspaces/w/artifacts")).json()["items"] == []
            async with PlatformClient(running.url, retry=FAST_RETRY) as client:
                with pytest.raises(Refused) as refused:
                    await client.put_artifact("w", digest, big)
                assert (refused.value.status, refused.value.code) == (413, "too_large")
            # Other routes keep the API's own limit.
            small = archive(tmp_path, "small")
            fits = await http.put(
                f"{running.url}/v1/workspaces/w/artifacts/{digest_of(small)}", content=small, headers=OCTETS
            )
            assert fits.status_code == 201, fits.text
        assert sorted(p.name for p in artifacts.iterdir()) == [".uploads", "w"]
        assert list((artifacts / ".uploads").iterdir()) == []  # no upload left behind
    finally:
        await running.stop()


async def test_an_in_memory_platform_extracts_into_a_temporary_folder(tmp_path: Path) -> None:
    running = await start(ServerConfig(db_path=Path(":memory:")))
    try:
        folder = running.runner.app[CONTEXT].artifacts()
        data = archive(tmp_path)
        async with PlatformClient(running.url, retry=FAST_RETRY) as client:
            stored = await client.put_artifact("mem", digest_of(data), data)
            [extracted] = list((folder / "mem").iterdir())
            assert tree_digest(extracted) == stored.tree_digest
    finally:
        await running.stop()
    assert not folder.exists()


def test_the_artifacts_dir_option_places_the_folders(tmp_path: Path) -> None:
    chosen = tmp_path / "elsewhere"
    running = start_platform(tmp_path / "db" / "p.db", "--token", TOKEN, "--artifacts-dir", str(chosen))
    try:
        data = archive(tmp_path)
        answer = httpx.put(
            f"{running.url}/v1/workspaces/opt/artifacts/{digest_of(data)}",
            content=data,
            headers={**OCTETS, "Authorization": f"Bearer {TOKEN}"},
            timeout=30.0,
        )
        assert answer.status_code == 201, answer.text
        [extracted] = list((chosen / "opt").iterdir())
        assert tree_digest(extracted) == answer.json()["tree_digest"]
        assert not (tmp_path / "db" / "artifacts").exists()
    finally:
        running.stop()


def test_a_listing_pages_in_upload_order(platform: PlatformProcess, ws: str, tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    digests = []
    for n in range(3):
        data = archive(tmp_path, f"console.log({n});\n")
        digests.append(digest_of(data))
        answer = httpx.put(
            f"{platform.url}/v1/workspaces/{ws}/artifacts/{digests[-1]}",
            content=data,
            headers={**OCTETS, **headers},
            timeout=30.0,
        )
        assert answer.status_code == 201
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        page = httpx.get(
            f"{platform.url}/v1/workspaces/{ws}/artifacts", params=params, headers=headers
        ).json()
        seen += [item["digest"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == digests


async def test_a_restart_keeps_stored_folders_and_drops_unstored_ones(tmp_path: Path) -> None:
    config = ServerConfig(db_path=tmp_path / "p.db")
    data = archive(tmp_path)
    digest = digest_of(data)
    running = await start(config)
    try:
        async with PlatformClient(running.url, retry=FAST_RETRY) as client:
            stored = await client.put_artifact("w", digest, data)
    finally:
        await running.stop()
    workspace = tmp_path / "artifacts" / "w"
    [kept] = list(workspace.iterdir())
    # What a run that stopped between extracting and storing leaves behind.
    orphan = workspace / f"{'0' * 64}-{'a' * 12}"
    (orphan / "server").mkdir(parents=True)
    unrelated = workspace / "notes"
    unrelated.mkdir()

    running = await start(config)
    try:
        async with PlatformClient(running.url, retry=FAST_RETRY) as client:
            assert await client.get_artifact("w", digest) == stored
        assert sorted(workspace.iterdir()) == sorted([kept, unrelated])
        assert tree_digest(kept) == stored.tree_digest
    finally:
        await running.stop()
