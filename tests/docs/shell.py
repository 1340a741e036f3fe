"""Running a page's command text in bash, with the shell state carried from one command to the next."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Variables the script set and the directory it ended in go to `state` on exit and are read back
# before the next script: a reader's shell keeps them between the blocks of a page, so must we.
_PRELUDE = """\
__docs_base=" $(compgen -v | tr '\\n' ' ') "
source {state} 2>/dev/null || true
__docs_save() {{
  {{ for __docs_name in $(compgen -v); do
      case "$__docs_base" in *" $__docs_name "*) ;; *) declare -p "$__docs_name" 2>/dev/null ;; esac
    done | grep -v '^declare -[a-zA-Z]*r' | grep -v ' __docs_'
    export -p | grep -v '^declare -[a-zA-Z]*r'
    printf 'cd %q\\n' "$PWD"
  }} > {state}
}}
trap __docs_save EXIT
trap 'printf "%s" "$LINENO" > {failed}' ERR
set -e -o pipefail
"""


@dataclass(frozen=True)
class Outcome:
    """What a script did: its exit code (None: timed out), its stdout and stderr together, and for
    a failed command the line of the script it was on."""

    code: int | None
    output: str
    failed_line: int | None


def run_script(
    text: str, state_dir: Path, cwd: Path, env: dict[str, str], timeout: float, where: Callable[[int], str]
) -> Outcome:
    """``text`` in ``bash -e -o pipefail`` with the state of the scripts before it; processes it
    leaves running are stopped with it. bash's own messages name ``where(line of text)``."""
    state, failed, script = state_dir / "state.sh", state_dir / "failed-line", state_dir / "script.sh"
    failed.unlink(missing_ok=True)
    prelude = _PRELUDE.format(state=_quote(state), failed=_quote(failed))
    # The text goes last, on lines of its own, so $LINENO minus the prelude is its own line number.
    script.write_text(prelude + text + "\n")
    offset = prelude.count("\n")
    process = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", str(script)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        _stop_group(process.pid)
        out, _ = process.communicate()
        code = None
    _stop_group(process.pid)
    line = int(failed.read_text()) - offset if failed.is_file() and code != 0 else None
    output = re.sub(
        re.escape(str(script)) + r": line (\d+):",
        lambda found: where(int(found[1]) - offset) + ":",
        out.decode("utf-8", "replace"),
    )
    return Outcome(code, output, line)


def _stop_group(pid: int) -> None:
    """SIGKILL to whatever the script started that still runs (its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"
