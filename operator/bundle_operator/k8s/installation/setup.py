"""Setup values of an installation: literal ``value`` for plain fields, ``secretKeyRef`` for the rest.

A secret field given as ``value`` is refused (the value would sit in the spec, where anyone who can
read the resource sees it); a missing Secret or key is a problem that names the Secret and key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundle_operator.document.models import Bundle
from bundle_operator.k8s.logs import REDACTOR
from bundle_operator.k8s.object_keys import KeyMissing, SecretReader, secret_key
from bundle_operator.k8s.resources import BundleInstallationSpec
from bundle_operator.sources.models import LocalObjectKeyRef


@dataclass
class SetupProblem(Exception):
    """A setup value cannot be had; ``reason`` is the condition reason."""

    reason: str
    message: str

    def __str__(self) -> str:
        return self.message


async def secret_value(reader: SecretReader, namespace: str, ref: LocalObjectKeyRef, field: str) -> str:
    """The text under ``ref``; a SetupProblem naming ``field`` when it cannot be read."""
    try:
        raw = await secret_key(reader, namespace, ref, field)
    except KeyMissing as gone:
        hint = gone.hinted(
            "create it (the installation continues by itself once it exists)", "add the key to the Secret"
        )
        raise SetupProblem(gone.reason, hint) from None
    try:
        value = base64.b64decode(raw, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise SetupProblem(
            "InvalidSecretValue",
            f"{field}: Secret '{ref.name}' key '{ref.key}' does not hold UTF-8 text",
        ) from None
    # A safety net: should a value ever reach a log line, it is masked there.
    REDACTOR.add(value)
    return value


async def read_setup(
    spec: BundleInstallationSpec, bundle: Bundle, namespace: str, reader: SecretReader
) -> dict[str, str]:
    """The setup values of ``spec`` for ``bundle``; raises SetupProblem for the first one that fails."""
    secret_fields = {f.key for f in bundle.setup if f.type == "secret"}
    values: dict[str, str] = {}
    for item in spec.setup:
        field = f"spec.setup[key={item.key}]"
        if item.value is not None and item.secret_key_ref is not None:
            raise SetupProblem("InvalidSetup", f"{field}: give exactly one of value or secretKeyRef")
        if item.value is not None:
            if item.key in secret_fields:
                raise SetupProblem(
                    "SecretValueInSpec",
                    f"{field}: '{item.key}' is a secret field and cannot be given as value; "
                    "put it in a Secret and refer to it with secretKeyRef",
                )
            values[item.key] = item.value
        elif item.secret_key_ref is not None:
            values[item.key] = await secret_value(reader, namespace, item.secret_key_ref, field)
        else:
            raise SetupProblem("InvalidSetup", f"{field}: give value or secretKeyRef")
    return values


def referenced_secrets(spec: dict[str, Any]) -> set[str]:
    """Names of the Secrets a raw installation spec refers to (setup and platform token)."""
    names: set[str] = set()
    for item in spec.get("setup") or []:
        ref = item.get("secretKeyRef") if isinstance(item, dict) else None
        if isinstance(ref, dict) and isinstance(ref.get("name"), str):
            names.add(ref["name"])
    token = token_secret(spec)
    if token is not None:
        names.add(token)
    return names


def token_secret(spec: Mapping[str, Any]) -> str | None:
    """The Secret a raw installation spec's ``platform.tokenSecretRef`` names, or None."""
    platform = spec.get("platform")
    ref = platform.get("tokenSecretRef") if isinstance(platform, Mapping) else None
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else None
