"""The installation's engine record and journal, kept in a Secret the installation owns.

The record holds ids, what was written, HMACs of secret values and the key of those HMACs, and
the creates in flight: enough to resume or roll back after the operator dies at any point. Every
write carries the resourceVersion last read, so two writers (a second replica, a stale run) can
never silently overwrite each other: the loser gets ``StateConflict`` and its run stops.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from typing import Any

from pydantic import ValidationError

from bundle_operator.engine.record import Record
from bundle_operator.k8s.installation.watch_cache import MISS, StateSecrets
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.resources import API_VERSION

RECORD_KEY = "record.json.gz"  # gzip: a record holds what was written, skill texts included
PLAIN_RECORD_KEY = "record.json"
# A Secret holds at most 1 MiB of data; keep room for the metadata and base64's growth.
MAX_RECORD_BYTES = 700 * 1024
# Not the finalizer kopf manages on our resources: kopf would take it off any object it watches.
FINALIZER = "bundle-operator.dev/state-protection"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_INSTALLATION = "bundle-operator.dev/installation"


class StateConflict(Exception):
    """The state Secret changed since it was read: another writer is at work."""


class StateUnreadable(Exception):
    """The state Secret exists but does not hold a record this operator can read."""


class RecordTooLarge(Exception):
    """The record would not fit in its Secret."""


def _compressed(data: Any) -> bytes:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return gzip.compress(text.encode(), compresslevel=6, mtime=0)


def encode_record(record: Record) -> bytes:
    """The record as compressed JSON, as stored in the state Secret."""
    return _compressed(record.model_dump(mode="json"))


def decode_record(data: dict[str, str]) -> Record:
    """The record from a state Secret's data (compressed, or plain from an older operator)."""
    if RECORD_KEY in data:
        return Record.model_validate_json(gzip.decompress(base64.b64decode(data[RECORD_KEY])))
    return Record.model_validate_json(base64.b64decode(data[PLAIN_RECORD_KEY]))


def state_secret_name(installation: str) -> str:
    """``<installation>-bundle-state``, shortened with a hash when the name would be too long."""
    name = f"{installation}-bundle-state"
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(installation.encode()).hexdigest()[:10]
    return f"{installation[:229]}-{digest}-bundle-state"


def _label_value(value: str) -> str:
    if len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value):
        return value
    return hashlib.sha256(value.encode()).hexdigest()[:40]


