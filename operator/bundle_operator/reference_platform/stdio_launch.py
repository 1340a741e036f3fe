"""What launching a command instance with an artifact takes: read from the store, then resolved on disk.

``launch_spec`` reads the instance, its server spec and its secret values inside a store
transaction; ``resolve`` turns that into a program, arguments, environment and folder, checking the
extracted tree first (DESIGN.md §9.7). Secret values travel only in the environment, never on a
command line, and never into a message: ``Refusal`` reasons name fields, not values.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client.stdio import get_default_environment

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.launch import FOLDER_VARIABLES, substitute_variables
from bundle_operator.mcpb.treedigest import check_tree
from bundle_operator.platform import kinds
from bundle_operator.reference_platform.artifact_files import ExtractedArtifact
from bundle_operator.reference_platform.storage import Row, Tx

# Where each person's folder points inside an instance's private home (HOME is the home itself).
_FOLDERS = {"HOME": "", "DESKTOP": "Desktop", "DOCUMENTS": "Documents", "DOWNLOADS": "Downloads"}
_SEPARATORS = ("/", "pathSeparator")


class LaunchRefused(Exception):
    """The instance cannot be launched; ``code`` is its health state or a stable refusal code."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


# How the store finds an instance's extracted artifact (artifact_files.extracted_artifact).
FindArtifact = Callable[[Tx, str, str], ExtractedArtifact | None]


@dataclass(frozen=True)
class LaunchSpec:
    """One instance's launch as the store describes it, secret values resolved."""

    workspace: str
    instance_id: str
    name: str
    runtime: str
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    artifact: ExtractedArtifact
    secrets: tuple[str, ...]  # values kept out of every message and log line
    secret_names: frozenset[str] = frozenset()  # env names whose values are secrets (taken as is)

    @property
    def fingerprint(self) -> str:
        """A hash that changes with anything the launch depends on (safe to keep and compare)."""
        raw = json.dumps(
            [
                self.runtime,
                self.command,
                self.args,
                self.env,
                str(self.artifact.folder),
                self.artifact.tree_digest,
            ]
        )
        return hashlib.sha256(raw.encode()).hexdigest()

    def scrub(self, text: str) -> str:
        """``text`` with every secret value blanked out."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


@dataclass(frozen=True)
class Launch:
    """A resolved launch: the program, its arguments and environment, and where it runs."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: Path


def runs_itself(server: dict[str, Any]) -> bool:
    """Whether the platform runs instances of this server spec itself (a command with an artifact)."""
    return server.get("type") == "command" and isinstance(server.get("artifact"), dict)


def launch_spec(tx: Tx, instance: Row, find: FindArtifact) -> LaunchSpec | LaunchRefused | None:
    """How to launch ``instance``; None when the platform does not run it, a refusal when it cannot."""
    server = tx.get(instance.workspace, kinds.MCP_SERVERS.path, instance.data["server_id"])
    if server is None or not runs_itself(server.data):
        return None
    spec = server.data
    raw_args = instance.data.get("args")
    args: list[str] = []
    for i, arg in enumerate((spec.get("args") or []) if raw_args is None else raw_args):
        if not isinstance(arg, str):
            return LaunchRefused(
                "secret_on_command_line",
                f"args.{i} is a secret reference; a secret goes to the server in its environment, "
                "never on its command line",
            )
        args.append(arg)
    env: list[tuple[str, str]] = []
    secrets: list[str] = []
    secret_names: list[str] = []
    for name, value in sorted((instance.data.get("env") or {}).items()):
        if isinstance(value, str):
            env.append((name, value))
            continue
        resolved = tx.secret(str(value.get("secret_id"))) if isinstance(value, dict) else None
        if resolved is None:
            return LaunchRefused("failed", f"the secret behind env.{name} has no value")
        env.append((name, resolved))
        secrets.append(resolved)
        secret_names.append(name)
    digest = str(spec["artifact"].get("digest"))
    artifact = find(tx, instance.workspace, digest)
    if artifact is None:
        return LaunchRefused("failed", f"the artifact {digest} is not stored in this workspace")
    return LaunchSpec(
        workspace=instance.workspace,
        instance_id=instance.id,
        name=str(instance.data.get("name") or instance.id),
        runtime=str(spec.get("runtime") or ""),
        command=str(spec.get("command") or ""),
        args=tuple(args),
        env=tuple(env),
        artifact=artifact,
        secrets=tuple(secrets),
        secret_names=frozenset(secret_names),
    )


def private_home(homes: Path, instance_id: str) -> Path:
    """The instance's own folder for ``${HOME}`` and the person's folders, made private (0700)."""
    homes.mkdir(mode=0o700, exist_ok=True)
    home = homes / instance_id
    for sub in _FOLDERS.values():
        folder = home / sub if sub else home
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
    return home


def _substitute(text: str, folder: Path, home: Path) -> str:
    def value(name: str) -> str:
        if name == "__dirname":
            return str(folder)
        if name in FOLDER_VARIABLES:
            sub = _FOLDERS[name]
            return str(home / sub) if sub else str(home)
        if name in _SEPARATORS:
            return os.sep
        return "${" + name + "}"  # not the platform's to fill in: left as written

    return substitute_variables(text, value)


def _program(spec: LaunchSpec, folder: Path, home: Path) -> str:
    if spec.runtime == "node":
        node = shutil.which("node")
        if node is None:
            raise LaunchRefused("failed", "node is not on the platform's PATH, so a node bundle cannot run")
        return node
    if spec.runtime == "python":
        return sys.executable
    if spec.runtime != "binary":
        raise LaunchRefused("failed", f"the platform does not run the runtime '{spec.runtime}'")
    program = Path(_substitute(spec.command, folder, home))
    real_root = folder.resolve()
    real = program.resolve()
    if not real.is_relative_to(real_root) or real == real_root:
        raise LaunchRefused("failed", "the binary's command does not name a program inside its bundle")
    info = real.stat() if real.exists() else None
    if info is None or not stat.S_ISREG(info.st_mode) or not info.st_mode & stat.S_IXUSR:
        raise LaunchRefused("failed", "the binary's program is missing from its bundle or not executable")
    return str(real)


def check_unchanged(spec: LaunchSpec) -> None:
    """Refuse (``tree_changed``) when the extracted tree differs from the one extracted.

    Blocking (it hashes the whole tree): run it in a thread.
    """
    try:
        check_tree(spec.artifact.folder, spec.artifact.tree_digest)
    except Refused:
        # The reason names the folder; a gateway client must not learn the platform's disk layout.
        raise LaunchRefused(
            "tree_changed",
            "a file or folder of the extracted bundle changed since it was extracted; it is not run",
        ) from None
    except OSError as exc:
        raise LaunchRefused("tree_changed", f"the extracted bundle cannot be read ({exc.strerror})") from None


def resolve(spec: LaunchSpec, homes: Path) -> Launch:
    """The launch of ``spec``, after checking its extracted tree is exactly as extracted.

    Blocking (it hashes the whole tree): run it in a thread.
    """
    check_unchanged(spec)
    folder = spec.artifact.folder
    home = private_home(homes, spec.instance_id)
    command = _program(spec, folder, home)
    env = {**get_default_environment(), "HOME": str(home)}
    for name, value in spec.env:
        # A secret's value is the person's own text: nothing in it is a variable to fill in.
        env[name] = value if name in spec.secret_names else _substitute(value, folder, home)
    args = [_substitute(arg, folder, home) for arg in spec.args]
    return Launch(command=command, args=args, env=env, cwd=folder)
