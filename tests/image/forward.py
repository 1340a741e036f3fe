"""A TCP/Unix-socket forwarder, the network between the image tests' pods.

Each pod of tests/image/kubelet.py has a network namespace of its own, so two replicas can listen on
the same ports, as in a cluster. Unix sockets are files and reach across namespaces: a pod reaches
a Service (the API server, the platform) through a listener in its own namespace that connects to a
socket, and a listener on that socket in the serving namespace connects to the server.

    python forward.py LISTEN=CONNECT ...   with each side tcp:HOST:PORT or unix:PATH

It runs until SIGTERM. Standalone (no imports from the project): it runs under `ip netns exec`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

Endpoint = tuple[str, str, int]


def parse(side: str) -> Endpoint:
    kind, _, rest = side.partition(":")
    if kind == "unix":
        return ("unix", rest, 0)
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        return ("tcp", host, int(port))
    raise SystemExit(f"forward: {side!r} is neither tcp:HOST:PORT nor unix:PATH")


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()


async def connect(target: Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    kind, where, port = target
    if kind == "unix":
        return await asyncio.open_unix_connection(where)
    return await asyncio.open_connection(where, port)


def handler(target: Endpoint):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await connect(target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        for w in (writer, upstream_writer):
            w.close()

    return handle


async def main(rules: list[str]) -> None:
    servers = []
    for rule in rules:
        listen, _, target = rule.partition("=")
        kind, where, port = parse(listen)
        if kind == "unix":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where)
            servers.append(await asyncio.start_unix_server(handler(parse(target)), where))
            os.chmod(where, 0o666)
        else:
            servers.append(
                await asyncio.start_server(handler(parse(target)), where, port, reuse_address=True)
            )
    print("forwarding", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
