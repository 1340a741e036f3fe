"""Running the blocks of one page in one scene, in page order, and saying what went wrong."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tests.docs.blocks import Block, Command, commands
from tests.docs.matcher import report
from tests.docs.scenes import Scene, checkout_files, writes_outside_tmp
from tests.docs.shell import run_script

BLOCK_TIMEOUT = 300.0  # seconds for all the commands of one block
_TAIL = 4000  # characters of a failed command's output shown


def run_blocks(blocks: Sequence[Block], scene: Scene, block_timeout: float = BLOCK_TIMEOUT) -> str | None:
    """Run every command of ``blocks`` in ``scene``; what failed (None: all passed). The first
    failed command ends the run: the blocks after it build on its state."""
    for block in blocks:
        deadline = time.monotonic() + block_timeout
        for command in commands(block):
            failure = run_command(block, command, scene, max(deadline - time.monotonic(), 1.0))
            if failure is not None:
                if failure.endswith("timed out"):
                    failure += f" after the block's {block_timeout:.0f} s"
                notes = "".join(f"\n{note}" for note in scene.notes)
                return f"[scene {scene.name}] {failure}{notes}"
    return None


def run_command(block: Block, command: Command, scene: Scene, timeout: float) -> str | None:
    """One command of a block: None when it exits 0, prints what the page shows, and (in the
    checkout) writes nowhere but tmp/; else why not, naming the page line."""
    where = f"{block.page}:{command.line}"
    before = checkout_files() if scene.checkout else None

    def page_line(line: int) -> str:
        return f"{block.page}:{command.line + line - 1}"

    outcome = run_script(command.text, scene.state, scene.cwd, scene.env, timeout, page_line)
    if before is not None:
        wrote = writes_outside_tmp(before, checkout_files())
        if wrote:
            return f"{where}: a checkout block may write only under tmp/, it wrote: {', '.join(wrote)}"
    if outcome.code is None:
        return f"{where}: timed out"
    if outcome.code != 0:
        at = page_line(outcome.failed_line) if outcome.failed_line else where
        return f"{at}: exited {outcome.code}\n{_tail(outcome.output)}"
    if command.shown is None:
        return None
    first_line = command.text.splitlines()[0]
    return report(where, first_line, command.shown, command.shown_line, outcome.output.splitlines())


def _tail(output: str) -> str:
    return output if len(output) <= _TAIL else "...\n" + output[-_TAIL:]
