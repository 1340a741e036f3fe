"""A python .mcpb archive for the platform's stdio tests: a small server on the `mcp` SDK.

Its tools say what a person would check of a launched server: its greeting (an env value), a
hash of its token (a secret, never the value), where it runs and its process id; ``fail`` makes
the process exit at once, ``steps`` reports progress and logs, and ``trace_keys`` tells the trace
context its call's ``_meta`` carried. Each archive gets a distinct marker, so
a test finds its own processes in the process table by the extracted folder's path.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from tests.unit.mcpb.craft import build

SERVER = '''
import hashlib, json, os, sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("hello")


@server.tool()
def greet(name: str) -> str:
    """Greets a person with the configured greeting."""
    return f"{os.environ.get('GREETING', 'hello')}, {name}!"


@server.tool()
def token_hash() -> str:
    """The SHA-256 of the token the server was given (never the token)."""
    return hashlib.sha256(os.environ.get("API_TOKEN", "").encode()).hexdigest()


@server.tool()
def whereabouts() -> str:
    """The process's folder, home, arguments and id."""
    return json.dumps({"cwd": os.getcwd(), "home": os.environ.get("HOME"), "argv": sys.argv[1:],
                       "pid": os.getpid(), "env": sorted(os.environ)})


@server.tool()
def fail() -> str:
    """Exits the process at once, as a crash would."""
    sys.stderr.write("giving up now\\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def trace_keys(ctx: Context) -> str:
    """The W3C trace-context keys the call's params._meta carried (SEP-414), as JSON."""
    meta = ctx.request_context.meta or {}
    return json.dumps({key: meta[key] for key in ("traceparent", "tracestate", "baggage") if key in meta})


@server.tool()
async def steps(ctx: Context) -> str:
    """Reports progress twice, then answers."""
    await ctx.report_progress(1, 2, "half way")
    await ctx.report_progress(2, 2, "done")
    await ctx.info("stepped twice")
    return "stepped"


server.run()
'''


# A handshake-era server in plain node (no SDK, nothing to install): it answers initialize,
# tools/list and tools/call, and refuses what it does not know, as an older server would.
NODE_SERVER = r"""
const readline = require("readline");
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id === undefined) return;
  const answer = (result) => send({ jsonrpc: "2.0", id: message.id, result });
  if (message.method === "initialize") {
    answer({ protocolVersion: message.params.protocolVersion, capabilities: { tools: {} },
             serverInfo: { name: "node-hello", version: "1.0.0" } });
  } else if (message.method === "ping") {
    answer({});
  } else if (message.method === "tools/list") {
    answer({ tools: [{ name: "shout", description: "Shouts the text back",
                       inputSchema: { type: "object", properties: { text: { type: "string" } } } }] });
  } else if (message.method === "tools/call") {
    const shouted = message.params.arguments.text.toUpperCase();
    const text = `${process.env.GREETING}, ${shouted} (node ${process.version})`;
    answer({ content: [{ type: "text", text }] });
  } else {
    send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "Method not found" } });
  }
});
"""


def node_archive(folder: Path, *, binary: bool = False) -> bytes:
    """An honest node .mcpb of the plain node server, or a binary one whose program is that server
    as a script; each call makes a different archive."""
    entry = "server/shouter" if binary else "server/index.js"
    command = "${__dirname}/" + entry if binary else "node"
    config = {"command": command, "args": [] if binary else ["${__dirname}/" + entry]}
    first = "#!/usr/bin/env node\n" if binary else ""
    manifest = {
        "manifest_version": "0.3",
        "name": "shouter",
        "version": "1.0.0",
        "description": "Shouts",
        "author": {"name": "Ann Example"},
        "server": {"type": "binary" if binary else "node", "entry_point": entry, "mcp_config": config},
    }
    path = build(
        folder / f"shouter-{uuid.uuid4().hex[:8]}.mcpb",
        manifest=manifest,
        files={entry: (first + f"// {uuid.uuid4().hex}\n" + NODE_SERVER).encode()},
        modes={entry: 0o755},
    )
    return path.read_bytes()


def python_archive(folder: Path, *, crash_on_start: bool = False) -> bytes:
    """An honest python .mcpb of the test server; each call makes a different archive."""
    manifest: dict[str, Any] = {
        "manifest_version": "0.3",
        "name": "hello",
        "display_name": "Hello",
        "version": "1.0.0",
        "description": "Greets people",
        "author": {"name": "Ann Example"},
        "server": {
            "type": "python",
            "entry_point": "server/main.py",
            "mcp_config": {"command": "python", "args": ["${__dirname}/server/main.py"]},
        },
    }
    source = "import sys; sys.exit(7)\n" if crash_on_start else SERVER
    marker = f"# {uuid.uuid4().hex}\n"
    path = build(
        folder / f"hello-{uuid.uuid4().hex[:8]}.mcpb",
        manifest=manifest,
        files={"server/main.py": (marker + source).encode()},
    )
    return path.read_bytes()


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def server_spec(digest: str, runtime: str = "python") -> dict[str, Any]:
    """The MCP server spec the engine makes of an archive, with a greeting and a secret token."""
    entry = {"python": "server/main.py", "node": "server/index.js", "binary": "server/shouter"}[runtime]
    args = {"python": ["${__dirname}/server/main.py", "--home=${HOME}"], "node": ["${__dirname}/" + entry]}
    return {
        "name": "hello",
        "type": "command",
        "command": "${__dirname}/" + entry if runtime == "binary" else runtime,
        "args": args.get(runtime, []),
        "runtime": runtime,
        "artifact": {"digest": digest, "entry": entry},
        "env_schema": [
            {"name": "GREETING", "type": "string", "required": False},
            {"name": "API_TOKEN", "type": "secret", "required": False},
        ],
    }


def processes_under(folder: Path) -> list[int]:
    """The ids of live processes whose command line names ``folder`` (the process table, not a guess)."""
    found: list[int] = []
    needle = str(folder).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def whereabouts(text: str) -> dict[str, Any]:
    """The ``whereabouts`` tool's answer."""
    value: dict[str, Any] = json.loads(text)
    return value
