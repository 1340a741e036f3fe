"""`make run`: the main job on the embedded defaults.

Starts the reference platform on a loopback port (data kept in tmp/run/platform.db), then does
what a platform team does with a bundle: analyze it against the platform, install it, check
drift, and export the workspace back as a bundle. The platform then keeps running in the
foreground so bundlectl can be pointed at it; Ctrl-C stops it. RUN_ONCE=1 stops after the demo.
(The operator that does the same from Kubernetes resources comes with its own issue.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from bundle_operator.platform.reference.process import BUNDLECTL, start_platform

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "tmp" / "run"
WORKSPACE = "demo"
EXAMPLE = "postgres-data"


def step(title: str, *args: str, env: dict[str, str]) -> int:
    print(f"\n$ bundlectl {' '.join(args)}", flush=True)
    code = subprocess.run([BUNDLECTL, *args], env=env, cwd=RUN_DIR, check=False).returncode
    print(f"  -> {title}: exit {code}", flush=True)
    return code


def main() -> int:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    try:
        platform = start_platform(RUN_DIR / "platform.db", log=RUN_DIR / "platform.log")
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    url = platform.url
    env = {**os.environ, "BUNDLE_PLATFORM_URL": url}
    bundle = str(ROOT / "examples" / f"{EXAMPLE}.yaml")
    setup = str(ROOT / "examples" / "setup" / f"{EXAMPLE}.yaml")
    try:
        print(f"reference platform: {url} (data in {RUN_DIR / 'platform.db'})")
        failed = 0
        failed |= step("plan", "plan", bundle, "--setup-file", setup, "--workspace", WORKSPACE, env=env)
        failed |= step("install", "install", bundle, "--setup-file", setup, "--workspace", WORKSPACE, env=env)
        failed |= step("drift", "drift", "--bundle", "postgres-analyst", "--workspace", WORKSPACE, env=env)
        failed |= step(
            "export",
            "export",
            "--workspace",
            WORKSPACE,
            "--name",
            "demo-export",
            "--out",
            str(RUN_DIR / "export.yaml"),
            env=env,
        )
        print(f"\nexported workspace '{WORKSPACE}' to {RUN_DIR / 'export.yaml'}")
        if failed or os.environ.get("RUN_ONCE"):
            return 1 if failed else 0
        print(
            f"\nThe platform keeps running. In another shell:\n"
            f"  export BUNDLE_PLATFORM_URL={url}\n"
            f"  cd {RUN_DIR} && {BUNDLECTL} drift --bundle postgres-analyst --workspace {WORKSPACE}\n"
            "Ctrl-C stops it.",
            flush=True,
        )
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        platform.stop()


if __name__ == "__main__":
    sys.exit(main())
