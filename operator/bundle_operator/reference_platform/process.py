"""Running the reference platform as a child process: for `make run`, the benchmarks and the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))


@dataclass
class PlatformProcess:
    """A running ``bundlectl platform serve``; its log goes to ``log`` (a file, never a pipe that fills)."""

    process: subprocess.Popen[str]
    url: str
    db: Path
    log: Path

    def stop(self) -> int:
        """Stop it and wait for it to exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)


def start_platform(
    db: Path, *extra: str, log: Path | None = None, env: dict[str, str] | None = None
) -> PlatformProcess:
    """Start the reference platform on a free loopback port and wait until it listens.

    ``env`` adds to the environment it inherits (SSL_CERT_FILE for an issuer's own CA).
    """
    if log is None:
        handle, name = tempfile.mkstemp(prefix="reference-platform-", suffix=".log")
        os.close(handle)
        log = Path(name)
    with log.open("w") as err:
        process = subprocess.Popen(
            [BUNDLECTL, "platform", "serve", "--port", "0", "--db", str(db), *extra],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, **env} if env else None,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        process.wait(timeout=10)
        raise RuntimeError(f"the reference platform did not start: {line!r} {log.read_text()[-2000:]}")
    return PlatformProcess(process, line.split("listening on ", 1)[1].split()[0], db, log)
