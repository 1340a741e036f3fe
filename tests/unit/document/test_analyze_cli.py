"""bundlectl analyze: exit codes, the JSON contract, the table, and the shipped examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bundle_operator.cli import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# The examples whose requirements need a mapping to analyze clean.
EXAMPLE_SUBSTITUTIONS = {
    "github-triage.yaml": ["--substitute", "model:gpt-4.1=gpt-5"],
    "building-office.yaml": ["--substitute", "knowledge_source:s3:acme-bylaws=s3:dormagen-bylaws"],
}


def write(tmp_path: Path, data: Any, name: str = "bundle.yaml") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_examples_exist() -> None:
    assert {p.name for p in EXAMPLES} >= {
        "github-triage.yaml",
        "postgres-data.yaml",
        "gateway-curated.yaml",
        "building-office.yaml",
    }


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_analyzes_clean_with_its_example_setup(
    capsys: pytest.CaptureFixture[str], example: Path
) -> None:
    setup_file = ROOT / "examples" / "setup" / example.name
    mapped = EXAMPLE_SUBSTITUTIONS.get(example.name, [])
    code, out, _ = run(
        capsys, "analyze", str(example), "--setup-file", str(setup_file), *mapped, "-o", "json"
    )
    report = json.loads(out)
    assert code == 0
    assert report["blocking"] is False
    assert [i for i in report["issues"] if i["severity"] == "blocking"] == []
    assert all(e["action"] == "CREATE" for e in report["entities"])


def test_a_substitute_requirement_without_a_mapping_blocks_offline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = ROOT / "examples" / "github-triage.yaml"
    setup_file = ROOT / "examples" / "setup" / "github-triage.yaml"
    code, out, _ = run(capsys, "analyze", str(example), "--setup-file", str(setup_file), "-o", "json")
    report = json.loads(out)
    assert code == 1
    assert {i["code"] for i in report["issues"] if i["severity"] == "blocking"} == {"substitution_required"}


def test_json_contract_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any]) -> None:
    doc["mcps"][0]["command"] = "./server"
    code, out, _ = run(capsys, "analyze", write(tmp_path, doc), "--setup", "github_token=x", "-o", "json")
    report = json.loads(out)
    assert code == 1  # bot_token is missing
    assert set(report) == {"bundle", "entities", "issues", "blocking"}
    assert set(report["bundle"]) == {"name", "version", "digest"}
    assert report["bundle"]["name"] == "triage-kit"
    assert report["bundle"]["digest"].startswith("sha256:")
    for entity in report["entities"]:
        assert set(entity) == {"kind", "key", "action", "reason"}
        assert entity["kind"] in {"mcp", "skill", "agent", "channel", "automation", "policy", "gateway"}
    for issue in report["issues"]:
        assert set(issue) == {"severity", "code", "path", "entity", "line", "message"}
        assert issue["severity"] in {"blocking", "warning"}
    kinds = [e["kind"] for e in report["entities"]]
    assert kinds == ["mcp", "skill", "agent", "channel", "automation", "policy"]
    skipped = report["entities"][0]
    assert (skipped["action"], skipped["key"]) == ("SKIPPED", "github")
    missing = [i for i in report["issues"] if i["code"] == "missing_setup"]
    assert missing and missing[0]["path"] == "/setup/1" and isinstance(missing[0]["line"], int)
    assert report["blocking"] is True


def test_invalid_document_gives_null_bundle_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "analyze", write(tmp_path, "name: [unclosed\n"), "-o", "json")
    report = json.loads(out)
    assert code == 1
    assert report["bundle"] is None
    assert report["entities"] == []
    assert report["issues"][0]["code"] == "invalid_document"
    assert report["issues"][0]["line"] is not None


def test_setup_file_and_flags_combine_and_flags_win(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any]
) -> None:
    setup = write(tmp_path, {"github_token": "from-file", "bot_token": ""}, "setup.yaml")
    path = write(tmp_path, doc)
    code, out, _ = run(capsys, "analyze", path, "--setup-file", setup, "-o", "json")
    assert code == 1 and "missing_setup" in out
    code, out, _ = run(
        capsys, "analyze", path, "--setup-file", setup, "--setup", "bot_token=1:2", "-o", "json"
    )
    assert code == 0, out


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze"],
        ["analyze", "BUNDLE", "--setup", "no-equals-sign"],
        ["analyze", "BUNDLE", "-o", "xml"],
        ["analyze", "/nonexistent/bundle.yaml"],
        ["analyze", "BUNDLE", "--setup-file", "/nonexistent/setup.yaml"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]) -> None:
    bundle = write(tmp_path, {"schema_version": "0.1.0", "name": "x"})
    argv = [bundle if a == "BUNDLE" else a for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    assert code == 2
    assert capsys.readouterr().err


def test_setup_file_that_is_not_a_mapping_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bundle = write(tmp_path, {"schema_version": "0.1.0", "name": "x"})
    setup = write(tmp_path, "- a\n- b\n", "setup.yaml")
    code, _, err = run(capsys, "analyze", bundle, "--setup-file", setup)
    assert code == 2
    assert "mapping" in err


def test_table_output_for_people(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any]
) -> None:
    code, out, _ = run(capsys, "analyze", write(tmp_path, doc), "--setup", "github_token=t")
    assert code == 1
    assert out.splitlines()[0].startswith("Bundle: triage-kit 1.0.0  sha256:")
    assert "KIND" in out and "ACTION" in out and "mcp         github" in out
    assert "BLOCKING  missing_setup" in out
    assert "Blocked: 1 blocking issue(s)" in out


def test_secret_values_never_reach_the_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any]
) -> None:
    secret = "ghp_SECRET_noprint9"  # too short for a context secret, so an issue is about it
    doc["mcps"].append(
        {
            "key": "notes",
            "name": "N",
            "type": "url",
            "endpoint_url": "https://n.example/mcp",
            "context_secret": "${setup.github_token}",
        }
    )
    for fmt in ("json", "table"):
        _, out, err = run(
            capsys,
            "analyze",
            write(tmp_path, doc),
            "--setup",
            f"github_token={secret}",
            "--setup",
            f"bot_token={secret}",
            "--setup",
            f"stray={secret}",
            "-o",
            fmt,
        )
        assert "context_secret_length" in out
        assert secret not in out + err


def test_stdin_and_the_installed_console_script(tmp_path: Path, doc: dict[str, Any]) -> None:
    bundlectl = Path(sys.executable).parent / "bundlectl"
    text = yaml.safe_dump(doc)
    done = subprocess.run(
        [
            str(bundlectl),
            "analyze",
            "-",
            "--setup",
            "github_token=t",
            "--setup",
            "bot_token=1:b",
            "-o",
            "json",
        ],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bundle"]["name"] == "triage-kit"


def bundlectl_bytes(argv: list[str | bytes], env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run the installed console script with raw argv bytes; stdout is the real, encoded output."""
    bundlectl = Path(sys.executable).parent / "bundlectl"
    done = subprocess.run([str(bundlectl), *argv], capture_output=True, check=False, env=env)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("fmt", ["json", "table"])
