"""Kubernetes Events about our resources, as ``kubectl describe`` shows them."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from bundle_operator.k8s.conditions import now_rfc3339
from bundle_operator.k8s.event_reasons import EventReason
from bundle_operator.k8s.kube import Kube, KubeError

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024


class Events:
    """Posts Events; a failure to post is logged and never fails a reconcile."""

    def __init__(self, kube: Kube, component: str = "bundle-operator") -> None:
        self._kube = kube
        self._component = component

    async def post(self, obj: dict[str, Any], event: EventReason, message: str) -> None:
        """Record ``event`` (one of ``event_reasons``, which fixes its type) with ``message`` on ``obj``."""
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        stamp = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'unknown')[:200]}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": event.type,
            "reason": event.reason,
            "message": message[:MAX_MESSAGE],
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self._kube.post_event(namespace, body)
        except KubeError as exc:
            log.warning("could not post event %s: %s", event.reason, exc.reason or exc.status)
