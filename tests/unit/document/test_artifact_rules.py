"""Command MCPs that run from an .mcpb archive: runtime, artifact and ${__dirname} (DESIGN.md §9.7)."""

from __future__ import annotations

from typing import Any

import pytest

from bundle_operator.document import parse_bundle_data
from bundle_operator.document.artifact_rules import check_artifacts
from bundle_operator.document.runtimes import host_platform
from tests.documents import bundle_document

DIGEST = "sha256:" + "ab" * 32


def _mcp(**fields: Any) -> dict[str, Any]:
    mcp: dict[str, Any] = {
        "key": "notes",
        "name": "Notes",
        "type": "command",
        "runtime": "node",
        "command": "node",
        "args": ["${__dirname}/server/index.js"],
        "artifact": {"digest": DIGEST, "entry": "server/index.js"},
    }
    mcp.update(fields)
    return {k: v for k, v in mcp.items() if v is not None}


def _issues(mcp: dict[str, Any]) -> list[tuple[str, str | None]]:
    parsed = parse_bundle_data(bundle_document("notes", mcps=[mcp]))
    return [(str(i.code), i.path) for i in parsed.issues if i.blocking]


def test_an_mcp_made_from_an_archive_is_accepted_and_says_what_will_run() -> None:
    parsed = parse_bundle_data(bundle_document("notes", mcps=[_mcp()]))
    assert parsed.bundle is not None and not parsed.skipped
    [issue] = parsed.issues
    assert (issue.severity, issue.code, issue.path) == ("warning", "runs_from_archive", "/mcps/0/artifact")
    assert issue.message == (
        "MCP 'notes' will run `node ${__dirname}/server/index.js` (node, entry server/index.js) "
        f"from the archive {DIGEST}, which install uploads to the platform"
    )


def test_a_binary_server_runs_its_program_from_the_unpacked_archive() -> None:
    artifact = {"digest": DIGEST, "entry": "bin/notes", "platform": host_platform()}
    mcp = _mcp(runtime="binary", command="${__dirname}/bin/notes", args=[], artifact=artifact)
    parsed = parse_bundle_data(bundle_document("notes", mcps=[mcp]))
    assert parsed.bundle is not None and not parsed.blocking and not parsed.skipped


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"runtime": None}, ("invalid_artifact", "/mcps/0/runtime")),
        ({"artifact": None}, ("invalid_artifact", "/mcps/0/runtime")),
        (
            {"artifact": {"digest": "sha256:ABC", "entry": "x.js"}},
            ("invalid_artifact", "/mcps/0/artifact/digest"),
        ),
        (
            {"artifact": {"digest": DIGEST, "entry": "../x.js"}},
            ("invalid_artifact", "/mcps/0/artifact/entry"),
        ),
        (
            {"artifact": {"digest": DIGEST, "entry": "/abs.js"}},
            ("invalid_artifact", "/mcps/0/artifact/entry"),
        ),
        ({"command": "python3"}, ("invalid_artifact", "/mcps/0/command")),
        ({"runtime": "binary", "command": "/usr/bin/notes"}, ("invalid_artifact", "/mcps/0/command")),
        ({"runtime": "binary", "command": "${__dirname}/../x"}, ("invalid_artifact", "/mcps/0/command")),
        (
            {"artifact": {"digest": DIGEST, "entry": "i.js", "platform": "linux/amd64"}},
            ("invalid_artifact", "/mcps/0/artifact/platform"),
        ),
    ],
)
def test_a_malformed_artifact_blocks_with_the_field_named(
    fields: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert expected in _issues(_mcp(**fields))


def test_dirname_means_nothing_without_an_artifact() -> None:
    mcp = _mcp(runtime=None, artifact=None, env={"DATA": "${__dirname}/data"})
    assert _issues(mcp) == [("invalid_artifact", "/mcps/0/args/0"), ("invalid_artifact", "/mcps/0/env/DATA")]


def test_a_binary_for_another_platform_blocks_and_says_which() -> None:
    artifact = {"digest": DIGEST, "entry": "bin/notes", "platform": "linux/riscv64"}
    mcp = _mcp(runtime="binary", command="${__dirname}/bin/notes", args=[], artifact=artifact)
    parsed = parse_bundle_data(bundle_document("notes", mcps=[mcp]))
    assert parsed.bundle is not None
    [issue] = [i for i in check_artifacts(parsed.bundle, "linux/amd64") if i.blocking]
    assert (issue.code, issue.path, issue.entity) == (
        "binary_platform",
        "/mcps/0/artifact/platform",
        "mcp:notes",
    )
    assert "built for linux/riscv64, and this platform is linux/amd64" in issue.message
    assert [i.code for i in check_artifacts(parsed.bundle, "linux/riscv64")] == ["runs_from_archive"]
