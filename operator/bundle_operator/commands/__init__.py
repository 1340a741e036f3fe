"""The bundlectl commands; each command module exposes ``register(subparsers)``, listed in COMMANDS.

The other modules (connection, exit_codes, output, setup_input, source_input, gitops) are what
the commands share. To add a command, write a module here with a ``register`` function and list
it in COMMANDS.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bundle_operator.commands import analyze, approve, install, listing, manage, mcpb, registry, schema
from bundle_operator.commands import operator as operator_command
from bundle_operator.commands import platform as platform_command

Register = Callable[["argparse._SubParsersAction[Any]"], None]

COMMANDS: list[Register] = [
    analyze.register,
    install.register,
    manage.register,
    listing.register,
    platform_command.register,
    mcpb.register,
    registry.register,
    operator_command.register,
    approve.register,
    schema.register,
]
