"""Hold the Secret an uninstall needs until the uninstall is done, as Kubernetes holds a PVC in use.

Deleting a namespace deletes everything in it at once: the platform token Secret of an
installation goes together with the installation, whose finalizer then cannot reach the platform,
and the namespace stays Terminating for ever. So a Secret named by an installation's
``spec.platform.tokenSecretRef`` (under ``deletionPolicy: Delete``, the only policy whose uninstall
calls the platform) carries the finalizer ``bundle-operator.dev/in-use``. A deleted Secret stays
readable while it has one. The operator takes it off once no installation of the namespace needs
the Secret for its uninstall any more: after the last one is gone, or when their specs stop
naming it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from bundle_operator.k8s.installation.setup import token_secret
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra

log = logging.getLogger(__name__)

IN_USE_FINALIZER = "bundle-operator.dev/in-use"


def uninstall_secret(spec: Mapping[str, Any]) -> str | None:
    """The Secret an installation's uninstall reads (its platform token), or None."""
    return None if spec.get("deletionPolicy") == "Orphan" else token_secret(spec)


class SecretHolds:
    """Puts the in-use finalizer on Secrets and takes it off; remembers which ones it holds."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        # (namespace, name) -> the Secret's uid when the finalizer was seen on it.
        self.held: dict[tuple[str, str], str] = {}

    async def hold(self, namespace: str, name: str) -> None:
        """Put the finalizer on the Secret (once per process); a missing Secret is not held."""
        if (namespace, name) in self.held:
            return
        secret = await self.kube.read_secret(namespace, name)
        if secret is None:
            return
        meta = secret.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if IN_USE_FINALIZER not in finalizers:
            if meta.get("deletionTimestamp"):
                return  # no finalizer can be added to a Secret being deleted
            await self._set(namespace, name, [*finalizers, IN_USE_FINALIZER], meta)
        self.held[(namespace, name)] = str(meta.get("uid", ""))

    async def release(self, namespace: str, name: str) -> None:
        """Take the finalizer off the Secret (a missing Secret is fine)."""
        self.held.pop((namespace, name), None)
        secret = await self.kube.read_secret(namespace, name)
        if secret is None:
            return
        meta = secret.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if IN_USE_FINALIZER in finalizers:
            await self._set(namespace, name, [f for f in finalizers if f != IN_USE_FINALIZER], meta)

    async def follow_installation(
        self, namespace: str, needs: str | None, users: Callable[[str], set[str]]
    ) -> None:
        """An installation event: hold the Secret it ``needs``; release held ones without ``users``."""
        if needs is not None:
            await self.hold(namespace, needs)
        for held_namespace, held in list(self.held):
            if held_namespace == namespace and held != needs and not users(held):
                await self.release(namespace, held)

    async def follow_secret(self, namespace: str, name: str, meta: Mapping[str, Any], needed: bool) -> None:
        """A Secret event (every Secret at the start too): hold it, remember it, or release it."""
        marked = IN_USE_FINALIZER in (meta.get("finalizers") or [])
        if needed and marked:
            self.held[(namespace, name)] = str(meta.get("uid", ""))
        elif needed:
            self.held.pop((namespace, name), None)  # taken off by someone else: put it back
            await self.hold(namespace, name)
        elif marked:
            await self.release(namespace, name)

    async def installation_seen(
        self, namespace: str, name: str, spec: Mapping[str, Any] | None, users_of: Mapping[Any, Any]
    ) -> None:
        """An installation event (``spec`` None: deleted), with the ``uninstall_secrets`` index."""
        secret = None if spec is None else uninstall_secret(spec)

        def users(held: str) -> set[str]:
            return set(users_of.get((namespace, held), ())) - ({name} if spec is None else set())

        try:
            await self.follow_installation(namespace, secret, users)
        except KubeError as exc:
            # The next event of the installation (its own status writes bring one) tries again.
            where = object_extra("BundleInstallation", namespace, name, None)
            log.warning("could not hold or release a Secret: %s", exc.reason, extra=where)

    async def secret_seen(
        self, namespace: str, name: str, meta: Mapping[str, Any], users_of: Mapping[Any, Any]
    ) -> None:
        """A Secret event, with the ``uninstall_secrets`` index: hold it or release it."""
        try:
            await self.follow_secret(namespace, name, meta, needed=bool(users_of.get((namespace, name))))
        except KubeError as exc:
            where = object_extra("Secret", namespace, name, meta.get("uid"))
            log.warning("could not hold or release a Secret: %s", exc.reason, extra=where)

    async def _set(self, namespace: str, name: str, finalizers: list[str], meta: Mapping[str, Any]) -> None:
        # The resourceVersion makes it a compare-and-swap: a concurrent change of the list fails
        # with a conflict and is retried by the next run, never lost.
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
        try:
            await self.kube.patch_secret(namespace, name, patch)
        except KubeError as exc:
            if not exc.not_found:
                raise
