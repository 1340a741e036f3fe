"""How the bundle's server would be started: the effective mcp_config and the rules on it.

The command must be node, python, python3 or a program inside the bundle, and never comes from a
person's value. Arguments and environment values may use the bundle's folder, the person's
folders and user_config values. Environment variables that change what runs are refused, except
NODE_PATH and PYTHONPATH when every entry points inside the bundle: the policy, name by name, is
written out above ``_RUNTIME_PREFIXES``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bundle_operator.document.artifact_rules import DIRNAME
from bundle_operator.mcpb.entries import check_relative_path
from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.limits import Limits
from bundle_operator.mcpb.manifest import McpConfig

PLATFORMS = ("darwin", "linux", "win32")
RUNTIMES = ("node", "python", "python3")
FOLDER_VARIABLES = ("HOME", "DESKTOP", "DOCUMENTS", "DOWNLOADS")
SEPARATOR_VARIABLES = ("pathSeparator", "/")
# An opening with no "}" after it matches to the end of the text (and is not a variable): a start
# that could fail would be tried again from every later "${", each reading to the end.
_VARIABLE = re.compile(r"\$\{([^}]*+)(?:\}|\Z)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The environment policy, by name (compared in upper case, as Windows does):
# 1. NODE_PATH and PYTHONPATH are allowed when every entry is inside the bundle.
# 2. A few runtime settings that change how output looks, never what code runs, are allowed.
# 3. Every other NODE_* and PYTHON* variable is refused: the runtimes keep adding ones that load
#    code or move caches and configuration (NODE_OPTIONS, NODE_COMPILE_CACHE, PYTHONSTARTUP,
#    PYTHONPYCACHEPREFIX...), so only the known-harmless ones pass, not the known-bad ones fail.
# 4. The names and prefixes below are refused: they load code or libraries, pick the
#    interpreter or shell, or move the folders programs read configuration and startup files from
#    (HOME, APPDATA, XDG_*), or change what TLS trusts (OPENSSL_CONF even loads engines).
# Anything else (API_KEY, LOG_LEVEL, DATA_DIR...) is the bundle's own setting and is allowed.
_RUNTIME_PREFIXES = ("NODE_", "PYTHON")
_HARMLESS_RUNTIME = frozenset(
    {
        "NODE_ENV",
        "NODE_NO_WARNINGS",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
    }
)
_RUNS_CODE = frozenset(
    {
        "PATH",
        "PATHEXT",
        "COMSPEC",
        "SHELL",
        "SHELLOPTS",
        "BASHOPTS",
        "BASH_ENV",
        "ENV",
        "ZDOTDIR",
        "IFS",
        "PS4",
        "HOME",
        "USERPROFILE",
        "HOMEDRIVE",
        "HOMEPATH",
        "APPDATA",
        "LOCALAPPDATA",
        "PROGRAMDATA",
        "SYSTEMROOT",
        "WINDIR",
        "PSMODULEPATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
    }
)
_RUNS_CODE_PREFIXES = (
    "LD_",
    "DYLD_",
    "UV_",
    "PIP_",
    "NPM_CONFIG_",
    "MALLOC_",
    "OPENSSL_",
    "XDG_",
    "ELECTRON_",
    "GIT_",
)
_INSIDE_ONLY = frozenset({"NODE_PATH", "PYTHONPATH"})


@dataclass(frozen=True)
class LaunchConfig:
    """command, args and env for one platform, with the manifest's variables left in place."""

    command: str
    args: list[str]
    env: dict[str, str]


def effective_config(config: McpConfig, platform: str) -> LaunchConfig:
    """Apply the platform override the way MCPB hosts do: each of command, args, env replaces whole."""
    command, args, env = config.command, config.args or [], config.env or {}
    overrides = config.platform_overrides or {}
    override = next((o for name, o in overrides.items() if name == platform), None)
    if override is not None:
        command = override.command or command
        args = override.args if override.args is not None else args
        env = override.env if override.env is not None else env
    return LaunchConfig(command=command, args=list(args), env=dict(env))


def variables(text: str) -> list[re.Match[str]]:
    """Every ``${name}`` in ``text``, in order, found in linear time."""
    return [match for match in _VARIABLE.finditer(text) if match.group().endswith("}")]


def substitute_variables(text: str, value: Callable[[str], str]) -> str:
    """``text`` with each ``${name}`` replaced by ``value(name)``; inserted values are not expanded."""
    # An unclosed opening matched to the end of the text: it stays as it was written.
    return _VARIABLE.sub(lambda m: value(m.group(1)) if m.group().endswith("}") else m.group(), text)


def _variables(text: str, where: str, user_keys: set[str]) -> None:
    for name in (match.group(1) for match in variables(text)):
        if name.startswith("user_config."):
            if name.removeprefix("user_config.") not in user_keys:
                raise Refused(
                    "mcp_config", f"{where} refers to ${{{name}}}, which user_config does not declare"
                )
        elif name != "__dirname" and name not in FOLDER_VARIABLES and name not in SEPARATOR_VARIABLES:
            raise Refused("mcp_config", f"{where} uses the unknown variable ${{{name}}}")


