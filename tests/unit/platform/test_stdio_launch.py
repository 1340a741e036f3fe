"""Resolving the launch of an extracted bundle: its tree checked first, variables filled in, the
program found where its runtime says, and secrets only in the environment."""

from __future__ import annotations

import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bundle_operator.mcpb.extract import extract_file
from bundle_operator.mcpb.reader import running_platform
from bundle_operator.reference_platform.artifact_files import ExtractedArtifact
from bundle_operator.reference_platform.stdio_launch import LaunchRefused, LaunchSpec, resolve
from tests.unit.mcpb.craft import base_manifest, build


def extracted(
    tmp_path: Path, files: dict[str, bytes], modes: dict[str, int] | None = None
) -> ExtractedArtifact:
    archive = build(tmp_path / "bundle.mcpb", manifest=base_manifest(), files=files, modes=modes)
    done = extract_file(archive, tmp_path / "tree", platform=running_platform())
    return ExtractedArtifact(digest=done.lock, folder=done.path, tree_digest=done.tree_digest)


def spec_of(artifact: ExtractedArtifact, **changes: object) -> LaunchSpec:
    spec = LaunchSpec(
        workspace="w",
        instance_id="mci_1",
        name="weather",
        runtime="node",
        command="node",
        args=("${__dirname}/server/index.js", "--data=${DOCUMENTS}", "--sep=${/}", "${user_config.x}"),
        env=(("DATA", "${HOME}/data"), ("TOKEN", "${HOME}-not-a-variable-here")),
        artifact=artifact,
        secrets=("${HOME}-not-a-variable-here",),
        secret_names=frozenset({"TOKEN"}),
    )
    return replace(spec, **changes)  # type: ignore[arg-type]


@pytest.fixture
def artifact(tmp_path: Path) -> ExtractedArtifact:
    return extracted(
        tmp_path, {"server/index.js": b"console.log('hi')\n", "bin/run": b"#!/bin/sh\n"}, {"bin/run": 0o755}
    )


def test_the_folders_fill_in_and_a_secret_is_taken_as_written(
    artifact: ExtractedArtifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = tmp_path / "path" / "node"
    node.parent.mkdir()
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    monkeypatch.setenv("PATH", str(node.parent))
    launch = resolve(spec_of(artifact), tmp_path / "homes")
    home = tmp_path / "homes" / "mci_1"
    assert launch.command == str(node)
    assert launch.cwd == artifact.folder
    assert launch.args == [
        f"{artifact.folder}/server/index.js",
        f"--data={home}/Documents",
        "--sep=/",
        "${user_config.x}",
    ]
    assert launch.env["HOME"] == str(home) and launch.env["DATA"] == f"{home}/data"
    assert launch.env["TOKEN"] == "${HOME}-not-a-variable-here"
    for folder in (home, home / "Desktop", home / "Documents", home / "Downloads"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_node_missing_from_the_path_fails_with_a_clear_reason(
    artifact: ExtractedArtifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(LaunchRefused) as refused:
        resolve(spec_of(artifact), tmp_path / "homes")
    assert (refused.value.code, "node is not on the platform's PATH" in refused.value.reason) == (
        "failed",
        True,
    )


def test_python_runs_with_the_platforms_own_interpreter(artifact: ExtractedArtifact, tmp_path: Path) -> None:
    launch = resolve(spec_of(artifact, runtime="python", command="python3"), tmp_path / "homes")
    assert launch.command == sys.executable


def test_a_binary_runs_from_inside_its_folder_only(artifact: ExtractedArtifact, tmp_path: Path) -> None:
    launch = resolve(spec_of(artifact, runtime="binary", command="${__dirname}/bin/run"), tmp_path / "homes")
    assert (launch.command, launch.cwd) == (str(artifact.folder / "bin" / "run"), artifact.folder)
    for outside in ("${__dirname}/../bundle.mcpb", "${__dirname}", "/bin/sh", "${__dirname}/server/index.js"):
        with pytest.raises(LaunchRefused) as refused:
            resolve(spec_of(artifact, runtime="binary", command=outside), tmp_path / "homes")
        assert refused.value.code == "failed", outside


def test_a_changed_tree_is_refused_before_anything_is_resolved(
    artifact: ExtractedArtifact, tmp_path: Path
) -> None:
    (artifact.folder / "server" / "extra.js").write_text("added later\n")
    with pytest.raises(LaunchRefused) as refused:
        resolve(spec_of(artifact, runtime="python"), tmp_path / "homes")
    assert refused.value.code == "tree_changed"
    assert str(artifact.folder) not in str(refused.value)  # a gateway client never learns the disk layout
    assert not (tmp_path / "homes").exists()
