"""The docs command runner's parser of fenced blocks and its matcher of console output (tests/docs/)."""

from __future__ import annotations

from pathlib import Path

from tests.docs.blocks import commands, fenced_blocks, page_of, problems
from tests.docs.matcher import line_matches, mismatch, report

ROOT = Path(__file__).resolve().parents[3]


def _problems(text: str, page: str = "how-to/x.md") -> list[str]:
    return [str(p) for block in fenced_blocks(text, page) for p in problems(block, ROOT)]


# --- the parser ----------------------------------------------------------------------------------


def test_blocks_have_their_language_line_and_scene() -> None:
    text = "# T\n\n```yaml\na: 1\n```\n\n<!-- scene: cluster -->\n```console\n$ kubectl get ns\n```\n"
    yaml_block, console = fenced_blocks(text, "p.md")
    assert (yaml_block.lang, yaml_block.line, yaml_block.scene) == ("yaml", 3, "offline")
    assert (console.lang, console.line, console.scene, console.body) == (
        "console",
        8,
        "cluster",
        ("$ kubectl get ns",),
    )


def test_indented_tilde_blocks_inside_a_list_are_found_and_dedented() -> None:
    text = "1. Run:\n\n    <!-- scene: platform -->\n    ~~~sh\n    bundlectl list\n      --flag\n    ~~~\n"
    (block,) = fenced_blocks(text, "p.md")
    assert (block.lang, block.scene, block.line) == ("sh", "platform", 4)
    assert block.body == ("bundlectl list", "  --flag")


def test_a_fence_closes_only_on_its_own_character_and_length() -> None:
    text = "````md\n```sh\necho inner\n```\n````\n```sh\necho outer\n```\n"
    outer_md, sh = fenced_blocks(text, "p.md")
    assert outer_md.lang == "md" and outer_md.body == ("```sh", "echo inner", "```")
    assert (sh.line, sh.body) == (6, ("echo outer",))


def test_a_scene_comment_counts_only_on_the_line_right_before_the_fence() -> None:
    text = "<!-- scene: cluster -->\n\n```sh\ntrue\n```\n"
    (block,) = fenced_blocks(text, "p.md")
    assert block.scene == "offline"


def test_console_commands_continue_over_backslashes_and_own_the_lines_after_them() -> None:
    text = "```console\n$ bundlectl analyze \\\n    examples/a.yaml\nBundle: a\n\n$ echo done\ndone\n```\n"
    (block,) = fenced_blocks(text, "p.md")
    first, second = commands(block)
    assert (first.line, first.text, first.shown, first.shown_line) == (
        2,
        "bundlectl analyze \\\n    examples/a.yaml",
        ("Bundle: a", ""),
        4,
    )
    assert (second.line, second.text, second.shown) == (6, "echo done", ("done",))


def test_an_sh_block_is_one_script_shown_without_output() -> None:
    (block,) = fenced_blocks("```sh\n# note\nA=1\n\necho $A\n```\n", "p.md")
    (command,) = commands(block)
    assert (command.line, command.text, command.shown) == (2, "# note\nA=1\n\necho $A", None)


def test_another_shell_language_name_is_refused_with_its_page_line() -> None:
    for lang in ("bash", "shell", "shell-session", "zsh"):
        assert _problems(f"# T\n\n```{lang}\necho hi\n```\n") == [
            f"how-to/x.md:3: a shell block is `sh` or `console`, not `{lang}`"
        ]


def test_a_dollar_line_in_another_language_is_refused() -> None:
    assert _problems("```text\n$ kubectl get pods\n```\n") == [
        "how-to/x.md:1: a `text` block starts with `$ `: use `console`"
    ]
    assert _problems("```yaml\nkind: Bundle\n```\n") == []


def test_an_unknown_scene_is_refused() -> None:
    found = _problems("<!-- scene: clutser -->\n```sh\ntrue\n```\n")
    assert len(found) == 1 and found[0].startswith("how-to/x.md:2: unknown scene `clutser`")