@pytest.mark.parametrize(
    "setup_text",
    [
        '"\\ud800": x\n',  # a lone surrogate (issue 15)
        '"a\\udcffb": x\n',
        '"\\x1b[2J\\x07bell": x\n',  # control characters
        '"\\ud83d\\ude00ok": x\n',  # a real (paired) character
        '"stray": "\\ud800"\n',  # a lone surrogate as the value of an unknown key
    ],
)
def test_setup_keys_that_are_not_text_never_tear_the_output(
    tmp_path: Path, doc: dict[str, Any], fmt: str, setup_text: str
) -> None:
    setup_file = tmp_path / "setup.yaml"
    setup_file.write_text(setup_text)
    argv: list[str | bytes] = [
        "analyze",
        write(tmp_path, doc),
        "--setup-file",
        str(setup_file),
        "--setup",
        "github_token=t",
        "--setup",
        "bot_token=1:b",
        "-o",
        fmt,
    ]
    code, out, err = bundlectl_bytes(argv)
    assert b"Traceback" not in err, err.decode(errors="replace")
    assert code == 0
    text = out.decode("utf-8")  # whole, valid UTF-8
    assert "\x1b" not in text and "\x07" not in text
    if fmt == "json":
        report = json.loads(text)
        (issue,) = [i for i in report["issues"] if i["code"] == "unknown_setup_key"]
        assert issue["path"] is None and issue["entity"].startswith("setup:")
        json.dumps(report, ensure_ascii=False).encode("utf-8")
    else:
        assert "unknown_setup_key" in text


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_setup_flag_key_with_bytes_that_are_not_utf8(tmp_path: Path, doc: dict[str, Any], fmt: str) -> None:
    argv: list[str | bytes] = [
        "analyze",
        write(tmp_path, doc),
        "--setup",
        b"k\xff\xfe=1",
        "--setup",
        "github_token=t",
        "--setup",
        b"bot_token=1:b\xff",
        "-o",
        fmt,
    ]
    code, out, err = bundlectl_bytes(argv)
    assert b"Traceback" not in err, err.decode(errors="replace")
    text = out.decode("utf-8")
    assert code == 1  # the value of bot_token is not text: blocking, and never printed
    if fmt == "json":
        report = json.loads(text)
        codes = {i["code"]: i for i in report["issues"]}
        assert codes["unknown_setup_key"]["entity"] == "setup:k\\xff\\xfe"
        assert codes["invalid_setup_value"]["path"] == "/setup/1"
    else:
        assert "k\\xff\\xfe" in text and "invalid_setup_value" in text


