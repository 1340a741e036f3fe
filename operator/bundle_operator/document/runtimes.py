"""Which command MCPs can run: the rule shared by the analyzer and the platform's MCP service."""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence

ALLOWED_COMMAND_RUNTIMES: frozenset[str] = frozenset(
    {"npx", "uvx", "uv", "python", "python3", "node", "bunx", "deno"}
)
PLUGIN_ROOT_VARIABLE = "${CLAUDE_PLUGIN_ROOT}"


def unsupported_runtime_reason(command: str) -> str | None:
    """Why a command cannot run on the platform, or None when it is one of the allowed runtimes."""
    if PLUGIN_ROOT_VARIABLE in command:
        return f"the command refers to {PLUGIN_ROOT_VARIABLE}, which exists only inside a plugin"
    if "/" in command or "\\" in command or command.startswith("."):
        return "the command is a local path; only the allowed runtimes can run on the platform"
    if command not in ALLOWED_COMMAND_RUNTIMES:
        allowed = ", ".join(sorted(ALLOWED_COMMAND_RUNTIMES))
        return f"the command '{command}' is not an allowed runtime ({allowed})"
    return None


def plugin_root_argument(args: Sequence[str]) -> int | None:
    """The index of the first argument that refers to ``${CLAUDE_PLUGIN_ROOT}``, or None.

    A plugin usually runs an allowed runtime on a file of its own (``node
    ${CLAUDE_PLUGIN_ROOT}/server.js``); that file exists only inside the plugin, so the command
    cannot run on the platform any more than a command naming the variable itself.
    """
    return next((index for index, arg in enumerate(args) if PLUGIN_ROOT_VARIABLE in arg), None)


def plugin_root_argument_reason() -> str:
    """Why a command MCP whose arguments refer to the plugin root is skipped."""
    return f"an argument refers to {PLUGIN_ROOT_VARIABLE}, which exists only inside a plugin"


# Python's names for machines, as Go and container platforms name the same architectures.
_ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "i386": "386",
    "i686": "386",
    "armv7l": "arm",
    "riscv64": "riscv64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}


def host_platform() -> str:
    """This machine as ``<os>/<arch>`` (``linux/amd64``): MCPB's OS names, Go's architecture names."""
    system = sys.platform
    os_name = "linux" if system.startswith("linux") else system
    machine = platform.machine().lower()
    return f"{os_name}/{_ARCHITECTURES.get(machine, machine)}"
