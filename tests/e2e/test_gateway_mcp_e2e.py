"""The gateway end to end with real peers: two MCP servers as members, a Bundle with a gateway
section, a BundleInstallation and two Endpoints applied with kubectl; the official MCP client
connects to each Endpoint's URL with the key from its Secret and sees what the bundle curates."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference

from bundle_operator.devcluster import Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import OperatorProcess, resource, wait_ready
from tests.integration.platform.platform_harness import PlatformProcess
from tests.mcp_members import Members, members_thread

pytestmark = pytest.mark.e2e

BUNDLE = "gw-peers"


def document(members: Members, forecast_description: str) -> dict[str, Any]:
    return bundle_document(
        BUNDLE,
        description="Weather and notes behind one endpoint.",
        mcps=[
            {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": members.url("weather")},
            {"key": "notes", "name": "Notes", "type": "url", "endpoint_url": members.url("notes")},
        ],
        gateway={
            "description": "Forecasts, alerts and notes for planning a day.",
            "members": ["weather", "notes"],
            "tools": [
                {
                    "member": "weather",
                    "tool": "forecast",
                    "override_name": "get_forecast",
                    "override_description": forecast_description,
                    # null removes the member's key: the CRD keeps nulls in this map (applied
                    # server-side below).
                    "override_annotations": {"openWorldHint": True, "title": None},
                },
                {"member": "weather", "tool": "echo", "enabled": False},
            ],
            "resources": [
                {"name": "guides/style", "title": "House style", "content": "# Style\n\nBe brief."}
            ],
            "prompts": [
                {
                    "name": "plan",
                    "title": "Plan a day",
                    "arguments": [
                        {"name": "city", "required": True},
                        {"name": "mood", "required": False, "values": ["calm", "busy", "Cheerful"]},
                    ],
                    "messages": [
                        {"role": "user", "text": "Plan {{city}} as a {{mood}} day."},
                        {"role": "user", "resource": "guides/style"},
                    ],
                }
            ],
        },
    )


def apply(
    kubectl: Kubectl, tmp_path: Path, namespace: str, obj: dict[str, Any], server_side: bool = False
) -> None:
    # Client-side `kubectl apply` drops nulls from what it sends (null means "delete" in its patch);
    # server-side apply keeps them, and the CRD keeps a null annotation override.
    path = tmp_path / f"{obj['kind']}-{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    kubectl.apply(path, namespace=namespace, server_side=server_side)


def secret_data(kubectl: Kubectl, name: str, namespace: str) -> dict[str, str]:
    secret = kubectl.get("secret", name, namespace)
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def connect(url: str, api_key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"})
    return Client(streamable_http_client(url, http_client=http), cache=None)


@pytest.fixture(scope="module")
def members() -> Iterator[Members]:
    with members_thread() as running:
        yield running


def wait_served(url: str, key: str, name: str, within: float = 60.0) -> None:
    """Until the endpoint serves ``name`` (discovery of the members runs after the install)."""

    async def served() -> bool:
        async with connect(url, key) as client:
            return name in {t.name for t in (await client.list_tools()).tools}

    wait_until(lambda: asyncio.run(served()) or None, within, f"{name} served at the endpoint")


def test_a_client_uses_the_gateway_of_an_installed_bundle(
    kubectl: Kubectl,
    operator: OperatorProcess,
    platform: PlatformProcess,
    namespace: str,
    tmp_path: Path,
    members: Members,
) -> None:
    kubectl.wait_for_condition("crd", "endpoints.bundle-operator.dev", "Established", timeout=30)
    suffix = namespace.rsplit("-", 1)[-1]
    bundle = resource("Bundle", BUNDLE, {"source": {"inline": document(members, "Forecast for a city.")}})
    apply(kubectl, tmp_path, namespace, bundle, server_side=True)
    installation = {"bundleRef": {"name": BUNDLE}, "workspace": namespace}
    apply(kubectl, tmp_path, namespace, resource("BundleInstallation", BUNDLE, installation))
    plain, chatgpt = f"peers-{suffix}", f"peers-gpt-{suffix}"
    for name, profile in ((plain, "Default"), (chatgpt, "ChatGPT")):
        spec = {
            "installationRef": {"name": BUNDLE},
            "profile": profile,
            "credentialsSecretName": f"{name}-key",
        }
        apply(kubectl, tmp_path, namespace, resource("Endpoint", name, spec))
    endpoint = wait_ready(kubectl, "bep", plain, namespace, timeout=90)
    wait_ready(kubectl, "bep", chatgpt, namespace, timeout=90)

    credentials = secret_data(kubectl, f"{plain}-key", namespace)
    url, key = credentials["url"], credentials["apiKey"]
    assert url == endpoint["status"]["url"]
    wait_served(url, key, "get_forecast")

    async def use_it() -> None:
        async with connect(url, key) as client:
            assert client.instructions == "Forecasts, alerts and notes for planning a day."
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"get_forecast", "weather__set_alert", "notes__add_note"}
            annotations = tools["get_forecast"].annotations
            assert annotations is not None
            assert annotations.model_dump(by_alias=True, exclude_none=True) == {
                "readOnlyHint": True,
                "openWorldHint": True,
            }
            assert tools["weather__set_alert"].annotations.destructive_hint is True  # type: ignore[union-attr]

            answer = await client.call_tool("get_forecast", {"city": "Oslo"})
            assert answer.content[0].text == "forecast for Oslo: sunny"  # type: ignore[union-attr]
            with pytest.raises(MCPError, match="disabled"):
                await client.call_tool("weather__echo", {"text": "hi"})

            own = await client.read_resource("bundle://resources/guides/style")
            assert own.contents[0].text == "# Style\n\nBe brief."  # type: ignore[union-attr]
            theirs = await client.read_resource("notes://today")
            assert theirs.contents[0].text == "buy milk"  # type: ignore[union-attr]
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            assert "bundle://resources/secret-note" not in listed

            rendered = await client.get_prompt("plan", {"city": "Bergen", "mood": "calm"})
            assert rendered.messages[0].content.text == "Plan Bergen as a calm day."  # type: ignore[union-attr]
            assert rendered.messages[1].content.resource.text == "# Style\n\nBe brief."  # type: ignore[union-attr]
            done = await client.complete(PromptReference(name="plan"), {"name": "mood", "value": "C"})
            assert done.completion.values == ["calm", "Cheerful"]

    asyncio.run(use_it())

    # The ChatGPT profile presents the write tool as a read.
    gpt = secret_data(kubectl, f"{chatgpt}-key", namespace)

    async def chatgpt_view() -> None:
        async with connect(gpt["url"], gpt["apiKey"]) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            alert = tools["weather__set_alert"].annotations
            assert alert is not None and alert.read_only_hint is True and alert.destructive_hint is None

    wait_served(gpt["url"], gpt["apiKey"], "get_forecast")
    asyncio.run(chatgpt_view())

    # The Endpoint reports what it serves and how its members are.
    def reported() -> dict[str, Any] | None:
        status = kubectl.get("bep", plain, namespace).get("status") or {}
        members_ok = [m["healthy"] for m in status.get("members", [])] == [True, True]
        return status if members_ok and "get_forecast" in status.get("presentedTools", []) else None

    status = wait_until(reported, 90, "healthy members and presented tools in the Endpoint's status")
    assert sorted(status["presentedTools"]) == ["get_forecast", "notes__add_note", "weather__set_alert"]

    # Changing an override in the Bundle reaches a connected client as tools/list_changed.
    async def follow_change() -> str | None:
        async with (
            connect(url, key) as client,
            client.listen(tools_list_changed=True) as subscription,
        ):
            events = subscription.__aiter__()
            changed = resource(
                "Bundle", BUNDLE, {"source": {"inline": document(members, "Seven-day forecast.")}}
            )
            await asyncio.to_thread(apply, kubectl, tmp_path, namespace, changed, True)
            await asyncio.wait_for(events.__anext__(), timeout=90)
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return tools["get_forecast"].description

    started = time.monotonic()
    assert asyncio.run(follow_change()) == "Seven-day forecast."
    print(f"Bundle override change to tools/list_changed at the client: {time.monotonic() - started:.2f} s")

    # A rotated key refuses the old one.
    kubectl.run(
        "annotate",
        "bep",
        plain,
        "-n",
        namespace,
        "bundle-operator.dev/rotate-key-requested-at=now-1",
        "--overwrite",
    )
    rotated = wait_until(
        lambda: ((k := secret_data(kubectl, f"{plain}-key", namespace)["apiKey"]) != key and k) or None,
        60,
        "a rotated key",
    )
    assert httpx.post(url, json={}, headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code == 401

    async def with_new_key() -> int:
        async with connect(url, rotated) as client:
            return len((await client.list_tools()).tools)

    assert asyncio.run(with_new_key()) == 3


def test_an_override_that_hides_a_member_tool_found_later_shows_in_the_statuses(
    kubectl: Kubectl,
    operator: OperatorProcess,
    platform: PlatformProcess,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Issue 42: discovery cannot be refused, so the override keeps the name (seed 002); the member
    tool it hides is reported in the installation's status issues and the Endpoint's status."""
    kubectl.wait_for_condition("crd", "endpoints.bundle-operator.dev", "Established", timeout=30)
    with members_thread() as members:  # its own: a tool is added to the weather member
        name = "gw-shadow"
        inline = bundle_document(
            name,
            mcps=[
                {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": members.url("weather")},
                {"key": "notes", "name": "Notes", "type": "url", "endpoint_url": members.url("notes")},
            ],
            gateway={
                "members": ["weather", "notes"],
                "tools": [{"member": "notes", "tool": "add_note", "override_name": "weather__storm"}],
            },
        )
        apply(kubectl, tmp_path, namespace, resource("Bundle", name, {"source": {"inline": inline}}))
        installation = {
            "bundleRef": {"name": name},
            "workspace": namespace,
            "driftPolicy": {"interval": "5s"},
        }
        apply(kubectl, tmp_path, namespace, resource("BundleInstallation", name, installation))
        endpoint = f"shadow-{namespace.rsplit('-', 1)[-1]}"
        spec = {"installationRef": {"name": name}, "credentialsSecretName": f"{endpoint}-key"}
        apply(kubectl, tmp_path, namespace, resource("Endpoint", endpoint, spec))
        wait_ready(kubectl, "bep", endpoint, namespace, timeout=90)
        members.add_tool_sync("weather", "storm", "Storm warnings")

        def issue() -> dict[str, Any] | None:
            status = kubectl.get("bi", name, namespace).get("status") or {}
            found = [
                i
                for i in (status.get("preview") or {}).get("issues") or []
                if i["code"] == "gateway_tool_shadowed"
            ]
            return found[0] if found else None

        shadowed = wait_until(issue, 90, "the shadowed tool in the installation's status.preview.issues")
        assert shadowed["severity"] == "Warning" and shadowed["path"] == "/gateway/tools/0/override_name"
        assert "weather__storm is not served" in shadowed["message"]

        def withheld() -> dict[str, Any] | None:
            status = kubectl.get("bep", endpoint, namespace).get("status") or {}
            # Both members' discoveries land one after the other: wait for the override's holder too.
            holder_served = "weather__storm" in status.get("presentedTools", [])
            return status if status.get("withheldTools") and holder_served else None

        status = wait_until(withheld, 90, "the shadowed tool in the Endpoint's status.withheldTools")
        [entry] = status["withheldTools"]
        assert entry["name"] == "weather__storm" and "notes__add_note" in entry["reason"]
        assert "weather__storm" in status["presentedTools"]  # the override's holder serves the name
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert "1 tools are not served (see status.withheldTools)" in ready["message"]
