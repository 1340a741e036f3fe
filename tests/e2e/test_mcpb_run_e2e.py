"""An .mcpb from an MCP Registry record runs on the platform, end to end (issue 41, DESIGN.md §9.7).

Real node, python and Go servers (tests/fixtures/mcpb_servers, built with the official SDKs and
packed with the official ``mcpb`` CLI) are published in the stub registry. For each: a Bundle with
a registry source, a BundleInstallation and an Endpoint are applied together on the dev control
plane; the operator uploads the archive, the platform unpacks and launches it over stdio, and the
official MCP client calls its tool through the Endpoint. Then a file of the unpacked tree is
changed on the platform's disk: the next launch is refused, and the installation and the Endpoint
say why. A binary built for another architecture blocks at analyze.

The module runs its own platform (instances idle out after a few seconds, so a next launch comes
soon) and its own operator (it trusts the stub registry's CA through SSL_CERT_FILE).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.e2e.operator_harness import (
    OperatorProcess,
    condition,
    platform_list,
    registry_operator,
    resource,
    wait_ready,
)
from tests.fixtures.mcpb_servers.build import McpbServers, ServerArchive
from tests.integration.platform.platform_harness import PlatformProcess, start_platform
from tests.registry_stub import StubRegistry

pytestmark = pytest.mark.e2e
IDLE_SECONDS = 4
TOKEN = "t0ken-for-the-echo-server"


@pytest.fixture(scope="module")
def idle_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("mcpb-platform") / "platform.db"
    running = start_platform(db, "--instance-idle-seconds", str(IDLE_SECONDS))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def operator(
    devcluster: DevCluster,
    crds: None,
    idle_platform: PlatformProcess,
    solo_namespace: str,
    registry: StubRegistry,
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    log = tmp_path / "operator.log"
    with registry_operator(
        devcluster.kubeconfig, idle_platform.url, log, solo_namespace, registry.tls.ca_file
    ) as running:
        yield running


def apply_all(kubectl: Kubectl, tmp_path: Path, namespace: str, objects: list[dict[str, Any]]) -> None:
    """One `kubectl apply` of several objects, as a GitOps sync would apply them."""
    path = tmp_path / f"apply-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    kubectl.apply(path, namespace=namespace)


def secret_data(kubectl: Kubectl, name: str, namespace: str) -> dict[str, str]:
    secret = kubectl.get("secret", name, namespace)
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def connect(url: str, api_key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), cache=None)


async def call(url: str, key: str, tool: str, arguments: dict[str, Any]) -> str:
    async with connect(url, key) as client:
        answer = await client.call_tool(tool, arguments)
        assert not answer.is_error, answer.content
        return str(answer.content[0].text)  # type: ignore[union-attr]


def objects(name: str, server: str, registry: StubRegistry, workspace: str) -> list[dict[str, Any]]:
    """The Bundle, the BundleInstallation and the Endpoint of one registry server."""
    bundle = resource("Bundle", name, {"source": {"registry": {"url": registry.url, "server": server}}})
    installation = resource(
        "BundleInstallation",
        name,
        {
            "bundleRef": {"name": name},
            "workspace": workspace,
            "setup": [
                {"key": "greeting", "value": f"hello from {name}"},
                {"key": "api_token", "secretKeyRef": {"name": "echo-token", "key": "token"}},
            ],
            "driftPolicy": {"interval": "5s"},
        },
    )
    endpoint = resource(
        "Endpoint", name, {"installationRef": {"name": name}, "credentialsSecretName": f"{name}-key"}
    )
    return [bundle, installation, endpoint]


def publish(registry: StubRegistry, server: str, built: ServerArchive) -> None:
    registry.publish(server, "1.0.0", built.path.read_bytes())


def first_answer(
    kubectl: Kubectl, name: str, namespace: str, tool: str, within: float
) -> tuple[str, str, str]:
    """The Endpoint's URL and key once it is Ready, and the first answer of ``tool`` through it."""
    wait_ready(kubectl, "bep", name, namespace, timeout=within)
    credentials = secret_data(kubectl, f"{name}-key", namespace)
    url, key = credentials["url"], credentials["apiKey"]

    def answered() -> str | None:
        try:
            return asyncio.run(call(url, key, tool, {"text": "ping"}))
        except (MCPError, httpx2.HTTPError, AssertionError, ExceptionGroup):
            return None  # discovery of the member runs after the install

    return url, key, wait_until(answered, within, f"{tool} answered through the Endpoint")


