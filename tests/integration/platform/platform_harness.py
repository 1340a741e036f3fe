"""Starting the reference platform as a subprocess, and the settings the platform tests share.

Kept out of conftest.py so test modules import it by a name no other test folder uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bundle_operator.platform.retry import RetryPolicy

TOKEN = "test-token-not-secret"
BUNDLECTL = str(Path(sys.executable).with_name("bundlectl"))
FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, max_retry_after=2.0)


@dataclass
class PlatformProcess:
    """A running ``bundlectl platform serve``."""

    process: subprocess.Popen[str]
    url: str
    db: Path

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)


def start_platform(db: Path, *extra: str) -> PlatformProcess:
    """Start the reference platform on a free loopback port and wait until it listens."""
    command = [BUNDLECTL, "platform", "serve", "--port", "0", "--db", str(db), *extra]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        _, err = process.communicate(timeout=10)
        raise RuntimeError(f"the platform did not start: {line!r} {err[-2000:]}")
    url = line.split("listening on ", 1)[1].split()[0]
    return PlatformProcess(process, url, db)
