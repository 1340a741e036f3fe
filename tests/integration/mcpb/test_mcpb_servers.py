"""The .mcpb test servers are real: accepted by the reader, and they answer the official MCP client.

Each archive of the ``mcpb_servers`` fixture (tests/fixtures/mcpb_servers/build.py) is extracted
with the project's contained extraction and started over stdio the way an MCP host would: the
manifest's mcp_config with ``${__dirname}`` and the user_config values substituted, node with the
cached Node, python with this Python, a binary from inside its folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import TextContent
from tests.fixtures.mcpb_servers.build import ELF_MACHINES, McpbServers, ServerArchive, ensure
from tests.mcpb_servers import host_launch

from bundle_operator.mcpb.extract import extract_file
from bundle_operator.mcpb.reader import inspect_file

pytestmark = pytest.mark.integration

GREETING = "hello from the test host"
# Not a real secret; the servers must still never send it back.
API_TOKEN = "tok-41c-never-echoed"
RUNNABLE = ("node", "python", "binary")
USER_CONFIG = {"greeting": GREETING, "api_token": API_TOKEN}
CALL_TIMEOUT_SECONDS = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def archive(servers: McpbServers, kind: str) -> ServerArchive:
    found: ServerArchive = getattr(servers, kind)
    return found


def elf_machine(program: Path) -> int:
    header = program.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{program} is not an ELF program"
    return int.from_bytes(header[18:20], "little")


def text_of(result: Any) -> str:
    assert not result.is_error, result
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


@pytest.mark.parametrize("kind", ["node", "python", "binary", "binary_foreign"])
def test_each_archive_is_accepted_by_the_reader(mcpb_servers: McpbServers, kind: str) -> None:
    server = archive(mcpb_servers, kind)
    inspection = inspect_file(server.path, platform="linux")
    # The foreign binary too: the reader reads the manifest, not the program's ELF header.
    assert inspection.verdict == server.verdict == "accepted", inspection.reason
    assert inspection.sha256 == server.sha256 == hashlib.sha256(server.path.read_bytes()).hexdigest()
    assert inspection.manifest is not None
    assert inspection.manifest.server_type == server.kind
    assert inspection.manifest.entry_point == server.entry
    assert server.digest == f"sha256:{server.sha256}"
    assert inspection.manifest.manifest_version == "0.3"
    assert [f.key for f in inspection.setup] == ["greeting", "api_token"]
    assert [f.sensitive for f in inspection.setup] == [False, True]
    assert inspection.signature is not None and inspection.signature.status == "unsigned"


def test_the_node_archive_ships_its_node_modules(mcpb_servers: McpbServers) -> None:
    with zipfile.ZipFile(mcpb_servers.node.path) as packed:
        names = set(packed.namelist())
    assert {"manifest.json", "package.json", "server/index.js"} <= names
    assert "node_modules/@modelcontextprotocol/sdk/package.json" in names
    assert "node_modules/zod/package.json" in names
    # `mcpb pack` leaves out what a bundle does not run.
    assert "package-lock.json" not in names
    assert not any(name.startswith("node_modules/.bin/") for name in names)


@pytest.mark.parametrize("kind", ["binary", "binary_foreign"])
def test_each_binary_is_a_static_program_for_its_architecture(
    mcpb_servers: McpbServers, kind: str, tmp_path: Path
) -> None:
    server = archive(mcpb_servers, kind)
    extracted = extract_file(server.path, tmp_path / "bundle", platform="linux")
    program = extracted.path / "server" / "mcpb-echo"
    assert os.access(program, os.X_OK)
    assert server.arch is not None
    assert elf_machine(program) == ELF_MACHINES[server.arch]
    assert b"/lib64/ld-linux" not in program.read_bytes()[:4096], "CGO_ENABLED=0 makes no interpreter"
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    assert (server.arch == machine) == (kind == "binary")


def check_identity(identity: dict[str, Any], kind: str, folder: Path) -> None:
    """whoami's answer: the setup value, proof the secret arrived (never the secret), where it ran."""
    assert identity["server"] == kind
    assert identity["greeting"] == GREETING
    assert identity["api_token_set"] is True
    assert identity["api_token_length"] == len(API_TOKEN)
    assert identity["api_token_sha256_prefix"] == hashlib.sha256(API_TOKEN.encode()).hexdigest()[:16]
    assert API_TOKEN not in json.dumps(identity)
    assert identity["bundle_root"] == str(folder)
    assert Path(identity["cwd"]).resolve() == folder.resolve()
    assert Path(identity["dirname"]).resolve() == folder.resolve() / "server"
    assert identity["argv"] == []
    assert isinstance(identity["pid"], int)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", RUNNABLE)
async def test_each_server_answers_the_official_client_over_stdio(
    mcpb_servers: McpbServers, kind: str, tmp_path: Path
) -> None:
    server = archive(mcpb_servers, kind)
    extracted = await anyio.to_thread.run_sync(
        lambda: extract_file(server.path, tmp_path / "bundle", platform="linux")
    )
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with Client(host_launch(extracted, USER_CONFIG)) as client:
            tools = await client.list_tools()
            echoed = text_of(await client.call_tool("echo", {"text": "are you there?"}))
            identity = json.loads(text_of(await client.call_tool("whoami", {})))
    assert {tool.name for tool in tools.tools} == {"echo", "whoami"}
    assert echoed == f"{kind}: are you there?"
    check_identity(identity, kind, extracted.path)


def test_the_build_is_cached(mcpb_servers: McpbServers) -> None:
    before = {a.path: a.path.stat().st_mtime_ns for a in mcpb_servers.all()}
    assert ensure() == mcpb_servers
    assert {a.path: a.path.stat().st_mtime_ns for a in mcpb_servers.all()} == before
