"""The fenced blocks of a Markdown page, their scenes, and the page convention's checks."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SHELL = ("sh", "console")
# Shell languages under another name: the runner would not see them, so a page may not use them.
OTHER_SHELLS = ("bash", "shell", "shell-session", "zsh")
SCENES = ("offline", "platform", "cluster", "checkout")
TESTED_BY = "tested-by"

_FENCE = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)")
_SCENE = re.compile(r"[ \t>]*<!--[ \t]*scene:(?P<value>[^>]*)-->[ \t]*")
_JOIN = re.compile(r"""["'][ \t]*/[ \t]*["']""")


@dataclass(frozen=True)
class Problem:
    """A place where a page breaks the convention."""

    page: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is the opening fence's (1-based), ``body`` its dedented lines."""

    page: str
    line: int
    lang: str
    scene: str  # a name of SCENES, "tested-by tests/....py", or what an unknown comment said
    scene_given: bool
    body: tuple[str, ...]
    end: int = 0  # the closing fence's line (past the page's last line when it is not closed)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def tested_by(self) -> str | None:
        """The test file a `tested-by` scene names."""
        if self.scene.startswith(TESTED_BY + " "):
            return self.scene.removeprefix(TESTED_BY).strip()
        return None


@dataclass(frozen=True)
class Command:
    """One command of a block: its page line, its text, and the output a console block shows."""

    line: int
    text: str
    shown: tuple[str, ...] | None  # None: an sh block shows no output
    shown_line: int  # the page line of the first shown output line


def _dedent(line: str, indent: int) -> str:
    """A body line without the opening fence's indentation (less when it has less)."""
    cut = 0
    while cut < indent and cut < len(line) and line[cut] in " \t":
        cut += 1
    return line[cut:]


def fenced_blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a page, in page order; an unclosed one runs to the end of the page."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.fullmatch(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        indent = len(opening["indent"])
        info = opening["info"].strip()
        lang = info.split()[0].lower() if info else ""
        scene_match = _SCENE.fullmatch(lines[i - 1]) if i > 0 else None
        scene = scene_match["value"].strip() if scene_match else "offline"
        end = i + 1
        while end < len(lines):
            closing = lines[end].strip()
            if closing and closing == fence[0] * len(closing) and len(closing) >= len(fence):
                break
            end += 1
        body = tuple(_dedent(line, indent) for line in lines[i + 1 : end])
        blocks.append(Block(page, i + 1, lang, scene, scene_match is not None, body, end + 1))
        i = end + 1
    return blocks


def _mentions(test_text: str, page_path: str) -> bool:
    """The test names the page, as a string or as a path joined with ``/`` (``"docs" / "x.md"``)."""
    return page_path in _JOIN.sub("/", test_text)


def loose_scene_comments(text: str, page: str, blocks: Sequence[Block]) -> list[Problem]:
    """Scene comments outside blocks that are not on the line right before a fence: they choose
    nothing, and the block the writer meant would run offline."""
    inside = {n for block in blocks for n in range(block.line, block.end + 1)}
    placed = {block.line - 1 for block in blocks if block.scene_given}
    return [
        Problem(page, n, "a scene comment goes on the line right before the opening fence of its block")
        for n, line in enumerate(text.splitlines(), start=1)
        if _SCENE.fullmatch(line) and n not in inside and n not in placed
    ]


def problems(block: Block, root: Path, docs_dir: str = "docs") -> Iterator[Problem]:
    """What is wrong with one block under the convention; ``root`` is the repository and
    ``docs_dir`` the pages' folder in it."""
    where = (block.page, block.line)
    if block.lang in OTHER_SHELLS:
        yield Problem(*where, f"a shell block is `sh` or `console`, not `{block.lang}`")
    first = next((line for line in block.body if line.strip()), "")
    if block.lang not in SHELL and first.startswith("$ "):
        yield Problem(*where, f"a `{block.lang or 'plain'}` block starts with `$ `: use `console`")
    if block.lang == "console" and block.body and not block.body[0].startswith("$ "):
        yield Problem(*where, "a `console` block starts with its first `$ ` command line")
    if block.scene_given and block.lang not in SHELL:
        yield Problem(
            *where, f"a scene comment before a `{block.lang or 'plain'}` block: only sh and console run"
        )
    tested_by = block.tested_by
    if tested_by is not None:
        path = root / tested_by
        page_path = f"{docs_dir}/{block.page}"
        if not (tested_by.startswith("tests/") and tested_by.endswith(".py") and path.is_file()):
            yield Problem(*where, f"`tested-by {tested_by}`: no such test file under tests/")
        elif not _mentions(path.read_text(), page_path):
            yield Problem(*where, f"`tested-by {tested_by}`: that test does not mention {page_path}")
    elif block.scene not in SCENES:
        known = ", ".join(SCENES)
        yield Problem(
            *where, f"unknown scene `{block.scene}`: one of {known}, or `tested-by tests/<path>.py`"
        )


def commands(block: Block) -> list[Command]:
    """The commands of an sh or console block, each with its page line."""
    first = block.line + 1
    if block.lang == "sh":
        return [Command(first, "\n".join(block.body), None, first)]
    found: list[Command] = []
    i = 0
    while i < len(block.body):
        line = block.body[i]
        if not line.startswith("$ "):
            i += 1  # output before any command: problems() reports it
            continue
        start = i
        text = [line[2:]]
        while text[-1].endswith("\\") and i + 1 < len(block.body):
            i += 1
            text.append(block.body[i])
        i += 1
        shown_from = i
        while i < len(block.body) and not block.body[i].startswith("$ "):
            i += 1
        found.append(Command(first + start, "\n".join(text), block.body[shown_from:i], first + shown_from))
    return found


@dataclass(frozen=True)
class Page:
    """A page's path under its docs folder and its blocks."""

    name: str
    blocks: tuple[Block, ...]
    loose: tuple[Problem, ...] = ()  # scene comments that choose no block

    def problems(self, root: Path, docs_dir: str) -> list[str]:
        """Everything on the page that breaks the convention, as ``page:line: why``, in page order."""
        found = [
            *self.loose,
            *(problem for block in self.blocks for problem in problems(block, root, docs_dir)),
        ]
        return [str(problem) for problem in sorted(found, key=lambda problem: problem.line)]

    def runnable(self, scene: str) -> list[Block]:
        """The sh and console blocks that run in ``scene``, in page order."""
        return [b for b in self.blocks if b.lang in SHELL and b.scene == scene]

    @property
    def scenes(self) -> list[str]:
        """The scenes the page's runnable blocks need, in the order of SCENES."""
        used = {b.scene for b in self.blocks if b.lang in SHELL}
        return [scene for scene in SCENES if scene in used]


def page_of(name: str, text: str) -> Page:
    """A page from its text; ``name`` is its path under its folder."""
    blocks = fenced_blocks(text, name)
    return Page(name, tuple(blocks), tuple(loose_scene_comments(text, name, blocks)))


def read_pages(docs: Path) -> list[Page]:
    """Every page under ``docs``, sorted by path."""
    pages = []
    for path in sorted(docs.rglob("*.md")):
        name = path.relative_to(docs).as_posix()
        pages.append(page_of(name, path.read_text()))
    return pages
