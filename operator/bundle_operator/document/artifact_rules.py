"""Rules for command MCPs that run from an .mcpb archive (``runtime`` and ``artifact``).

The archive is named by its SHA-256 and the platform unpacks it; ``${__dirname}`` is that folder,
so only an MCP with an artifact may use it. A binary server runs only where its program was built
for: one built for another OS or architecture than this platform's blocks the install.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bundle_operator.document.issues import Code, Issue, blocking, cut_short, warning
from bundle_operator.document.models import Bundle, CommandMcp
from bundle_operator.document.pointer import join_pointer
from bundle_operator.document.runtimes import host_platform

DIRNAME = "${__dirname}"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
PLATFORM = re.compile(r"^(linux|darwin|win32)/[a-z0-9_]{1,20}\Z")
ENTRY_MAX = 1000
RUNTIME_COMMANDS = {"node": ("node",), "python": ("python", "python3")}


def check_artifacts(bundle: Bundle, platform: str | None = None) -> list[Issue]:
    """Artifact fields of every command MCP, against ``platform`` (this machine's when None)."""
    target = platform or host_platform()
    issues: list[Issue] = []
    for index, mcp in enumerate(bundle.mcps):
        if isinstance(mcp, CommandMcp):
            found = list(_check(mcp, join_pointer("/mcps", index), target))
            if mcp.artifact is not None and not found:
                found.append(_what_runs(mcp, join_pointer("/mcps", index)))
            issues.extend(found)
    return issues


def _what_runs(mcp: CommandMcp, base: str) -> Issue:
    """What will run, said before anything is uploaded: a person approving the plan consents to it."""
    assert mcp.artifact is not None
    line = " ".join([mcp.command, *mcp.args])
    return warning(
        Code.RUNS_FROM_ARCHIVE,
        f"MCP '{mcp.key}' will run `{cut_short(line, 300)}` ({mcp.runtime}, entry {mcp.artifact.entry}) "
        f"from the archive {mcp.artifact.digest}, which install uploads to the platform",
        join_pointer(base, "artifact"),
        f"mcp:{mcp.key}",
    )


def _check(mcp: CommandMcp, base: str, target: str) -> Iterator[Issue]:
    entity = f"mcp:{mcp.key}"
    name = f"MCP '{mcp.key}'"

    def bad(at: str | tuple[str | int, ...], message: str, code: Code = Code.INVALID_ARTIFACT) -> Issue:
        tokens = (at,) if isinstance(at, str) else at
        return blocking(code, f"{name} {message}", join_pointer(base, *tokens), entity)

    artifact = mcp.artifact
    if artifact is None:
        if mcp.runtime is not None:
            yield bad(
                "runtime", "names a runtime but no artifact; runtime is only for an MCP made from an .mcpb"
            )
        for pointer, text in _texts(mcp):
            if DIRNAME in text:
                yield bad(pointer, f"uses {DIRNAME}, which only an MCP with an artifact has")
        return
    if mcp.runtime is None:
        yield bad("runtime", "has an artifact but no runtime (node, python or binary)")
    if not DIGEST.match(artifact.digest):
        yield bad(("artifact", "digest"), "artifact.digest must be sha256: and 64 lowercase hex digits")
    entry_problem = relative_path_problem(artifact.entry)
    if entry_problem is not None:
        yield bad(("artifact", "entry"), f"artifact.entry {entry_problem}")
    if mcp.runtime is not None:
        problem = command_problem(mcp.runtime, mcp.command)
        if problem is not None:
            yield bad("command", f"is a {mcp.runtime} server, so its command {problem}")
    if artifact.platform is not None:
        if mcp.runtime != "binary":
            yield bad(("artifact", "platform"), "artifact.platform is only for a binary server")
        elif not PLATFORM.match(artifact.platform):
            yield bad(("artifact", "platform"), "artifact.platform must be <os>/<arch>, such as linux/amd64")
        elif artifact.platform != target:
            yield bad(
                ("artifact", "platform"),
                f"runs a program built for {artifact.platform}, and this platform is {target}; "
                "use the bundle's build for this platform",
                Code.BINARY_PLATFORM,
            )


def _texts(mcp: CommandMcp) -> Iterator[tuple[str | tuple[str | int, ...], str]]:
    yield "command", mcp.command
    for i, arg in enumerate(mcp.args):
        yield ("args", i), arg
    for key, value in mcp.env.items():
        yield ("env", key), value


def command_problem(runtime: str, command: str) -> str | None:
    """Why ``command`` cannot start a server of ``runtime`` run from its archive, or None: node and
    python servers run on their runtime, a binary server's program is inside the archive."""
    if runtime in RUNTIME_COMMANDS:
        allowed = RUNTIME_COMMANDS[runtime]
        return None if command in allowed else f"must be {' or '.join(allowed)}"
    program = command.removeprefix(DIRNAME + "/") if command.startswith(DIRNAME + "/") else None
    if program is None or relative_path_problem(program) is not None:
        return f"must be {DIRNAME}/<program in the archive>"
    return None


def relative_path_problem(path: str) -> str | None:
    """Why ``path`` is not a plain relative path inside an archive, or None."""
    if not path or len(path) > ENTRY_MAX:
        return f"must be 1 to {ENTRY_MAX} characters"
    if path.startswith("/") or "\\" in path or "\0" in path:
        return "must be a relative path with / between its parts"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "must not have empty, . or .. parts"
    return None
