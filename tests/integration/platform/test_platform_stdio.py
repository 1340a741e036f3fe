"""Command instances with an artifact, run by the platform over stdio and served as gateway members.

Each test uploads its own python .mcpb (stdio_archive.py), makes the server spec and instance the
engine would, puts the instance in a gateway bundle behind an Endpoint and calls through it with
the official MCP client. The process table tells whether a process runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import LoggingMessageNotificationParams
from platform_builders import create, key, secret
from platform_harness import TOKEN, PlatformProcess, start_platform
from stdio_archive import digest_of, node_archive, processes_under, python_archive, server_spec, whereabouts

from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Refused
from bundle_operator.platform.models import (
    EndpointCreate,
    GatewayBundleCreate,
    GatewayMember,
    GatewayMemberPut,
    McpInstance,
    McpInstanceCreate,
    McpInstanceUpdate,
    McpServerCreate,
    SecretRef,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

IDLE = 3.0
BACKOFF = 2.0
TREE_CHECK = 1.0
TOKEN_VALUE = "tok-" + "s3cr3t" * 6


@pytest.fixture(scope="module")
def stdio_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    """A platform that stops idle instance processes soon and rediscovers members quickly."""
    db = tmp_path_factory.mktemp("stdio") / "platform.db"
    running = start_platform(
        db,
        "--token",
        TOKEN,
        "--instance-idle-seconds",
        str(IDLE),
        "--instance-backoff-seconds",
        str(BACKOFF),
        "--discovery-interval",
        "2",
        "--instance-tree-check-seconds",
        str(TREE_CHECK),
    )
    yield running
    running.stop()


@pytest.fixture
async def api(stdio_platform: PlatformProcess) -> AsyncIterator[PlatformClient]:
    async with PlatformClient(stdio_platform.url, token=TOKEN, timeout=20.0) as client:
        yield client


async def eventually(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.1)


@dataclass
class Served:
    """One test's instance behind an Endpoint."""

    ws: str
    instance_id: str
    bundle_id: str
    url: str
    api_key: str
    folder: Path  # the extracted tree, where the platform keeps it by default

    def connect(self, **options: Any) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.api_key}"}, timeout=30)
        return Client(streamable_http_client(self.url, http_client=http), cache=None, **options)


async def serve(
    api: PlatformClient,
    platform: PlatformProcess,
    tmp_path: Path,
    *,
    crash_on_start: bool = False,
    runtime: str = "python",
) -> Served:
    """Upload an archive, make its server and instance (greeting and secret token), serve it."""
    ws = f"io-{key()[:8]}"
    if runtime == "python":
        data = python_archive(tmp_path, crash_on_start=crash_on_start)
    else:
        data = node_archive(tmp_path, binary=runtime == "binary")
    await api.put_artifact(ws, digest_of(data), data)
    server = await create(
        api, ws, kinds.MCP_SERVERS, McpServerCreate.model_validate(server_spec(digest_of(data), runtime))
    )
    token = await secret(api, ws, value=TOKEN_VALUE, name="api token")
    instance = await create(
        api,
        ws,
        kinds.MCP_INSTANCES,
        McpInstanceCreate(
            server_id=server.id,
            name="hello",
            env={"GREETING": "Hej", "API_TOKEN": SecretRef(secret_id=token.id)},
        ),
    )
    bundle = await create(api, ws, kinds.GATEWAY_BUNDLES, GatewayBundleCreate(name=f"b-{ws}"))
    await api.put_member(ws, bundle.id, "hello", GatewayMemberPut(mcp_instance_id=instance.id))
    endpoint = await create(
        api, ws, kinds.ENDPOINTS, EndpointCreate(name=f"ep-{ws}", gateway_bundle_id=bundle.id)
    )
    assert endpoint.api_key is not None
    [folder] = sorted((platform.db.parent / "artifacts" / ws).iterdir())
    return Served(ws, instance.id, bundle.id, endpoint.url, endpoint.api_key.get_secret_value(), folder)


async def discovered(api: PlatformClient, served: Served, tools: int = 5) -> None:
    async def listed() -> bool:
        return (await member(api, served)).healthy and len(
            await api.list_tools(served.ws, served.bundle_id)
        ) >= tools

    await eventually(listed, 20, "the stdio member discovered")


async def member(api: PlatformClient, served: Served) -> GatewayMember:
    [only] = await api.list_members(served.ws, served.bundle_id)
    return only


async def member_says(api: PlatformClient, served: Served, reason: str) -> None:
    """Until the gateway member is unhealthy with ``reason`` in its message."""

    async def unhealthy() -> bool:
        shown = await member(api, served)
        return not shown.healthy and reason in shown.message

    await eventually(unhealthy, 10, f"the member unhealthy with {reason}")


async def instance(api: PlatformClient, served: Served) -> McpInstance:
    return await api.get(served.ws, kinds.MCP_INSTANCES, served.instance_id)


async def state_is(api: PlatformClient, served: Served, state: str, within: float) -> McpInstance:
    async def reached() -> bool:
        health = (await instance(api, served)).health
        return health is not None and health.state == state

    await eventually(reached, within, f"the instance's health {state}")
    return await instance(api, served)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def text_of(result: Any) -> str:
    return str(result.content[0].text)


