"""Become a pod's container: what a kubelet's runtime does between the image and the first instruction.

Run as root under `ip netns exec NS unshare --mount --pid --fork --propagation private`, with one
argument, a JSON spec written by tests/image/kubelet.py. In that private mount namespace it mounts
/proc (of the new PID namespace), /dev, the pod's volumes and its /etc/hosts onto the image's root
filesystem, makes the root read-only when the container asks for it, then chroots, drops to the
container's uid, gid and groups with no_new_privs, and execs the container's command as PID 1.

Standalone (no imports from the project) because it runs before the container's own Python exists.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

PR_SET_NO_NEW_PRIVS = 38


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def inside(root: Path, path: str) -> Path:
    """``path`` resolved inside ``root``: symlinks (``/var/run`` -> ``/run``) followed within it."""
    resolved = root
    parts = [p for p in Path(path).parts if p != "/"]
    hops = 0
    while parts:
        part = parts.pop(0)
        candidate = resolved / part
        if candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise SystemExit(f"launch: too many symlinks in {path}")
            link = os.readlink(candidate)
            base = root if link.startswith("/") else resolved
            parts = [p for p in Path(link).parts if p != "/"] + parts
            resolved = base
            continue
        resolved = candidate
    return resolved


def main(spec_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    root = Path(spec["rootfs"])
    # A mount point of its own, so that the read-only remount below stays in this namespace.
    mount("--bind", str(root), str(root))
    mount("-t", "proc", "proc", str(root / "proc"))
    mount("--rbind", "/dev", str(root / "dev"))
    for volume in spec["mounts"]:
        target = inside(root, volume["target"])
        if volume.get("file"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
        if volume["type"] == "tmpfs":
            mount("-t", "tmpfs", "-o", f"mode=1777,size={volume.get('size', '64m')}", "tmpfs", str(target))
        else:
            mount("--bind", volume["source"], str(target))
            if volume.get("readonly"):
                mount("-o", "remount,bind,ro", str(target))
    if spec["readonly_root"]:
        mount("-o", "remount,bind,ro", str(root))
    os.chroot(root)
    os.chdir(spec["workdir"] or "/")
    os.setgroups(spec["groups"])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
    if spec["no_new_privs"]:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SystemExit(f"launch: prctl(PR_SET_NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}")
    sys.stdout.flush()
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
