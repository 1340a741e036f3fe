"""bundlectl mcpb: the inspect JSON contract, exit codes, extract, check-tree and to-bundle."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.cli import main
from bundle_operator.document import ParsedBundle, parse_bundle_text
from bundle_operator.document.artifact_rules import check_artifacts
from bundle_operator.document.issues import Issue
from tests.documents import bundle_document

from .craft import (
    RawEntry,
    base_manifest,
    build,
    honest_entries,
    link_attr,
    make_signer,
    mcp_config,
    server,
    sign_bytes,
    write_zip,
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return build(tmp_path / "weather.mcpb")


def test_inspect_json_keeps_the_contract_exactly(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "signed.mcpb"
    path.write_bytes(sign_bytes(build(tmp_path / "plain.mcpb").read_bytes(), make_signer("ec")))
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "--platform", "linux", "-o", "json")
    assert code == 0
    report = json.loads(out)
    assert list(report) == ["verdict", "code", "reason", "sha256", "manifest", "signature", "setup"]
    assert (report["verdict"], report["code"], report["reason"]) == ("accepted", None, None)
    assert len(report["sha256"]) == 64
    assert list(report["manifest"]) == [
        "name",
        "version",
        "manifest_version",
        "server_type",
        "entry_point",
        "command",
        "args",
        "env",
        "platforms",
    ]
    assert report["manifest"]["command"] == "node"
    assert list(report["signature"]) == ["status", "subject", "fingerprint_sha256"]
    assert report["signature"]["status"] == "signed"
    assert report["signature"]["subject"] == "O=Example Org,CN=Weather Publisher"
    assert report["setup"] == [
        {"key": "api_key", "label": "API key", "type": "secret", "required": True, "sensitive": True},
        {"key": "units", "label": "Units", "type": "string", "required": False, "sensitive": False},
    ]


def test_inspect_refused_exits_1_with_code_and_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "link.mcpb"
    path.write_bytes(
        write_zip([*honest_entries(), RawEntry("x", b"/etc", method=0, external_attr=link_attr())])
    )
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "-o", "json")
    report = json.loads(out)
    assert code == 1
    assert (report["verdict"], report["code"], report["manifest"], report["setup"]) == (
        "refused",
        "entry_link",
        None,
        [],
    )
    assert report["signature"] == {"status": "unsigned", "subject": None, "fingerprint_sha256": None}


def test_a_manifest_that_breaks_the_json_parser_still_gets_the_json_contract(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = build(tmp_path / "deep.mcpb", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "-o", "json")
    report = json.loads(out)
    assert (code, report["verdict"], report["code"]) == (1, "refused", "manifest_too_deep")


def test_inspect_checks_the_platform_asked_for(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = build(tmp_path / "mac.mcpb", base_manifest(compatibility={"platforms": ["darwin"]}))
    assert run(capsys, "mcpb", "inspect", str(path), "--platform", "darwin")[0] == 0
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "--platform", "linux")
    assert code == 1
    assert out.startswith("refused (platform): the bundle supports darwin, not linux")


def test_a_not_runnable_bundle_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    uv = server(type="uv", entry_point="main.py", mcp_config={"command": "uv", "args": ["run", "main.py"]})
    path = build(tmp_path / "uv.mcpb", base_manifest(manifest_version="0.4", server=uv), {"main.py": b""})
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "-o", "json")
    assert (code, json.loads(out)["verdict"]) == (0, "not_runnable")


def test_inspect_text_states_who_signed_and_that_nobody_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "signed.mcpb"
    path.write_bytes(sign_bytes(build(tmp_path / "plain.mcpb").read_bytes(), make_signer("rsa")))
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "--platform", "linux")
    assert code == 0
    assert "signature: signed by O=Example Org,CN=Weather Publisher" in out
    assert "nobody checked that this name belongs to whoever made the bundle" in out


def test_inspect_writes_nothing(capsys: pytest.CaptureFixture[str], archive: Path) -> None:
    before = sorted(p.name for p in archive.parent.iterdir())
    run(capsys, "mcpb", "inspect", str(archive))
    assert sorted(p.name for p in archive.parent.iterdir()) == before


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(capsys, "mcpb", "inspect", str(tmp_path / "missing.mcpb"))[0] == 2
    with pytest.raises(SystemExit) as exc:
        main(["mcpb", "inspect", "x.mcpb", "--platform", "beos"])
    assert exc.value.code == 2


def test_extract_prints_the_lock_and_tree_digest(capsys: pytest.CaptureFixture[str], archive: Path) -> None:
    dest = archive.parent / "out"
    code, out, _ = run(capsys, "mcpb", "extract", str(archive), str(dest), "-o", "json")
    assert code == 0
    result = json.loads(out)
    assert result["dir"] == str(dest)
    assert result["lock"].startswith("sha256:") and result["tree_digest"].startswith("sha256:")
    assert (dest / "manifest.json").is_file()
    assert run(capsys, "mcpb", "check-tree", str(dest), result["tree_digest"])[0] == 0
    (dest / "server/index.js").write_text("changed")
    code, _, err = run(capsys, "mcpb", "check-tree", str(dest), result["tree_digest"])
    assert code == 1
    assert "refused (tree_changed)" in err


def test_extract_of_a_refused_archive_exits_1_and_leaves_dir_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "evil.mcpb"
    path.write_bytes(write_zip([*honest_entries(), RawEntry("../../evil", b"x")]))
    code, _, err = run(capsys, "mcpb", "extract", str(path), str(tmp_path / "out"))
    assert code == 1
    assert "refused (entry_path)" in err
    assert not (tmp_path / "out").exists()


def _to_bundle(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, Any, str]:
    code, out, err = run(capsys, "mcpb", "to-bundle", str(path), "--platform", "linux", *extra)
    return code, out, err


def test_to_bundle_prints_a_document_the_bundle_parser_accepts(
    capsys: pytest.CaptureFixture[str], archive: Path
) -> None:
    code, out, err = _to_bundle(capsys, archive, "--root", "/srv/mcpb/weather")
    assert (code, err) == (0, "")
    parsed = parse_bundle_text(out)
    assert parsed.bundle is not None, parsed.issues
    assert parsed.issues == [] and parsed.skipped == {}
    assert yaml.safe_load(out) == bundle_document(
        "weather",
        version="1.2.0",
        description="Forecasts for a city",
        setup=[
            {
                "key": "api_key",
                "label": "API key",
                "type": "secret",
                "required": True,
                "description": "Key for the weather service",
            },
            {
                "key": "units",
                "label": "Units",
                "type": "string",
                "required": False,
                "description": "metric or imperial",
                "default": "metric",
            },
        ],
        mcps=[
            {
                "key": "weather",
                "name": "Weather",
                "type": "command",
                "command": "node",
                "args": ["/srv/mcpb/weather/server/index.js", "--units=${setup.units}"],
                "env": {"WEATHER_API_KEY": "${setup.api_key}"},
            }
        ],
    )


def test_to_bundle_refers_to_the_archive_and_serves_it_through_a_gateway_by_default(
    capsys: pytest.CaptureFixture[str], archive: Path
) -> None:
    import hashlib

    code, out, err = _to_bundle(capsys, archive, "-o", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    [mcp] = doc["mcps"]
    assert mcp["runtime"] == "node"
    assert mcp["artifact"] == {"digest": f"sha256:{sha}", "entry": "server/index.js"}
    # The platform unpacks the archive where it likes: no disk path is written, only ${__dirname}.
    assert (mcp["command"], mcp["args"][0]) == ("node", "${__dirname}/server/index.js")
    assert "/var/lib" not in out
    assert doc["gateway"] == {"description": "Forecasts for a city", "members": ["weather"]}
    parsed = parse_bundle_text(out)
    assert parsed.bundle is not None and not parsed.skipped
    assert [i.code for i in parsed.issues] == ["runs_from_archive"]


def analyze_for(parsed: ParsedBundle, platform: str) -> list[Issue]:
    """The artifact issues of a parsed document on a platform of the given OS and architecture."""
    assert parsed.bundle is not None
    return check_artifacts(parsed.bundle, platform)


def _elf_head(machine: int) -> bytes:
    # A 64-bit little-endian ELF header up to e_machine: what the reader looks at.
    return b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00" + machine.to_bytes(2, "little") + bytes(44)


def _binary_bundle(tmp_path: Path, program: bytes) -> Path:
    manifest = base_manifest(
        server=mcp_config(command="${__dirname}/bin/weather", args=["--dir", "${HOME}/w"]),
        name="weather tool",
    )
    manifest["server"]["type"], manifest["server"]["entry_point"] = "binary", "bin/weather"
    return build(tmp_path / "bin.mcpb", manifest, {"bin/weather": program}, {"bin/weather": 0o755})


def test_a_binary_bundle_names_the_platform_its_program_was_built_for(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _to_bundle(capsys, _binary_bundle(tmp_path, _elf_head(0xB7)))
    assert code == 0 and "SKIPPED" not in err
    mcp = yaml.safe_load(out)["mcps"][0]
    assert (mcp["runtime"], mcp["command"]) == ("binary", "${__dirname}/bin/weather")
    assert mcp["artifact"]["entry"] == "bin/weather" and mcp["artifact"]["platform"] == "linux/arm64"
    parsed = parse_bundle_text(out)
    assert parsed.bundle is not None and not parsed.skipped
    [issue] = [i for i in analyze_for(parsed, "linux/amd64") if i.blocking]
    assert (issue.code, issue.path) == ("binary_platform", "/mcps/0/artifact/platform")
    assert "built for linux/arm64, and this platform is linux/amd64" in issue.message
    assert not [i for i in analyze_for(parsed, "linux/arm64") if i.blocking]


def test_a_binary_whose_format_is_unknown_converts_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _to_bundle(capsys, _binary_bundle(tmp_path, b"#!/bin/sh\necho hi\n"))
    assert code == 0
    assert "not a known executable format" in err
    assert "platform" not in yaml.safe_load(out)["mcps"][0]["artifact"]


def test_a_binary_bundle_unpacked_by_hand_converts_with_a_warning_that_the_analyzer_skips_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _binary_bundle(tmp_path, b"\x7fELF")
    code, out, err = _to_bundle(capsys, path, "--root", "/srv/w")
    assert code == 0
    assert "warning: the MCP will be SKIPPED by the analyzer" in err
    assert "the bundle is named 'weather-tool'" in err
    doc = yaml.safe_load(out)
    assert doc["name"] == "weather-tool"
    assert doc["mcps"][0]["key"] == "weather_tool"
    assert doc["mcps"][0]["command"] == "/srv/w/bin/weather"
    parsed = parse_bundle_text(out)
    assert parsed.bundle is not None
    assert list(parsed.skipped) == ["mcp:weather_tool"]
    assert not parsed.blocking, parsed.issues


def test_python_bundles_keep_their_runtime_and_search_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = mcp_config(
        command="python3",
        args=["${__dirname}/main.py"],
        env={"PYTHONPATH": "${__dirname}/lib", "KEY": "${user_config.api_key}"},
    )
    cfg["type"], cfg["entry_point"] = "python", "main.py"
    path = build(tmp_path / "py.mcpb", base_manifest(server=cfg), {"main.py": b"", "lib/m.py": b""})
    code, out, _ = _to_bundle(capsys, path, "--root", "/srv/py")
    mcp = yaml.safe_load(out)["mcps"][0]
    assert (code, mcp["command"], mcp["args"]) == (0, "python3", ["/srv/py/main.py"])
    assert mcp["env"] == {"PYTHONPATH": "/srv/py/lib", "KEY": "${setup.api_key}"}
    assert not parse_bundle_text(out).blocking


def test_folder_variables_stay_for_the_platform_to_resolve_at_launch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The converting machine's home must not leak into the document: the server runs elsewhere.
    monkeypatch.setenv("HOME", "/root")
    user_config = {
        "data": {"type": "directory", "title": "Data", "description": "d", "default": "${HOME}/data"},
        "out": {"type": "string", "title": "Out", "description": "o", "default": "${DOWNLOADS}"},
    }
    cfg = mcp_config(
        args=["${__dirname}/server/index.js", "--data=${user_config.data}", "--cache=${DESKTOP}/c"],
        env={"OUT": "${user_config.out}", "DOCS": "${DOCUMENTS}"},
    )
    path = build(tmp_path / "home.mcpb", base_manifest(user_config=user_config, server=cfg))
    code, out, _ = _to_bundle(capsys, path, "--root", "/srv/h")
    doc = yaml.safe_load(out)
    assert code == 0
    assert [(f["key"], f["default"]) for f in doc["setup"]] == [
        ("data", "${HOME}/data"),
        ("out", "${DOWNLOADS}"),
    ]
    assert doc["mcps"][0]["args"] == [
        "/srv/h/server/index.js",
        "--data=${setup.data}",
        "--cache=${DESKTOP}/c",
    ]
    assert doc["mcps"][0]["env"] == {"OUT": "${setup.out}", "DOCS": "${DOCUMENTS}"}
    assert "/root" not in out
    assert not parse_bundle_text(out).blocking


def test_to_bundle_refuses_what_inspect_does_not_accept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    uv = server(type="uv", entry_point="main.py", mcp_config={"command": "uv"})
    path = build(tmp_path / "uv.mcpb", base_manifest(manifest_version="0.4", server=uv), {"main.py": b""})
    code, out, err = _to_bundle(capsys, path)
    assert (code, out) == (1, "")
    assert "refused (uv_not_runnable)" in err


def test_to_bundle_drops_a_version_that_is_not_semver(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = build(tmp_path / "v.mcpb", base_manifest(version="2024.1"))
    code, out, err = _to_bundle(capsys, path)
    assert code == 0 and "version" not in yaml.safe_load(out)
    assert "is not semver" in err


def test_inspect_text_escapes_everything_the_archive_or_certificate_says(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = base_manifest(name="weather\x1b[31m", version="1.0.0\nsignature: signed by Anthropic")
    manifest["user_config"]["units"]["title"] = "Units\x1b[2K"
    plain = build(tmp_path / "plain.mcpb", manifest)
    path = tmp_path / "signed.mcpb"
    path.write_bytes(sign_bytes(plain.read_bytes(), make_signer("ec", common_name="Evil\n  trusted\x1b[2K")))
    code, out, _ = run(capsys, "mcpb", "inspect", str(path), "--platform", "linux")
    assert code == 0
    assert "\x1b" not in out
    assert [line for line in out.splitlines() if line.startswith("signature:")] == [
        "signature: signed by O=Example Org,CN=Evil\\n  trusted\\x1b[2K"
    ]
    assert "bundle: weather\\x1b[31m 1.0.0\\nsignature: signed by Anthropic (manifest" in out
    assert "Units\\x1b[2K" in out


def test_inspect_of_a_pipe_is_refused_at_once_with_the_json_contract(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pipe = tmp_path / "pipe.mcpb"
    os.mkfifo(pipe)
    code, out, _ = run(capsys, "mcpb", "inspect", str(pipe), "-o", "json")
    report = json.loads(out)
    assert (code, report["verdict"], report["code"], report["sha256"]) == (1, "refused", "not_a_file", "")
    code, out, _ = run(capsys, "mcpb", "inspect", str(pipe))
    assert (code, out.splitlines()[0]) == (
        1,
        "refused (not_a_file): the archive is not a regular file (a device, pipe, socket or folder)",
    )
    assert "sha256" not in out
