"""A bundle prompt built to make the placeholder pattern backtrack is judged at once, and the
platform answers /healthz meanwhile (issue 45: a prompt of "{{" and 2,500 spaces took 24.5 s, and
/healthz waited as long, because the pattern was cubic and held the only event loop)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from platform_builders import bundle
from platform_harness import TOKEN, PlatformProcess

from bundle_operator.platform.client import PlatformClient

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# Cubic work on 20,000 spaces would take days; linear work, microseconds.
SPACES = 20_000


async def test_a_prompt_of_braces_and_spaces_is_stored_and_health_answers_meanwhile(
    platform: PlatformProcess, client: PlatformClient, ws: str
) -> None:
    gateway = await bundle(client, ws)
    url = f"{platform.url}/v1/workspaces/{ws}/gateway-bundles/{gateway.id}/prompts/braces"
    text = "{{" + " " * SPACES
    body = {"name": "braces", "messages": [{"role": "user", "text": text}]}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(timeout=30) as http:
        put, health = await asyncio.gather(
            http.put(url, json=body, headers=headers), http.get(f"{platform.url}/healthz")
        )
        assert health.status_code == 200
        assert put.status_code == 201, put.text  # no placeholder in it: nothing to refuse
        assert (await http.get(url, headers=headers)).json()["messages"][0]["text"] == text


async def test_a_placeholder_with_spaces_inside_still_names_its_argument(
    platform: PlatformProcess, client: PlatformClient, ws: str
) -> None:
    gateway = await bundle(client, ws)
    url = f"{platform.url}/v1/workspaces/{ws}/gateway-bundles/{gateway.id}/prompts/plan"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    message = {"role": "user", "text": "Plan a day in {{  city  }} for {{mood}}."}
    async with httpx.AsyncClient(timeout=30) as http:
        undeclared = await http.put(
            url,
            json={"name": "plan", "arguments": [{"name": "city"}], "messages": [message]},
            headers=headers,
        )
        assert undeclared.status_code == 422 and "{{mood}}" in undeclared.json()["detail"]
        declared = {"name": "plan", "arguments": [{"name": "city"}, {"name": "mood"}], "messages": [message]}
        assert (await http.put(url, json=declared, headers=headers)).status_code == 201
