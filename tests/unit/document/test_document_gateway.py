"""Gateway rules of seed 002 that the document decides on its own."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.document.builders import action_of, analyze, issues_with, only_issue


@pytest.fixture
def gw(doc: dict[str, Any]) -> dict[str, Any]:
    doc["mcps"].append(
        {"key": "weather", "name": "Weather", "type": "url", "endpoint_url": "https://w.example/mcp"}
    )
    doc["gateway"] = {
        "description": "Tools for triage and weather",
        "members": ["github", "weather"],
        "tools": [
            {"member": "weather", "tool": "forecast", "override_name": "get_forecast"},
            {"member": "github", "tool": "list_issues"},
        ],
        "prompts": [
            {
                "name": "plan",
                "arguments": [{"name": "city", "required": True}],
                "messages": [
                    {"role": "user", "text": "Plan {{city}}"},
                    {"role": "user", "resource": "guides/style"},
                ],
            }
        ],
        "resources": [{"name": "guides/style", "content": "# Style"}],
    }
    return doc


def test_a_valid_gateway_is_created_last(gw: dict[str, Any]) -> None:
    preview = analyze(gw)
    assert preview.issues == []
    assert preview.entities[-1].entity == "gateway:gateway"
    assert action_of(preview, "gateway:gateway") == ("CREATE", None)


@pytest.mark.parametrize("name", ["get forecast", "get.forecast", "über", ""])
def test_override_name_pattern(gw: dict[str, Any], name: str) -> None:
    gw["gateway"]["tools"][0]["override_name"] = name
    issue = only_issue(analyze(gw), "gateway_invalid_name")
    assert issue.path == "/gateway/tools/0/override_name"


def test_override_name_conflicts_with_a_presented_prefixed_name(gw: dict[str, Any]) -> None:
    gw["gateway"]["tools"][0]["override_name"] = "github__list_issues"
    issue = only_issue(analyze(gw), "gateway_name_conflict")
    assert issue.path == "/gateway/tools/0/override_name"
    assert "github__list_issues" in issue.message
    assert "/gateway/tools/1" in issue.message  # names the holder


def test_two_overrides_cannot_share_a_name(gw: dict[str, Any]) -> None:
    gw["gateway"]["tools"][1]["override_name"] = "get_forecast"
    issue = only_issue(analyze(gw), "gateway_name_conflict")
    assert issue.path == "/gateway/tools/1/override_name"
    assert "weather__forecast" in issue.message


def test_override_equal_to_its_own_prefixed_name_is_fine(gw: dict[str, Any]) -> None:
    gw["gateway"]["tools"][0]["override_name"] = "weather__forecast"
    assert analyze(gw).issues == []


def test_tool_of_a_non_member_is_refused(gw: dict[str, Any]) -> None:
    gw["gateway"]["members"] = ["weather"]
    issue = only_issue(analyze(gw), "unknown_reference")
    assert issue.path == "/gateway/tools/1/member"


def test_member_listed_twice_and_tool_curated_twice(gw: dict[str, Any]) -> None:
    gw["gateway"]["members"].append("weather")
    gw["gateway"]["tools"].append({"member": "github", "tool": "list_issues", "enabled": False})
    paths = sorted(i.path for i in issues_with(analyze(gw), "gateway_duplicate"))
    assert paths == ["/gateway/members/2", "/gateway/tools/2"]


def test_member_key_with_double_underscore_is_refused(gw: dict[str, Any]) -> None:
    gw["mcps"][1]["key"] = "wea__ther"
    gw["gateway"]["members"][1] = "wea__ther"
    gw["gateway"]["tools"][0]["member"] = "wea__ther"
    assert only_issue(analyze(gw), "gateway_invalid_name").path == "/gateway/members/1"


def test_bundle_prompt_name_cannot_contain_double_underscore(gw: dict[str, Any]) -> None:
    gw["gateway"]["prompts"][0]["name"] = "weather__plan"
    assert only_issue(analyze(gw), "gateway_invalid_name").path == "/gateway/prompts/0/name"


def test_placeholder_must_be_a_declared_argument(gw: dict[str, Any]) -> None:
    gw["gateway"]["prompts"][0]["messages"][0]["text"] = "Plan {{city}} in {{ season }}"
    issue = only_issue(analyze(gw), "prompt_undeclared_argument")
    assert issue.path == "/gateway/prompts/0/messages/0/text"
    assert "{{season}}" in issue.message


def test_embedded_resource_must_exist(gw: dict[str, Any]) -> None:
    gw["gateway"]["prompts"][0]["messages"][1]["resource"] = "guides/missing"
    issue = only_issue(analyze(gw), "prompt_unknown_resource")
    assert issue.path == "/gateway/prompts/0/messages/1/resource"


def test_message_needs_exactly_one_of_text_or_resource(gw: dict[str, Any]) -> None:
    gw["gateway"]["prompts"][0]["messages"].append({"role": "user"})
    gw["gateway"]["prompts"][0]["messages"].append({"role": "user", "text": "x", "resource": "guides/style"})
    paths = sorted(i.path for i in issues_with(analyze(gw), "prompt_invalid_message"))
    assert paths == ["/gateway/prompts/0/messages/2", "/gateway/prompts/0/messages/3"]


@pytest.mark.parametrize("name", ["/abs", "a//b", "a/../b", "trailing/", "sp ace"])
def test_resource_names(gw: dict[str, Any], name: str) -> None:
    gw["gateway"]["resources"].append({"name": name, "content": "x"})
    assert only_issue(analyze(gw), "gateway_invalid_name").path == "/gateway/resources/1/name"


def test_duplicate_prompt_and_resource_names(gw: dict[str, Any]) -> None:
    gw["gateway"]["prompts"].append(dict(gw["gateway"]["prompts"][0]))
    gw["gateway"]["resources"].append({"name": "guides/style", "content": "again"})
    paths = sorted(i.path for i in issues_with(analyze(gw), "gateway_duplicate"))
    assert paths == ["/gateway/prompts/1", "/gateway/resources/1"]


def prompt(index: int, text: str = "hi") -> dict[str, Any]:
    return {"name": f"p{index}", "messages": [{"role": "user", "text": text}]}


@pytest.mark.parametrize(("count", "ok"), [(100, True), (101, False)])
def test_at_most_100_prompts(gw: dict[str, Any], count: int, ok: bool) -> None:
    gw["gateway"]["prompts"] = [prompt(i) for i in range(count)]
    found = issues_with(analyze(gw), "gateway_limit")
    assert (not found) == ok
    if found:
        assert found[0].path == "/gateway/prompts"
        assert "100" in found[0].message


@pytest.mark.parametrize(("count", "ok"), [(200, True), (201, False)])
def test_at_most_200_resources(gw: dict[str, Any], count: int, ok: bool) -> None:
    gw["gateway"]["prompts"] = []
    gw["gateway"]["resources"] = [{"name": f"r{i}", "content": "x"} for i in range(count)]
    found = issues_with(analyze(gw), "gateway_limit")
    assert (not found) == ok


@pytest.mark.parametrize(("size", "ok"), [(64 * 1024, True), (64 * 1024 + 1, False)])
def test_prompt_text_at_most_64_kib(gw: dict[str, Any], size: int, ok: bool) -> None:
    gw["gateway"]["prompts"].append(
        {
            "name": "long",
            "messages": [
                {"role": "user", "text": "a" * (size - 10)},
                {"role": "assistant", "text": "b" * 10},
            ],
        }
    )
    found = issues_with(analyze(gw), "gateway_limit")
    assert (not found) == ok
    if found:
        assert found[0].path == "/gateway/prompts/1/messages"


@pytest.mark.parametrize(("size", "ok"), [(256 * 1024, True), (256 * 1024 + 1, False)])
def test_resource_at_most_256_kib_counting_utf8_bytes(gw: dict[str, Any], size: int, ok: bool) -> None:
    gw["gateway"]["resources"].append({"name": "big", "content": "é" * (size // 2) + "x" * (size % 2)})
    found = issues_with(analyze(gw), "gateway_limit")
    assert (not found) == ok
    if found:
        assert found[0].path == "/gateway/resources/1/content"


def test_all_resources_together_at_most_4_mib(gw: dict[str, Any]) -> None:
    chunk = "x" * (256 * 1024)
    gw["gateway"]["resources"] = [{"name": f"r{i}", "content": chunk} for i in range(16)]
    gw["gateway"]["prompts"] = []
    assert not issues_with(analyze(gw), "gateway_limit")
    gw["gateway"]["resources"].append({"name": "one_more", "content": "y"})
    issue = only_issue(analyze(gw), "gateway_limit")
    assert issue.path == "/gateway/resources"
    assert "4 MiB" in issue.message


def test_member_curation_must_name_members(gw: dict[str, Any]) -> None:
    gw["gateway"]["member_prompts"] = [{"member": "slack", "name": "x"}]
    gw["gateway"]["member_resources"] = [
        {"member": "weather", "uri": "w://a"},
        {"member": "weather", "uri": "w://a"},
    ]
    preview = analyze(gw)
    assert only_issue(preview, "unknown_reference").path == "/gateway/member_prompts/0/member"
    assert only_issue(preview, "gateway_duplicate").path == "/gateway/member_resources/1"


def test_skipped_member_warns_but_gateway_is_created(gw: dict[str, Any]) -> None:
    gw["mcps"][0]["command"] = "./local-server"
    preview = analyze(gw)
    assert action_of(preview, "gateway:gateway") == ("CREATE", None)
    assert any(i.entity == "gateway:gateway" for i in issues_with(preview, "dependency_skipped"))
    assert not preview.blocking


def test_member_key_ending_with_underscore_is_refused(gw: dict[str, Any]) -> None:
    # 'a_' + '__' + 'x' would read back as member 'a', tool '_x'.
    gw["mcps"][1]["key"] = "weather_"
    gw["gateway"]["members"][1] = "weather_"
    gw["gateway"]["tools"][0]["member"] = "weather_"
    assert only_issue(analyze(gw), "gateway_invalid_name").path == "/gateway/members/1"
