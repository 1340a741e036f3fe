"""Names agree: analyze passes a name exactly when the platform's API accepts it, because both
use the one definition in ``bundle_operator.document.names``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from bundle_operator.platform.models import (
    GatewayPromptPut,
    GatewayResourcePut,
    GatewayToolCuration,
    McpServerCreate,
    PromptArgument,
    SchemaFieldIn,
)
from bundle_operator.reference_platform import gateway_rules
from bundle_operator.reference_platform.problems import ApiError
from tests.unit.document.builders import BASE, analyze, only_issue

NAMES = [
    "plan",
    "plan.v2",
    "plan-v2",
    "plan_v2",
    "-plan",
    "_plan",
    "9plan",
    "Plan",
    "plan v2",
    "plan/v2",
    "plan__v2",
    "über",
    "",
    "p" * 128,
    "p" * 129,
    "plan\n",
]
RESOURCE_NAMES = [
    "guides/style",
    "style.md",
    "a/b/c",
    "_notes",
    ".hidden",
    "-dash",
    "a/../b",
    "a/./b",
    "a//b",
    "/abs",
    "trailing/",
    "sp ace",
    "x" * 500,
    "x" * 501,
]
ENV_NAMES = ["GITHUB_TOKEN", "X-Api-Key", "_PRIVATE", "1ST", "MY VAR", "A" * 128, "A" * 129, "é"]


def gateway_doc() -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["mcps"].append(
        {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": "https://w.example/mcp"}
    )
    doc["gateway"] = {
        "members": ["github", "weather"],
        "tools": [{"member": "weather", "tool": "forecast"}],
        "prompts": [{"name": "plan", "messages": [{"role": "user", "text": "Plan"}]}],
        "resources": [{"name": "guides/style", "content": "# Style"}],
    }
    return doc


def analyze_accepts(doc: dict[str, Any]) -> bool:
    preview = analyze(doc)
    assert preview.bundle is not None, [i.to_json() for i in preview.issues]
    return not any(i.code in ("gateway_invalid_name", "invalid_name") for i in preview.issues)


def platform_accepts(build: Callable[[], object]) -> bool:
    try:
        build()
    except (ValidationError, ApiError):
        return False
    return True


def test_a_prompt_named_plan_v2_is_blocked_by_analyze() -> None:
    # It used to pass analyze and fail install with a bare ValidationError.
    doc = gateway_doc()
    doc["gateway"]["prompts"][0]["name"] = "plan.v2"
    issue = only_issue(analyze(doc), "gateway_invalid_name")
    assert (issue.path, issue.blocking) == ("/gateway/prompts/0/name", True)


@pytest.mark.parametrize("name", NAMES)
def test_prompt_names_agree(name: str) -> None:
    doc = gateway_doc()
    doc["gateway"]["prompts"][0]["name"] = name

    def put() -> None:
        prompt = GatewayPromptPut(name=name, messages=[{"role": "user", "text": "Plan"}])  # type: ignore[list-item]
        gateway_rules.check_prompt(prompt, set())

    assert analyze_accepts(doc) == platform_accepts(put)


@pytest.mark.parametrize("name", NAMES)
def test_prompt_argument_names_agree(name: str) -> None:
    doc = gateway_doc()
    doc["gateway"]["prompts"][0]["arguments"] = [{"name": name}]
    assert analyze_accepts(doc) == platform_accepts(lambda: PromptArgument(name=name))


@pytest.mark.parametrize("name", NAMES)
def test_tool_override_names_agree(name: str) -> None:
    doc = gateway_doc()
    doc["gateway"]["tools"][0]["override_name"] = name
    assert analyze_accepts(doc) == platform_accepts(lambda: GatewayToolCuration(override_name=name))


@pytest.mark.parametrize("name", RESOURCE_NAMES)
def test_resource_names_agree(name: str) -> None:
    doc = gateway_doc()
    doc["gateway"]["resources"][0]["name"] = name
    doc["gateway"]["resources"].append({"name": "keep", "content": "x"})
    accepted = platform_accepts(lambda: GatewayResourcePut(name=name, content="x"))
    # The platform's resource route refuses '.' and '..' parts on top of the model's pattern
    # (tests/integration/platform covers it over HTTP).
    accepted = accepted and not any(part in (".", "..") for part in name.split("/"))
    assert analyze_accepts(doc) == accepted


@pytest.mark.parametrize("key", ["weather", "w" * 64, "w" * 65, "wea__ther", "weather_"])
def test_member_names_agree(key: str) -> None:
    doc = gateway_doc()
    doc["mcps"][1]["key"] = key
    doc["gateway"]["members"][1] = key
    doc["gateway"]["tools"][0]["member"] = key
    assert analyze_accepts(doc) == platform_accepts(lambda: gateway_rules.check_member_name(key))


@pytest.mark.parametrize("name", ENV_NAMES)
def test_env_and_header_names_agree(name: str) -> None:
    doc = gateway_doc()
    doc["mcps"][0]["env"] = {name: "x"}
    doc["mcps"][1]["headers"] = {name: "x"}
    accepted = platform_accepts(lambda: SchemaFieldIn(name=name))
    preview = analyze(doc)
    paths = sorted(i.path or "" for i in preview.issues if i.code == "invalid_name")
    assert (paths == []) == accepted
    if not accepted:
        assert len(paths) == 2 and paths[0].startswith("/mcps/0/env/")


@pytest.mark.parametrize("length", [1, 200, 201])
def test_mcp_and_agent_names_agree(length: int) -> None:
    doc = gateway_doc()
    doc["mcps"][0]["name"] = doc["agents"][0]["name"] = "n" * length
    accepted = platform_accepts(lambda: McpServerCreate(name="n" * length, type="command", command="npx"))
    assert analyze_accepts(doc) == accepted
