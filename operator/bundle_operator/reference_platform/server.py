"""Running the reference platform on a socket until a signal stops it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from aiohttp import web

from bundle_operator.reference_platform.app import body_refusal, create_app
from bundle_operator.reference_platform.context import CONTEXT, ServerConfig
from bundle_operator.reference_platform.protocol import ProblemAppRunner
from bundle_operator.reference_platform.stdio_loopback import LOOPBACK


class RunningPlatform:
    """A started reference platform; ``url`` is where it listens."""

    def __init__(self, runner: web.AppRunner, url: str) -> None:
        self.runner = runner
        self.url = url

    async def stop(self) -> None:
        """Stop listening and close the database."""
        await self.runner.cleanup()


async def start(config: ServerConfig, host: str = "127.0.0.1", port: int = 0) -> RunningPlatform:
    """Start serving on ``host:port`` (0 picks a free port) and return once it accepts calls."""
    app = create_app(config)
    runner = ProblemAppRunner(app, oversize=body_refusal(app), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_port = int(runner.addresses[0][1])
    LOOPBACK.bind(host, bound_port)
    for bound in app[CONTEXT].on_bound:
        bound()
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{bound_port}"
    if not config.public_url:
        app[CONTEXT].public_url = f"{url}/mcp"
    return RunningPlatform(runner, url)


async def serve(config: ServerConfig, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM; ``ready`` gets the base URL once calls are accepted."""
    running = await start(config, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ready(running.url)
    try:
        await stop.wait()
    finally:
        await running.stop()
