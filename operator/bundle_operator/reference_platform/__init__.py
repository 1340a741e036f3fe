"""The reference agent platform: the API v1 on aiohttp with a SQLite file.

It enforces the platform services' own rules so the engine meets them in tests and local runs.
Start it with ``bundlectl platform serve`` or, in-process, with ``server.start``.
"""

from bundle_operator.reference_platform.app import create_app
from bundle_operator.reference_platform.context import ServerConfig
from bundle_operator.reference_platform.server import RunningPlatform, serve, start

__all__ = ["RunningPlatform", "ServerConfig", "create_app", "serve", "start"]