def test_output_is_whole_json_even_where_stdout_cannot_encode_the_text(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    argv: list[str | bytes] = ["analyze", write(tmp_path, doc), "--setup", "naïve✓😀=1", "-o", "json"]
    code, out, err = bundlectl_bytes(argv, env)
    assert b"Traceback" not in err, err.decode(errors="replace")
    assert code == 1
    report = json.loads(out.decode("ascii"))
    assert "setup:naïve✓😀" in [i["entity"] for i in report["issues"]]


def analyze_section() -> str:
    text = (ROOT / "docs" / "concepts" / "bundles.md").read_text()
    start = text.index("### The JSON output")
    return text[start : text.index("\n## ", start + 1)]


def test_the_docs_say_which_issues_have_no_path() -> None:
    section = " ".join(analyze_section().split())
    assert "An issue with no place in the document has `path: null`" in section
    assert "a YAML or JSON syntax error" in section
    assert "whose `entity` names the key (`setup:<key>`" in section


def test_issues_with_no_place_in_the_document_have_a_null_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any]
) -> None:
    code, out, _ = run(capsys, "analyze", write(tmp_path, "name: [x\nversion: 1\n"), "-o", "json")
    (issue,) = json.loads(out)["issues"]
    assert code == 1 and issue["code"] == "invalid_document"
    assert issue["path"] is None and issue["entity"] is None and issue["line"] == 2
    setup_file = tmp_path / "setup.yaml"
    setup_file.write_text("from_file: 1\n")
    argv = ["analyze", write(tmp_path, doc), "--setup-file", str(setup_file), "--setup", "from_flag=2"]
    code, out, _ = run(capsys, *argv, "--setup", "github_token=t", "--setup", "bot_token=1:b", "-o", "json")
    unknown = [i for i in json.loads(out)["issues"] if i["code"] == "unknown_setup_key"]
    assert code == 0
    placed = [(i["path"], i["entity"]) for i in unknown]
    assert placed == [(None, "setup:from_file"), (None, "setup:from_flag")]
