"""Turn an accepted .mcpb archive into a bundle document (schema_version 0.1.0) with one command MCP.

How the archive maps (DESIGN.md §9.7):

- The MCP refers to the archive itself: ``runtime`` (node, python or binary, the manifest's server
  type), ``artifact: {digest, entry}`` (the archive's SHA-256 and its entry point) and, for a
  binary server, ``artifact.platform``: the OS and architecture its program was built for, read
  from the program's header. The engine uploads the archive to the platform before the MCP, and
  the platform unpacks it into a folder of its own: ``${__dirname}`` stays in the command, args and
  env for the platform to resolve, so no path of any disk is written into the document.
- ``node``, ``python`` and ``python3`` stay as the command; a binary server's command is
  ``${__dirname}/<program>``.
- The document also has a gateway named after the bundle with the server as its only member, so
  an Endpoint can serve it to MCP clients like any gateway bundle.
- Each user_config entry becomes a setup field (see ``setup_fields``) and ``${user_config.x}``
  becomes ``${setup.x}``. ``${pathSeparator}`` / ``${/}`` become the platform's separator.
  ``${HOME}``, ``${DESKTOP}``, ``${DOCUMENTS}`` and ``${DOWNLOADS}`` stay as written, in args, env
  and setup defaults alike: they are the folders of the instance the server runs as, so the platform
  resolves them when it launches the server, never the machine that converts.
- With ``root`` (``bundlectl mcpb to-bundle --root``), the archive is one a person unpacked into
  ``root`` on the platform's disk themselves: ``${__dirname}`` becomes that folder, the MCP has no
  artifact and no gateway is added; a binary server's command is then a local path, which the
  analyzer reports as SKIPPED.
- The bundle's name is the manifest's name made valid for the format (spaces become ``-``).
- A uv bundle (``not_runnable``) or a refused archive has no document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from bundle_operator.document.artifact_rules import DIRNAME
from bundle_operator.document.keys import SEMVER_PATTERN
from bundle_operator.document.runtimes import unsupported_runtime_reason
from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.launch import RUNTIMES, substitute_variables
from bundle_operator.mcpb.reader import Inspection
from bundle_operator.mcpb.setup_fields import SetupField

SCHEMA_VERSION = "0.1.0"


@dataclass
class Conversion:
    """The document as data, and what a person should know about it."""

    document: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def to_yaml(self) -> str:
        """The document as YAML, fields in the order of the format."""
        return yaml.safe_dump(self.document, sort_keys=False, allow_unicode=True)


def bundle_name(name: str) -> str:
    """A bundle name (1-63 of letters, digits, ``.``, ``_``, ``-``; alphanumeric at both ends)."""
    cleaned = re.sub(r"[^a-zA-Z0-9._-]+", "-", name)[:63]
    cleaned = re.sub(r"^[^a-zA-Z0-9]+|[^a-zA-Z0-9]+$", "", cleaned)
    return cleaned or "mcpb-bundle"


def mcp_key(name: str) -> str:
    """A bundle key (``[a-zA-Z][a-zA-Z0-9_]*``) derived from the manifest's name."""
    key = re.sub(r"[^a-zA-Z0-9_]+", "_", name).strip("_")
    return key if key[:1].isalpha() else f"mcp_{key}"


def _substitute(text: str, root: str | None, separator: str, setup_keys: Mapping[str, str]) -> str:
    def value(name: str) -> str:
        if name == "__dirname":
            return DIRNAME if root is None else root
        if name in ("pathSeparator", "/"):
            return separator
        if name.startswith("user_config."):
            return "${setup." + setup_keys[name.removeprefix("user_config.")] + "}"
        return "${" + name + "}"  # a folder variable: resolved at launch

    return substitute_variables(text, value)


def _setup_entry(f: SetupField) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": f.key, "label": f.label, "type": f.type, "required": f.required}
    if f.description:
        entry["description"] = f.description
    if f.default is not None:
        entry["default"] = f.default
    return entry


def to_bundle(inspection: Inspection, *, root: str | None = None) -> Conversion:
    """The bundle document for an accepted archive; raises ``Refused`` for any other verdict."""
    if inspection.verdict != "accepted":
        raise Refused(
            inspection.code or "not_accepted", inspection.reason or "only accepted archives convert"
        )
    manifest, launch = inspection.parsed_manifest, inspection.launch
    assert manifest is not None and launch is not None
    if root is not None:
        root = root.rstrip("/") or "/"
    separator = "\\" if inspection.platform == "win32" else "/"
    setup_keys = {f.source_key: f.key for f in inspection.setup}

    def sub(text: str) -> str:
        return _substitute(text, root, separator, setup_keys)

    warnings: list[str] = []
    command = launch.command
    if command not in RUNTIMES:
        command = sub(command)  # a program inside the bundle: the reader checked it is ${__dirname}/...
    key = mcp_key(manifest.name)
    mcp: dict[str, Any] = {"key": key, "name": manifest.display_name or manifest.name, "type": "command"}
    if root is None:
        mcp["runtime"] = manifest.server.type  # node, python or binary: a uv bundle has no document
        artifact = {"digest": f"sha256:{inspection.sha256}", "entry": manifest.server.entry_point}
        if manifest.server.type == "binary":
            if inspection.program_platform is None:
                warnings.append(
                    "the server's program is not a known executable format; the platform may not run it"
                )
            else:
                artifact["platform"] = inspection.program_platform
        mcp["artifact"] = artifact
    else:
        reason = unsupported_runtime_reason(command)
        if reason is not None:
            warnings.append(f"the MCP will be SKIPPED by the analyzer: {reason}")
    mcp["command"] = command
    mcp["args"] = [sub(a) for a in launch.args]
    if launch.env:
        mcp["env"] = {k: sub(v) for k, v in launch.env.items()}
    name = bundle_name(manifest.name)
    if name != manifest.name:
        warnings.append(f"the bundle is named '{name}', since the manifest's name is not a valid bundle name")
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": name}
    # The document's own rule: a version it would refuse is better left out.
    if SEMVER_PATTERN.match(manifest.version):
        document["version"] = manifest.version
    else:
        warnings.append(f"version '{manifest.version}' is not semver, so the document carries none")
    if manifest.description:
        document["description"] = manifest.description
    if inspection.setup:
        document["setup"] = [_setup_entry(f) for f in inspection.setup]
    document["mcps"] = [mcp]
    if root is None:
        document["gateway"] = {"description": manifest.description or mcp["name"], "members": [key]}
    return Conversion(document=document, warnings=warnings)