class StateStore:
    """Load and persist one installation's record."""

    def __init__(self, kube: Kube, installation: dict[str, Any], cache: StateSecrets | None = None) -> None:
        meta = installation["metadata"]
        self._kube = kube
        self._cache = cache
        self.namespace: str = meta["namespace"]
        self.owner_name: str = meta["name"]
        self.owner_uid: str = meta["uid"]
        self.name = state_secret_name(self.owner_name)
        self._resource_version: str | None = None
        self._finalizers: list[str] = [FINALIZER]
        self.writes = 0
        # The state Secret is being deleted: its namespace is (users never delete it themselves).
        self.terminating = False

    def _identity(self) -> str:
        # The uid makes idempotency keys of a re-created installation differ from its predecessor's.
        return f"k8s/{self.namespace}/{self.owner_name}/{self.owner_uid}"

    async def load(self, workspace: str, *, fresh: bool = False) -> Record:
        """The record, or a new one (not yet written) when the installation has none.

        From the watch cache when one is given, unless ``fresh`` (an uninstall reads the API server).
        """
        secret = MISS if self._cache is None or fresh else self._cache.lookup(self.namespace, self.name)
        if secret is MISS:
            secret = await self._kube.read_secret(self.namespace, self.name)
            if secret is not None and self._cache is not None:
                self._cache.wrote(self.namespace, self.name, secret)
        if secret is None:
            self._resource_version = None
            return Record(installation=self._identity(), workspace=workspace)
        owners = secret.get("metadata", {}).get("ownerReferences") or []
        if not any(o.get("uid") == self.owner_uid for o in owners):
            raise StateUnreadable(
                f"Secret '{self.name}' exists but is not owned by this BundleInstallation; "
                "rename or delete it"
            )
        self._resource_version = secret["metadata"]["resourceVersion"]
        existing = list(secret["metadata"].get("finalizers") or [])
        # A Secret being deleted takes no new finalizer; otherwise ours is always there.
        terminating = bool(secret["metadata"].get("deletionTimestamp"))
        self.terminating = terminating
        self._finalizers = existing if terminating or FINALIZER in existing else [*existing, FINALIZER]
        data = secret.get("data") or {}
        if RECORD_KEY not in data and PLAIN_RECORD_KEY not in data:
            return Record(installation=self._identity(), workspace=workspace)
        try:
            record = decode_record(data)
        except (ValidationError, ValueError, OSError, EOFError) as exc:
            raise StateUnreadable(
                f"Secret '{self.name}' key '{RECORD_KEY}' is not a record ({type(exc).__name__})"
            ) from None
        if record.workspace != workspace:
            raise StateUnreadable(
                f"Secret '{self.name}' records workspace '{record.workspace}', not '{workspace}'"
            )
        return record

    def _body(self, record: Record) -> dict[str, Any]:
        data = encode_record(record)
        if len(data) > MAX_RECORD_BYTES:
            raise RecordTooLarge(
                f"the installation's record is {len(data) // 1024} KiB compressed, more than its state "
                f"Secret '{self.name}' can hold ({MAX_RECORD_BYTES // 1024} KiB)"
            )
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {
                LABEL_MANAGED_BY: "bundle-operator",
                LABEL_INSTALLATION: _label_value(self.owner_name),
            },
            # The namespace controller deletes the state Secret together with the installation; this
            # keeps the record readable until the installation's own finalizer has uninstalled.
            "finalizers": self._finalizers,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "BundleInstallation",
                    "name": self.owner_name,
                    "uid": self.owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if self._resource_version is not None:
            metadata["resourceVersion"] = self._resource_version
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": metadata,
            "data": {RECORD_KEY: base64.b64encode(data).decode()},
        }

    @property
    def stored(self) -> bool:
        """Whether the record has been written at least once (its HMAC key outlives this run)."""
        return self._resource_version is not None

    async def persist(self, record: Record) -> None:
        """Write the record, failing with StateConflict if anyone wrote since it was read."""
        body = self._body(record)
        try:
            if self._resource_version is None:
                written = await self._kube.create_secret(self.namespace, body)
            else:
                written = await self._kube.replace_secret(self.namespace, self.name, body)
        except KubeError as exc:
            if exc.conflict:
                if self._cache is not None:
                    self._cache.conflicted(self.namespace, self.name)
                raise StateConflict(
                    f"Secret '{self.name}' changed while this run held it ({exc.reason}); the run stops "
                    "and starts over"
                ) from None
            raise
        self._resource_version = written["metadata"]["resourceVersion"]
        self.writes += 1
        if self._cache is not None:
            self._cache.wrote(self.namespace, self.name, written)

    async def release(self) -> None:
        """Drop the state Secret's finalizer and delete it: the installation is done with it."""
        if self._cache is not None:
            self._cache.released(self.namespace, self.name)
        secret = await self._kube.read_secret(self.namespace, self.name)
        owners = (secret or {}).get("metadata", {}).get("ownerReferences") or []
        if secret is None or not any(o.get("uid") == self.owner_uid for o in owners):
            return  # gone, or somebody else's: never touched
        if FINALIZER in (secret.get("metadata", {}).get("finalizers") or []):
            remaining = [f for f in secret["metadata"]["finalizers"] if f != FINALIZER]
            await self._kube.patch_secret(self.namespace, self.name, {"metadata": {"finalizers": remaining}})
        await self._kube.delete_secret(self.namespace, self.name)


def projected_size(record: Record, specs: list[dict[str, Any]]) -> int:
    """Roughly how large the record grows once ``specs`` are written: compressed bytes."""
    return len(_compressed([record.model_dump(mode="json"), specs]))