async def test_an_instance_launches_and_answers_through_an_endpoint_with_its_env_and_secret(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    await discovered(api, served)
    progress: list[str | None] = []
    logged: list[tuple[str | None, Any]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logged.append((params.logger, params.data))

    async with served.connect(logging_callback=on_log, log_level="info") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"hello__greet", "hello__token_hash", "hello__whereabouts"} <= names
        assert text_of(await client.call_tool("hello__greet", {"name": "Ann"})) == "Hej, Ann!"
        # The secret arrived in the environment; only its hash comes back.
        assert (
            text_of(await client.call_tool("hello__token_hash", {}))
            == hashlib.sha256(TOKEN_VALUE.encode()).hexdigest()
        )
        where = whereabouts(text_of(await client.call_tool("hello__whereabouts", {})))
        assert text_of(await client.call_tool("hello__steps", {}, progress_callback=on_progress)) == "stepped"

    assert progress == ["half way", "done"]
    assert logged == [("hello", "stepped twice")]  # named after the member, as any member's
    assert Path(where["cwd"]) == served.folder.resolve()
    home = Path(where["home"])
    assert home != Path.home() and mode_of(home) == 0o700
    assert where["argv"] == [f"--home={home}"]
    # A minimal inherited environment: the platform's own settings (PYTHONPATH here) stay out.
    assert "PYTHONPATH" not in where["env"] and {"GREETING", "API_TOKEN", "PATH", "HOME"} <= set(where["env"])
    assert processes_under(served.folder) == [where["pid"]]
    health = (await instance(api, served)).health
    assert health is not None and health.state == "running"
    assert TOKEN_VALUE not in stdio_platform.log.read_text()


@pytest.mark.parametrize("runtime", ["node", "binary"])
async def test_node_and_binary_bundles_run_over_stdio(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path, runtime: str
) -> None:
    # The binary is the same server as a script with a #! line: it runs from inside its folder.
    served = await serve(api, stdio_platform, tmp_path, runtime=runtime)
    await discovered(api, served, tools=1)
    async with served.connect() as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["hello__shout"]
        answer = text_of(await client.call_tool("hello__shout", {"text": "quiet"}))
    assert answer.startswith("Hej, QUIET (node v")
    [pid] = processes_under(served.folder)
    assert Path(os.readlink(f"/proc/{pid}/exe")).name == "node"
    assert Path(os.readlink(f"/proc/{pid}/cwd")) == served.folder.resolve()


async def test_a_url_instance_has_no_health(api: PlatformClient) -> None:
    ws = f"io-{key()[:8]}"
    server = await create(
        api,
        ws,
        kinds.MCP_SERVERS,
        McpServerCreate(name="remote", type="url", endpoint_url="https://example.com/mcp"),
    )
    made = await create(api, ws, kinds.MCP_INSTANCES, McpInstanceCreate(server_id=server.id, name="remote"))
    assert made.health is None
    assert [i.health for i in await api.list_all(ws, kinds.MCP_INSTANCES)] == [None]


async def test_an_idle_process_stops_and_the_next_call_starts_it_again(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    await discovered(api, served)
    async with served.connect() as client:
        first = whereabouts(text_of(await client.call_tool("hello__whereabouts", {})))["pid"]
        assert processes_under(served.folder) == [first]
        stopped = await state_is(api, served, "idle", IDLE + 5)
        assert stopped.health is not None and "without use" in stopped.health.message
        assert processes_under(served.folder) == []
        second = whereabouts(text_of(await client.call_tool("hello__whereabouts", {})))["pid"]
    assert second != first and processes_under(served.folder) == [second]


async def test_a_crashed_process_is_started_again_after_a_growing_backoff(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    await discovered(api, served)
    async with served.connect() as client:
        waits: list[float] = []
        for _ in range(2):
            with pytest.raises(MCPError, match="hello"):
                await client.call_tool("hello__fail", {})
            crashed = await state_is(api, served, "crashed", 5)
            assert crashed.health is not None and "giving up now" in crashed.health.message
            # It starts again on the next use: its tools stay offered meanwhile.
            assert (await member(api, served)).healthy
            assert processes_under(served.folder) == []
            # While backing off a call fails at once, saying why and when the server starts again.
            started = time.monotonic()
            with pytest.raises(MCPError, match="crashed") as refused:
                await client.call_tool("hello__greet", {"name": "Ann"})
            assert time.monotonic() - started < 1.5 and "started again in" in str(refused.value)
            assert processes_under(served.folder) == []
            wait = float(str(refused.value).rsplit("started again in ", 1)[1].split()[0])
            waits.append(wait)
            await asyncio.sleep(wait + 0.5)
            assert text_of(await client.call_tool("hello__greet", {"name": "Ann"})) == "Hej, Ann!"
        assert waits[1] > waits[0], waits


async def test_a_changed_tree_is_refused_before_any_launch_and_the_member_says_why(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    await discovered(api, served)
    await state_is(api, served, "idle", IDLE + 5)
    with (served.folder / "server" / "main.py").open("a") as f:
        f.write("# changed on the platform's disk\n")

    async with served.connect() as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("hello__greet", {"name": "Ann"})
    message = str(refused.value)
    assert "'hello'" in message and "tree_changed" in message and str(served.folder) not in message
    changed = await instance(api, served)
    assert changed.health is not None and changed.health.state == "tree_changed"

    await member_says(api, served, "tree_changed")
    assert processes_under(served.folder) == []


async def test_a_tree_changed_under_a_running_server_stops_it(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    await discovered(api, served)
    async with served.connect() as client:
        assert text_of(await client.call_tool("hello__greet", {"name": "Ann"})) == "Hej, Ann!"
        assert len(processes_under(served.folder)) == 1
        (served.folder / "server" / "extra.py").write_text("print('dropped in while it ran')\n")
        # Not at its next launch: within a check or two while it still runs.
        changed = await state_is(api, served, "tree_changed", TREE_CHECK * 2 + 5)
        assert changed.health is not None and "changed since it was extracted" in changed.health.message
        assert processes_under(served.folder) == []

        await member_says(api, served, "tree_changed")
        with pytest.raises(MCPError, match="hello"):
            await client.call_tool("hello__greet", {"name": "Ann"})
    assert processes_under(served.folder) == []


async def test_a_server_that_cannot_start_is_failed_with_its_reason(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path, crash_on_start=True)
    failed = await state_is(api, served, "failed", 20)
    assert failed.health is not None and "did not start" in failed.health.message
    await member_says(api, served, "did not start")
    assert processes_under(served.folder) == []


async def test_a_secret_in_the_args_is_refused(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    ws = f"io-{key()[:8]}"
    data = python_archive(tmp_path)
    await api.put_artifact(ws, digest_of(data), data)
    server = await create(
        api, ws, kinds.MCP_SERVERS, McpServerCreate.model_validate(server_spec(digest_of(data)))
    )
    token = await secret(api, ws, value=TOKEN_VALUE)
    with pytest.raises(Refused) as refused:
        await create(
            api,
            ws,
            kinds.MCP_INSTANCES,
            McpInstanceCreate(
                server_id=server.id,
                name="hello",
                args=["${__dirname}/server/main.py", SecretRef(secret_id=token.id)],
            ),
        )
    assert refused.value.code == "secret_on_command_line"


async def test_no_process_outlives_the_platform(tmp_path: Path) -> None:
    platform = start_platform(tmp_path / "platform.db", "--token", TOKEN)
    try:
        async with PlatformClient(platform.url, token=TOKEN, timeout=20.0) as client:
            served = await serve(client, platform, tmp_path)
            await discovered(client, served)
            async with served.connect() as mcp:
                assert text_of(await mcp.call_tool("hello__greet", {"name": "Ann"})) == "Hej, Ann!"
            assert len(processes_under(served.folder)) == 1
    finally:
        stopping = time.monotonic()
        assert platform.stop() == 0
        # Not held by the gateway's own streams to the stopped instances.
        assert time.monotonic() - stopping < 10
    assert processes_under(served.folder) == []
    assert not any(p for p in processes_under(tmp_path))
    assert mode_of(served.folder) == 0o700  # the extracted tree stays for the next start


async def test_a_changed_instance_restarts_with_its_new_values_and_a_deleted_one_stops(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    await discovered(api, served)
    async with served.connect() as client:
        assert text_of(await client.call_tool("hello__greet", {"name": "Ann"})) == "Hej, Ann!"
        [before] = processes_under(served.folder)
        current = await instance(api, served)
        await api.update(
            served.ws,
            kinds.MCP_INSTANCES,
            served.instance_id,
            McpInstanceUpdate(env={"GREETING": "Hallo", "API_TOKEN": current.env["API_TOKEN"]}),
            revision=current.revision,
        )

        async def greeted_anew() -> bool:
            try:
                result = await client.call_tool("hello__greet", {"name": "Ann"})
            except MCPError:
                return False  # a call that met the old process as it stopped
            return text_of(result) == "Hallo, Ann!"

        await eventually(greeted_anew, 10, "the new greeting")
        assert before not in processes_under(served.folder)
    await api.delete_member(served.ws, served.bundle_id, "hello")
    await api.delete(served.ws, kinds.MCP_INSTANCES, served.instance_id)

    async def stopped() -> bool:
        return processes_under(served.folder) == []

    await eventually(stopped, 10, "the deleted instance's process stopped")


async def test_the_bridge_answers_only_the_platform_itself(
    api: PlatformClient, stdio_platform: PlatformProcess, tmp_path: Path
) -> None:
    served = await serve(api, stdio_platform, tmp_path)
    bridge = f"{stdio_platform.url}/_internal/stdio/{served.ws}/{served.instance_id}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient(timeout=10) as http:
        for headers in (
            {},
            {"Authorization": f"Bearer {TOKEN}"},
            {"Authorization": f"Bearer {served.api_key}"},
        ):
            answer = await http.post(bridge, json=body, headers=headers)
            assert answer.status_code == 401, headers