def test_tested_by_needs_an_existing_test_that_mentions_the_page() -> None:
    image = "<!-- scene: tested-by tests/unit/test_image.py -->\n```sh\nmake image\n```\n"
    assert _problems(image, "how-to/image.md") == []
    assert _problems(image, "how-to/gitops.md") == [
        "how-to/gitops.md:2: `tested-by tests/unit/test_image.py`: "
        "that test does not mention docs/how-to/gitops.md"
    ]
    missing = "<!-- scene: tested-by tests/unit/test_nothing.py -->\n```sh\ntrue\n```\n"
    assert _problems(missing) == [
        "how-to/x.md:2: `tested-by tests/unit/test_nothing.py`: no such test file under tests/"
    ]


def test_a_console_block_must_open_with_a_command() -> None:
    assert _problems("```console\nBundle: a\n$ echo\n```\n") == [
        "how-to/x.md:1: a `console` block starts with its first `$ ` command line"
    ]


# --- the matcher ---------------------------------------------------------------------------------


def test_wildcards_match_any_text_within_a_line() -> None:
    assert line_matches("id: <...>", "id: mcp_123")
    assert line_matches("<...> ready in <...> s", "operator ready in 1.2 s")
    assert line_matches("a<...>b<...>c", "abc")
    assert not line_matches("id: <...>", "name: mcp_123")
    assert not line_matches("a<...>a", "a")  # the two ends may not share a character


def test_table_columns_match_however_wide_their_gaps_are() -> None:
    shown = "github-triage   True    Installed   <...>   acme"
    assert line_matches(shown, "github-triage   True    Installed   12s   acme")
    assert line_matches(shown, "github-triage     True      Installed      3m4s   acme")
    assert not line_matches(shown, "github-triage True Installed 12s acme")  # one space is no column gap
    assert not line_matches(shown, "github-triage   False   Installed   12s   acme")


def test_trailing_spaces_and_trailing_blank_lines_do_not_count() -> None:
    assert mismatch(["KIND  KEY   "], ["KIND  KEY", "", ""]) is None


def test_an_ellipsis_line_matches_any_number_of_lines() -> None:
    assert mismatch(["start", "...", "end"], ["start", "end"]) is None
    assert mismatch(["start", "...", "end"], ["start", "a", "b", "end"]) is None
    assert mismatch(["...", "end", "..."], ["a", "end", "b"]) is None
    assert mismatch(["start", "...", "end"], ["start", "a"]) is not None


def test_a_changed_line_is_found_where_it_differs() -> None:
    found = mismatch(["Bundle: a", "...", "Ready: nothing blocks"], ["Bundle: a", "x", "Blocked: 1 issue"])
    assert found is not None and found.shown_index == 2


def test_output_beyond_what_is_shown_is_a_mismatch() -> None:
    found = mismatch(["one"], ["one", "two"])
    assert found is not None and (found.shown_index, found.printed_line) == (1, "two")


def test_the_report_names_the_page_line_and_shows_a_diff() -> None:
    text = report(
        "how-to/x.md:10",
        "bundlectl list",
        ["BUNDLE  VERSION", "a       1.0.0"],
        11,
        ["BUNDLE  VERSION", "a       2.0.0"],
    )
    assert text is not None
    assert text.startswith(
        "how-to/x.md:10: `bundlectl list` printed other output than the page shows, from how-to/x.md:12:"
    )
    assert "  page shows: a       1.0.0\n  printed:    a       2.0.0" in text
    assert "-a       1.0.0\n+a       2.0.0" in text
    assert report("how-to/x.md:10", "true", ["..."], 11, []) is None


def test_a_scene_comment_away_from_its_fence_is_refused() -> None:
    text = "# T\n\n<!-- scene: platform -->\n\n```sh\ntrue\n```\n\n````md\n<!-- scene: cluster -->\n````\n"
    assert page_of("how-to/x.md", text).problems(ROOT, "docs") == [
        "how-to/x.md:3: a scene comment goes on the line right before the opening fence of its block"
    ]
