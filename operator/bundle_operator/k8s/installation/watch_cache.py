"""What the operator's watches already told it, read instead of the API server.

A settled installation's drift check needs its Bundle, its state Secret and the Secrets its spec
refers to. All three stream to the operator anyway (kopf watches Bundles and Secrets), so a check
reads them from here and the API server sees no read at all:

- Bundles and state Secrets come from kopf indexes (``bundle_objects``, ``state_secrets``), which
  kopf fills from a full list before any handler runs: a key missing there is an object missing.
- The Secrets an installation refers to (its platform token, its setup values) are kept once read,
  and every watch event of a kept Secret replaces or drops it.
- The operator writes each state Secret itself and keeps what it wrote, so a run never works from
  an older record than its own last write while the watch catches up.

Without kopf (tests, the CLI) nothing is attached and every read goes to the API server. A watch
cache can lag the API server; the state Secret's writes carry the resourceVersion read, so a lagging
copy ends in a conflict, after which that Secret is read from the API server again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from bundle_operator.k8s.kube import Kube

Key = tuple[str, str]
# Referenced Secrets kept at most (the oldest kept goes first); a fleet shares a few.
SECRETS_KEPT = 4096


def first_of(index: Mapping[Any, Any] | None, key: Any) -> Any:
    """The value a kopf index holds under ``key`` (one object per key here), or None."""
    if index is None:
        return None
    for value in index.get(key, ()):
        return value
    return None


def bundle_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a reconcile reads of a Bundle: identity, source, and the registry resolution in status."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "generation", "resourceVersion")},
        "spec": {"source": (body.get("spec") or {}).get("source")},
        "status": {k: status[k] for k in ("source", "observedGeneration") if k in status},
    }


def state_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """What ``StateStore.load`` reads of a state Secret: its version, owners, finalizers and record."""
    meta = body.get("metadata") or {}
    trimmed: dict[str, Any] = {
        "resourceVersion": meta.get("resourceVersion"),
        "ownerReferences": [{"uid": o.get("uid")} for o in meta.get("ownerReferences") or ()],
        "finalizers": list(meta.get("finalizers") or ()),
    }
    if meta.get("deletionTimestamp"):
        trimmed["deletionTimestamp"] = meta["deletionTimestamp"]
    return {"metadata": trimmed, "data": dict(body.get("data") or {})}


def _version(obj: Mapping[str, Any] | None) -> int | None:
    """The object's resourceVersion as a number (etcd's revision), None when it is not one."""
    if obj is None:
        return None
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else None


class _Miss:
    """Not known here: read the API server."""


MISS: Any = _Miss()


class StateSecrets:
    """State Secrets: the ``state_secrets`` index and this process's own writes, the newer first."""

    def __init__(self) -> None:
        self.index: Mapping[Any, Any] | None = None
        self._written: dict[Key, dict[str, Any]] = {}
        self._doubtful: set[Key] = set()

    def lookup(self, namespace: str, name: str) -> Any:
        """The state Secret as last seen (trimmed), None when there is none, or MISS."""
        key = (namespace, name)
        if self.index is None:
            return MISS
        seen = first_of(self.index, key)
        if key in self._doubtful:
            if seen is not None:
                return MISS
            # The watch saw it go (or never saw it): what a read would most likely say too, and a
            # create that finds it there after all conflicts and makes it doubtful again.
            self._doubtful.discard(key)
            return None
        written = self._written.get(key)
        if written is None:
            return seen
        if _version(written) is None:
            return MISS
        if self._caught_up(key, seen):
            return seen
        return written

    def wrote(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """This process wrote (or read from the API server) the Secret as ``body``."""
        key = (namespace, name)
        self._doubtful.discard(key)
        if self.index is not None:
            self._written[key] = state_view(body)

    def delivered(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """The watch delivered the Secret: a write of ours it has caught up with is kept no longer
        (until a run looked the Secret up, a fleet's every record was held twice)."""
        self._caught_up((namespace, name), body)

    def _caught_up(self, key: Key, seen: Mapping[str, Any] | None) -> bool:
        """Whether the watch's ``seen`` is at least as new as this process's own write of ``key``;
        if so the write is kept no longer."""
        written = self._written.get(key)
        seen_version, written_version = _version(seen), _version(written)
        if seen_version is None or written_version is None or seen_version < written_version:
            return False
        del self._written[key]
        return True

    def conflicted(self, namespace: str, name: str) -> None:
        """Somebody else wrote since: read the Secret from the API server next time."""
        key = (namespace, name)
        self._written.pop(key, None)
        if self.index is not None:
            self._doubtful.add(key)

    def released(self, namespace: str, name: str) -> None:
        """This process deletes the Secret: until the watch sees it go, read the API server."""
        self.conflicted(namespace, name)


class ReferencedSecrets:
    """Secrets installations refer to, kept once read and kept current by the Secret watch."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self.live = False  # set once the Secret watch runs: only then can a kept copy go stale safely
        self._kept: dict[Key, dict[str, Any] | None] = {}
        # One read in flight per Secret, shared by every run that asks meanwhile (a fleet's
        # installations share their Secrets), and whether an event for it came while it was out:
        # its answer may then be older than the event, and is not kept.
        self._reading: dict[Key, asyncio.Future[dict[str, Any] | None]] = {}
        self._overtaken: dict[Key, bool] = {}

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret (at least its ``data``, base64) or None, as ``object_keys.SecretReader``."""
        key = (namespace, name)
        if not self.live:
            return await self._kube.read_secret(namespace, name)
        if key in self._kept:
            return self._kept[key]
        pending = self._reading.get(key)
        if pending is None:
            self._overtaken[key] = False
            pending = asyncio.ensure_future(self._fetch(key))
            self._reading[key] = pending
        return await asyncio.shield(pending)

    async def _fetch(self, key: Key) -> dict[str, Any] | None:
        try:
            secret = await self._kube.read_secret(*key)
        finally:
            overtaken = self._overtaken.pop(key, True)
            del self._reading[key]
        if not overtaken:
            self._keep(key, _data_only(secret))
        return secret

    def observe(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> None:
        """A watch event of the Secret; ``body`` None when it was deleted."""
        key = (namespace, name)
        if key in self._overtaken:
            self._overtaken[key] = True
        if key in self._kept:
            self._kept[key] = _data_only(body)

    def _keep(self, key: Key, value: dict[str, Any] | None) -> None:
        if len(self._kept) >= SECRETS_KEPT:
            self._kept.pop(next(iter(self._kept)))
        self._kept[key] = value


def _data_only(secret: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return {"data": dict(secret.get("data") or {})} if secret is not None else None


class Bundles:
    """Bundles from the ``bundle_objects`` index; a Bundle the index lacks is read (it may be newer)."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self.index: Mapping[Any, Any] | None = None

    async def read(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The Bundle as the watch last delivered it, or as the API server has it."""
        seen = first_of(self.index, (namespace, name))
        if seen is not None:
            return seen  # type: ignore[no-any-return]
        return await self._kube.read_custom(plural, namespace, name)


class WatchCaches:
    """The caches one operator process keeps (see the module's docstring)."""

    def __init__(self, kube: Kube) -> None:
        self.bundles = Bundles(kube)
        self.secrets = ReferencedSecrets(kube)
        self.states = StateSecrets()

    def attach(self, bundles: Mapping[Any, Any], states: Mapping[Any, Any]) -> None:
        """kopf's live indexes (from any handler's arguments) and the Secret watch are running."""
        self.bundles.index = bundles
        self.states.index = states
        self.secrets.live = True
