"""One key of a Secret or ConfigMap the operator reads by reference, and why it is not there."""

from __future__ import annotations

from typing import Any, Protocol

from bundle_operator.k8s.conditions import Failing
from bundle_operator.sources.models import LocalObjectKeyRef


class SecretReader(Protocol):
    """Reads Secrets of a namespace (the operator's kube client, or a fake)."""

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret as the API returns it (``data`` base64), or None when it is missing."""


class KeyMissing(Failing):
    """The object, or its key, does not exist; the message names the field, object and key."""

    def __init__(self, reason: str, message: str, *, object_missing: bool) -> None:
        super().__init__(reason, message)
        self.object_missing = object_missing

    def hinted(self, object_hint: str, key_hint: str) -> str:
        """The message with what to do about it."""
        return f"{self.message}; {object_hint if self.object_missing else key_hint}"


def missing(
    kind: str, namespace: str, ref: LocalObjectKeyRef, field: str, *, found: bool, where: str = ""
) -> KeyMissing:
    """The KeyMissing for a ``kind`` (Secret, ConfigMap) that was not ``found``, or lacks the key."""
    if not found:
        message = f"{field}: {kind} '{ref.name}' does not exist in namespace '{namespace}'"
        return KeyMissing(f"{kind}NotFound", message, object_missing=True)
    message = f"{field}: {kind} '{ref.name}' has no key '{ref.key}'{where}"
    return KeyMissing(f"{kind}KeyNotFound", message, object_missing=False)


async def secret_key(reader: SecretReader, namespace: str, ref: LocalObjectKeyRef, field: str) -> str:
    """The Secret's ``data[key]`` as stored (base64); KeyMissing when the Secret or key is absent."""
    secret = await reader.read_secret(namespace, ref.name)
    if secret is None:
        raise missing("Secret", namespace, ref, field, found=False)
    encoded = (secret.get("data") or {}).get(ref.key)
    if not isinstance(encoded, str):
        raise missing("Secret", namespace, ref, field, found=True)
    return encoded