def _inside_bundle(path: str, platform: str, limits: Limits) -> str | None:
    """The archive path a ``${__dirname}/...`` string names, or None when it is anything else."""
    for sep in SEPARATOR_VARIABLES:
        path = path.replace("${" + sep + "}", "/")
    if platform == "win32":
        path = path.replace("\\", "/")
    if not path.startswith(DIRNAME):
        return None
    rest = path[len(DIRNAME) :]
    if rest in ("", "/"):
        return ""
    if not rest.startswith("/") or variables(rest):
        return None
    try:
        return check_relative_path(rest[1:], "path", limits)
    except Refused:
        return None


def program_path(command: str, platform: str, limits: Limits) -> str | None:
    """The archive path of a command that is a program inside the bundle, or None."""
    return None if command in RUNTIMES else _inside_bundle(command, platform, limits) or None


def check_launch(
    config: LaunchConfig,
    platform: str,
    files: set[str],
    user_keys: set[str],
    limits: Limits,
) -> None:
    """Refuse a launch configuration that lets anything but the bundle decide what runs."""
    command = config.command
    if "${user_config." in command:
        raise Refused(
            "command",
            "server.mcp_config.command uses a user_config value; a person's value never chooses what runs",
        )
    if command not in RUNTIMES:
        program = _inside_bundle(command, platform, limits)
        if not program or program not in files:
            raise Refused(
                "command",
                f"server.mcp_config.command '{command}' is not node, python, python3 "
                "or a program inside the bundle",
            )
    for i, arg in enumerate(config.args):
        _variables(arg, f"server.mcp_config.args[{i}]", user_keys)
    if command in RUNTIMES:
        _check_runtime_args(config.args)
    for key, value in config.env.items():
        where = f"server.mcp_config.env.{key}"
        if not _ENV_NAME.fullmatch(key):
            raise Refused("env", f"{where} is not a valid environment variable name")
        _variables(value, where, user_keys)
        upper = key.upper()
        if upper in _INSIDE_ONLY:
            _check_search_path(value, where, platform, limits)
        elif upper in _HARMLESS_RUNTIME:
            continue
        elif upper in _RUNS_CODE or upper.startswith(_RUNS_CODE_PREFIXES + _RUNTIME_PREFIXES):
            raise Refused("env", f"{where} changes what runs, so it is refused")


# Runtime options whose value is code to load or run: a person's value may never stand there.
_LOADS_CODE = frozenset(
    {
        "-r",
        "--require",
        "--import",
        "--loader",
        "--experimental-loader",
        "-e",
        "--eval",
        "-p",
        "--print",
        "-c",
        "-m",
    }
)
# Of those, the ones that are the program itself: what follows them are the program's arguments.
_IS_THE_PROGRAM = frozenset({"-e", "--eval", "-p", "--print", "-c", "-m"})


def _check_runtime_args(args: Sequence[str]) -> None:
    """For node and python the script (the first plain argument) and code-loading options choose
    what runs, so a user_config value may fill neither."""
    loads_code = ""  # the option whose value the next argument is
    for i, arg in enumerate(args):
        where = f"server.mcp_config.args[{i}]"
        user_value = "${user_config." in arg
        option, equals, _ = arg.partition("=")
        code_option = loads_code or (option if equals and option in _LOADS_CODE else "")
        if code_option:
            if user_value:
                raise Refused(
                    "args",
                    f"{where} gives the runtime code to load from a user_config value; a person's value "
                    "never chooses what runs",
                )
            if code_option in _IS_THE_PROGRAM:
                return
            loads_code = ""
            continue
        if arg in _LOADS_CODE:
            loads_code = arg
            continue
        if arg.startswith("-"):
            continue
        if user_value:
            raise Refused(
                "args",
                f"{where} is the script the runtime runs and uses a user_config value; a person's value "
                "never chooses what runs",
            )
        return  # the script: what follows are its own arguments


def _check_search_path(value: str, where: str, platform: str, limits: Limits) -> None:
    separators = ["${pathSeparator}", ";" if platform == "win32" else ":"]
    parts = [value]
    for sep in separators:
        parts = [piece for part in parts for piece in part.split(sep)]
    for part in parts:
        if _inside_bundle(part, platform, limits) is None:
            raise Refused("env", f"{where} may only point inside the bundle (${{__dirname}}/...)")


def check_platform(platforms: Sequence[str] | None, platform: str) -> list[str]:
    """The platforms the bundle supports (all three when absent); refuse when ours is not one."""
    supported = list(platforms) if platforms is not None else list(PLATFORMS)
    if platform not in supported:
        listed = ", ".join(supported) or "none"
        raise Refused("platform", f"the bundle supports {listed}, not {platform}")
    return supported
