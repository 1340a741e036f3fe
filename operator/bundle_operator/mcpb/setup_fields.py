"""user_config entries as setup fields a person fills in before the bundle is installed.

A sensitive entry becomes a ``secret`` field (and never keeps a default: a default shipped in the
manifest is not a secret). ``directory`` and ``file`` entries are paths, so ``string`` fields.
``${HOME}``, ``${DESKTOP}``, ``${DOCUMENTS}`` and ``${DOWNLOADS}`` in a default stay as written: they
name the folders of the instance the server launches as, which only the platform knows at launch;
the machine reading the archive (a laptop, the operator's pod) is not where the server runs.
``multiple: true`` is refused: a setup field holds one value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.manifest import UserConfigOption

SetupType = Literal["string", "secret", "number", "boolean"]
_KEY = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class SetupField:
    """One field; ``source_key`` is the user_config key, ``key`` the bundle-safe form of it."""

    key: str
    source_key: str
    label: str
    type: SetupType
    required: bool
    sensitive: bool
    description: str
    default: str | float | bool | None


def setup_key(source_key: str) -> str:
    """A key matching the bundle format's ``[a-zA-Z][a-zA-Z0-9_]*`` for a user_config key."""
    if _KEY.fullmatch(source_key):
        return source_key
    key = re.sub(r"[^a-zA-Z0-9_]", "_", source_key)
    return key if key[:1].isalpha() else f"field_{key}"


def _default(key: str, option: UserConfigOption) -> str | float | bool | None:
    value = option.default
    where = f"user_config.{key}.default"
    if isinstance(value, list):
        raise Refused("user_config", f"{where} is a list, which only multiple values allow")
    if value is None or option.sensitive:
        return None
    if option.type == "boolean" and not isinstance(value, bool):
        raise Refused("user_config", f"{where} must be true or false")
    if option.type == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise Refused("user_config", f"{where} must be a number")
    if option.type in ("string", "directory", "file") and not isinstance(value, str):
        raise Refused("user_config", f"{where} must be a string")
    return value


def setup_fields(user_config: Mapping[str, UserConfigOption] | None) -> list[SetupField]:
    """The setup fields for a manifest's user_config, in manifest order."""
    fields: list[SetupField] = []
    keys: dict[str, str] = {}
    for source_key, option in (user_config or {}).items():
        if option.multiple:
            raise Refused("user_config", f"user_config.{source_key} asks for multiple values; not supported")
        key = setup_key(source_key)
        if key in keys:
            raise Refused(
                "user_config", f"user_config keys '{keys[key]}' and '{source_key}' map to the same field"
            )
        keys[key] = source_key
        sensitive = bool(option.sensitive)
        kind: SetupType
        if sensitive:
            kind = "secret"
        elif option.type in ("number", "boolean"):
            kind = option.type
        else:
            kind = "string"
        fields.append(
            SetupField(
                key=key,
                source_key=source_key,
                label=option.title,
                type=kind,
                required=bool(option.required),
                sensitive=sensitive,
                description=option.description,
                default=_default(source_key, option),
            )
        )
    return fields
