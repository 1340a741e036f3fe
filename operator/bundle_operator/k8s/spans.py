"""The names of the operator's spans' attributes, and what a reconcile tells its span.

A reconcile is one trace: the root span ``reconcile <kind>`` (``envelope.py``), a child per named
step of the reconciler (``resolve``, ``analyze``, ``apply``...), and under those a CLIENT span per
platform call (``platform/http_calls.py``). docs/how-to/tracing.md lists them for users; keep the
two in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from opentelemetry.context import Context

from bundle_operator.telemetry import tracing

# Why a run started: a watch event (kopf handler), the drift clock, or a periodic refresh.
Trigger = Literal["event", "drift", "refresh"]

# An empty context: the run's span starts a trace of its own, whatever task started the run.
ROOT: Final = Context()

KIND: Final = "bundle_operator.kind"
UID: Final = "bundle_operator.uid"
TRIGGER: Final = "bundle_operator.trigger"
RESULT: Final = "bundle_operator.result"
NAMESPACE: Final = "bundle_operator.namespace"
INSTALLATION: Final = "bundle_operator.installation"
BUNDLE: Final = "bundle_operator.bundle"
ENDPOINT: Final = "bundle_operator.endpoint"
WORKSPACE: Final = "bundle_operator.workspace"
BUNDLE_NAME: Final = "bundle_operator.bundle.name"
BUNDLE_VERSION: Final = "bundle_operator.bundle.version"


def installation(body: Mapping[str, Any]) -> None:
    """Name the installation on the current (reconcile) span: namespace, name, Bundle, workspace."""
    if not tracing.enabled():
        return
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    tracing.set_attributes(
        {
            NAMESPACE: meta.get("namespace"),
            INSTALLATION: meta.get("name"),
            BUNDLE: (spec.get("bundleRef") or {}).get("name"),
            WORKSPACE: spec.get("workspace"),
        }
    )


def bundle(body: Mapping[str, Any]) -> None:
    """Name the Bundle on the current (reconcile) span."""
    meta = body.get("metadata") or {}
    tracing.set_attributes({NAMESPACE: meta.get("namespace"), BUNDLE: meta.get("name")})


def endpoint(body: Mapping[str, Any]) -> None:
    """Name the Endpoint on the current (reconcile) span."""
    meta = body.get("metadata") or {}
    tracing.set_attributes({NAMESPACE: meta.get("namespace"), ENDPOINT: meta.get("name")})