def test_registry_archives_install_run_and_answer_through_an_endpoint(
    kubectl: Kubectl,
    operator: OperatorProcess,
    registry: StubRegistry,
    idle_platform: PlatformProcess,
    solo_namespace: str,
    tmp_path: Path,
    mcpb_servers: McpbServers,
) -> None:
    ns, suffix = solo_namespace, solo_namespace.rsplit("-", 1)[-1]
    kubectl.run("create", "secret", "generic", "echo-token", "-n", ns, f"--from-literal=token={TOKEN}")
    servers = {"node": mcpb_servers.node, "python": mcpb_servers.python, "binary": mcpb_servers.binary}
    for kind, built in servers.items():
        publish(registry, f"io.github.example/echo-{kind}", built)

    # node first, timed from the apply to the first answered call.
    started = time.monotonic()
    apply_all(
        kubectl, tmp_path, ns, objects("echo-node", "io.github.example/echo-node", registry, f"n-{suffix}")
    )
    url, key, answer_node = first_answer(kubectl, "echo-node", ns, "mcpb_echo_node__echo", 240)
    print(f"kubectl apply to the first answered call (node): {time.monotonic() - started:.1f} s")
    assert answer_node == "node: ping"

    for kind in ("python", "binary"):
        name = f"echo-{kind}"
        apply_all(
            kubectl, tmp_path, ns, objects(name, f"io.github.example/{name}", registry, f"{kind[0]}-{suffix}")
        )
    for kind in ("python", "binary"):
        _, _, answer = first_answer(kubectl, f"echo-{kind}", ns, f"mcpb_echo_{kind}__echo", 240)
        assert answer == f"{kind}: ping"

    # The setup values reached the server's environment; the secret never left the platform.
    who = json.loads(asyncio.run(call(url, key, "mcpb_echo_node__whoami", {})))
    print("mcpb_echo_node__echo answered:", answer_node, "| whoami:", json.dumps(who))
    assert who["greeting"] == "hello from echo-node"
    assert who["api_token_set"] is True and who["api_token_length"] == len(TOKEN)
    workspace = f"n-{suffix}"
    [server] = platform_list(idle_platform, workspace, "mcp-servers")
    assert server["runtime"] == "node" and server["artifact"]["digest"] == mcpb_servers.node.digest
    assert TOKEN not in json.dumps(platform_list(idle_platform, workspace, "mcp-instances"))
    folder = Path(who["bundle_root"])
    assert folder.is_relative_to(idle_platform.db.parent / "artifacts" / workspace)

    # A file of the unpacked tree changes on the platform's disk: once the process has idled out,
    # the next launch is refused and nothing runs.
    (folder / "server" / "index.js").write_text("process.exit(0)\n")
    time.sleep(IDLE_SECONDS + 2)
    with pytest.raises(ExceptionGroup) as refused:
        asyncio.run(call(url, key, "mcpb_echo_node__echo", {"text": "again"}))
    assert refused.group_contains(MCPError, match="mcpb_echo_node' cannot serve: tree_changed", depth=None)

    def installation_says() -> dict[str, Any] | None:
        found = condition(kubectl.get("bundleinstallation", "echo-node", ns), "Ready")
        return found if found and found["reason"] == "McpNotRunning" else None

    ready = wait_until(installation_says, 60, "the installation reporting the changed tree")
    print("installation Ready:", json.dumps(ready))
    assert ready["status"] == "False" and "tree_changed" in str(ready["message"])

    def endpoint_says() -> list[dict[str, Any]] | None:
        members = (kubectl.get("bep", "echo-node", ns).get("status") or {}).get("members") or []
        unhealthy = members and not members[0]["healthy"] and "tree_changed" in members[0]["message"]
        return members if unhealthy else None

    members = wait_until(endpoint_says, 60, "the Endpoint reporting the member unhealthy")
    print("Endpoint members:", json.dumps(members))
    assert members[0]["name"] == "mcpb_echo_node"


def test_a_binary_built_for_another_architecture_blocks_at_analyze(
    kubectl: Kubectl,
    operator: OperatorProcess,
    registry: StubRegistry,
    solo_namespace: str,
    tmp_path: Path,
    mcpb_servers: McpbServers,
) -> None:
    ns = solo_namespace
    publish(registry, "io.github.example/echo-foreign", mcpb_servers.binary_foreign)
    kubectl.run("create", "secret", "generic", "echo-token", "-n", ns, f"--from-literal=token={TOKEN}")
    apply_all(
        kubectl, tmp_path, ns, objects("foreign", "io.github.example/echo-foreign", registry, "foreign")[:2]
    )

    def blocked() -> dict[str, Any] | None:
        status = kubectl.get("bundle", "foreign", ns).get("status") or {}
        return next((i for i in status.get("issues") or [] if i["code"] == "binary_platform"), None)

    issue = wait_until(blocked, 120, "binary_platform in the Bundle's status.issues")
    assert issue["severity"] == "Blocking" and issue["path"] == "/mcps/0/artifact/platform"
    assert f"built for linux/{mcpb_servers.binary_foreign.arch}" in issue["message"]
    stalled = kubectl.wait_for_condition("bundleinstallation", "foreign", "Stalled", namespace=ns, timeout=60)
    found = condition(stalled, "Stalled")
    assert (
        found is not None
        and found["reason"] == "BundleInvalid"
        and "binary_platform" in str(found["message"])
    )
    assert platform_list_of(stalled) == []


def platform_list_of(installation: dict[str, Any]) -> list[Any]:
    """What the installation wrote (nothing, while its Bundle blocks)."""
    return list((installation.get("status") or {}).get("entities") or [])
