"""Install failures tell the truth: an invalid bundle or setup value (the platform refused an
entity, 422) is told from a step that failed for another reason, with the entity and field that
failed, the platform's problem, and what the rollback deleted or could not delete."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.cli import main
from bundle_operator.engine.apply import InstallFailed
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Refused, Unavailable
from tests.documents import bundle_document
from tests.integration.engine.conftest import TOKEN
from tests.integration.engine.harness import arm_fault, clear_faults, install, parse, workspace_state
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DOC: dict[str, Any] = bundle_document(
    "fail-kit",
    setup=[{"key": "region", "label": "Region", "type": "string"}],
    mcps=[
        {"key": "docs", "name": "Docs", "type": "url", "endpoint_url": "https://docs.example.com/mcp"},
        {
            "key": "geo",
            "name": "Geo",
            "type": "url",
            "endpoint_url": "https://geo.example.com/mcp",
            "headers": {"X-Region": "${setup.region}"},
        },
    ],
    agents=[{"key": "bot", "name": "Fail Bot", "model": "gpt-5", "mcps": ["docs", "geo"]}],
)
GOOD = {"region": "eu"}
TOO_LONG = {"region": "e" * 9000}  # longer than any configuration value the platform takes
# Front matter the skill service refuses (its metadata is over 64 KiB) though it parses.
BIG_SKILL = (
    "---\nname: notes\ndescription: d\nmetadata:\n"
    + "".join(f"  k{i}: {'v' * 1000}\n" for i in range(70))
    + "---\nBody\n"
)


def with_big_skill() -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["skills"] = [{"key": "notes", "source_type": "inline", "content": BIG_SKILL}]
    doc["agents"][0]["skills"] = ["notes"]
    return doc


async def test_a_setup_value_the_api_cannot_take_is_bundle_invalid_and_names_the_entity_and_field(
    client: PlatformClient, ws: str
) -> None:
    before = await workspace_state(client, ws)
    with pytest.raises(InstallFailed) as failed:
        await install(client, ws, parse(DOC), TOO_LONG)
    exc = failed.value
    assert (exc.code, exc.entity) == ("bundle_invalid", "mcp:geo")
    assert exc.fields == ["headers.X-Region"]
    assert "headers.X-Region" in exc.detail and "eeee" not in exc.detail and "eeee" not in str(exc)
    # What this run created (the other MCP, and this one's server spec) was deleted again, and says so.
    assert sorted(r.split(" ")[0] for r in exc.rolled_back) == ["mcp:docs", "mcp:docs", "mcp:geo"]
    assert exc.rollback_failures == []
    assert await workspace_state(client, ws) == before


async def test_an_entity_the_platform_refuses_is_bundle_invalid_with_its_problem(
    client: PlatformClient, ws: str
) -> None:
    with pytest.raises(InstallFailed) as failed:
        await install(client, ws, parse(with_big_skill()), GOOD)
    exc = failed.value
    assert isinstance(exc.cause, Refused) and exc.cause.code == "limit_exceeded"
    assert (exc.code, exc.entity) == ("bundle_invalid", "skill:notes")
    assert exc.fields
    assert {r.split(" ")[0] for r in exc.rolled_back} == {"mcp:docs", "mcp:geo"}


async def test_a_failed_step_is_bundle_install_failed_and_names_the_entity(
    client: PlatformClient, ws: str
) -> None:
    await arm_fault(client, method="POST", path=f"/v1/workspaces/{ws}/agents", status=503, times=10)
    try:
        with pytest.raises(InstallFailed) as failed:
            await install(client, ws, parse(DOC), GOOD)
    finally:
        await clear_faults(client)
    exc = failed.value
    assert isinstance(exc.cause, Unavailable)
    assert (exc.code, exc.entity, exc.fields) == ("bundle_install_failed", "agent:bot", [])
    # Both MCPs (server spec and instance each) were created and deleted, newest first.
    assert len(exc.rolled_back) == 4
    assert {r.split(" ")[0] for r in exc.rolled_back} == {"mcp:docs", "mcp:geo"}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


@pytest.fixture
def cli_files(tmp_path: Path) -> tuple[Path, Path]:
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(yaml.safe_dump(with_big_skill(), sort_keys=False))
    setup = tmp_path / "setup.yaml"
    setup.write_text(yaml.safe_dump(GOOD))
    return bundle, setup


@pytest.fixture
def common(
    engine_platform: PlatformProcess, tmp_path: Path, ws: str, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The flags every install below passes; the platform's token comes from the environment."""
    monkeypatch.setenv("BUNDLE_PLATFORM_TOKEN", TOKEN)
    return ["--platform", engine_platform.url, "--workspace", ws, "--state", str(tmp_path / "state.json")]


def test_the_cli_reports_code_entity_problem_and_rollback(
    capsys: pytest.CaptureFixture[str], cli_files: tuple[Path, Path], common: list[str]
) -> None:
    bundle, setup = cli_files
    code, out = run_cli(capsys, "install", str(bundle), "--setup-file", str(setup), *common, "-o", "json")
    report = json.loads(out)
    assert code == 1
    assert report["code"] == "bundle_invalid"
    failure = report["failure"]
    assert failure["entity"] == "skill:notes" and failure["fields"]
    assert failure["problem"]["status"] == 422 and failure["problem"]["code"] == "limit_exceeded"
    assert failure["detail"] == failure["problem"]["detail"]
    assert failure["rolled_back"] and failure["rollback_failures"] == []
    refused = [i for i in report["issues"] if i["code"] == "install_refused"]
    assert len(refused) == 1
    assert (refused[0]["entity"], refused[0]["path"]) == ("skill:notes", "/skills/0")
    assert "v" * 50 not in out  # the value itself is never repeated
    code, text = run_cli(capsys, "install", str(bundle), "--setup-file", str(setup), *common)
    assert code == 1
    assert "Nothing would be written" not in text and "Nothing was written" not in text
    assert "Install failed (bundle_invalid) at skill:notes" in text
    assert "Rolled back: deleted" in text


def test_a_blocked_install_is_bundle_invalid_and_says_nothing_was_written(
    capsys: pytest.CaptureFixture[str], cli_files: tuple[Path, Path], common: list[str]
) -> None:
    bundle, _ = cli_files  # no setup: region is missing
    code, out = run_cli(capsys, "install", str(bundle), *common, "-o", "json")
    report = json.loads(out)
    assert (code, report["code"], report["failure"]) == (1, "bundle_invalid", None)
    code, text = run_cli(capsys, "install", str(bundle), *common)
    assert code == 1 and "Nothing was written." in text
