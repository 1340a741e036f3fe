"""An exported workspace as custom resources for a Git repository (DESIGN.md §4).

A Bundle whose ``spec.source.inline`` is the exported document, and a BundleInstallation that
installs it: every setup field the export made (each a ``secret`` field, since export writes only
credentials as setup) comes from a Secret by ``secretKeyRef``, with the Secret's name and keys
derived from the bundle, never its values; every model requirement is mapped to the model the
workspace runs today, and every knowledge source address to itself, so the installation does not
stall on a substitution nobody chose. The
Secret itself is not written: a comment at the top says which one to create, with which keys.
"""

from __future__ import annotations

import re
from typing import Any

from bundle_operator.engine.export import render
from bundle_operator.k8s.resources import (
    API_VERSION,
    BundleInstallationSpec,
    BundleRef,
    BundleSpec,
    SetupValue,
)
from bundle_operator.sources.models import BundleSource, LocalObjectKeyRef

_NAME_MAX = 63


def resource_name(name: str) -> str:
    """A Kubernetes object name (DNS label) derived from a bundle name."""
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:_NAME_MAX].strip("-")
    if not base or not base[0].isalpha():
        base = f"b-{base}".strip("-")[:_NAME_MAX].strip("-")
    return base


def secret_name(name: str) -> str:
    """The Secret the installation reads its setup values from."""
    return f"{resource_name(name)[: _NAME_MAX - len('-setup')].rstrip('-')}-setup"


def export_resources(document: dict[str, Any], workspace: str, namespace: str | None) -> list[dict[str, Any]]:
    """The Bundle and the BundleInstallation for an exported document, as manifests."""
    name = resource_name(str(document["name"]))
    secret = secret_name(str(document["name"]))
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    bundle_spec = BundleSpec(source=BundleSource(inline=document))
    setup = [
        SetupValue(key=f["key"], secret_key_ref=LocalObjectKeyRef(name=secret, key=f["key"]))
        for f in document.get("setup", [])
    ]
    substitutions = {
        f"{r['kind']}:{r['ref']}": r["ref"]
        for r in document.get("requires", [])
        if r["policy"] == "substitute"
    }
    installation_spec = BundleInstallationSpec(
        bundle_ref=BundleRef(name=name), workspace=workspace, setup=setup, substitutions=substitutions
    )
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "Bundle",
            "metadata": dict(metadata),
            "spec": _spec(bundle_spec.model_dump(by_alias=True, exclude_none=True)),
        },
        {
            "apiVersion": API_VERSION,
            "kind": "BundleInstallation",
            "metadata": dict(metadata),
            "spec": _spec(
                installation_spec.model_dump(
                    by_alias=True,
                    exclude_none=True,
                    include={"bundle_ref", "workspace", "setup", "substitutions"},
                )
            ),
        },
    ]


def _spec(data: dict[str, Any]) -> dict[str, Any]:
    """Drop empty lists and maps, so the manifest says only what matters."""
    return {k: v for k, v in data.items() if v not in ([], {})}


def render_resources(resources: list[dict[str, Any]]) -> str:
    """The manifests as one multi-document YAML file, headed by what to create before applying."""
    installation = resources[1]
    setup = installation["spec"].get("setup", [])
    lines = [
        "# Exported by `bundlectl export --as-resource`: a Bundle and a BundleInstallation.",
        "# No credential is in this file. Before applying, create the Secret the installation reads:",
    ]
    if setup:
        secret = setup[0]["secretKeyRef"]["name"]
        keys = " ".join(f"--from-literal={s['secretKeyRef']['key']}=..." for s in setup)
        namespace = installation["metadata"].get("namespace")
        where = f" -n {namespace}" if namespace else ""
        lines.append(f"#   kubectl create secret generic {secret}{where} {keys}")
    else:
        lines[-1] = "# No credential is in this file, and the installation needs no Secret."
    if installation["spec"].get("substitutions"):
        lines.append(
            "# spec.substitutions maps each model and source address to what the workspace uses today; "
            "change as needed."
        )
    return "\n".join(lines) + "\n---\n" + "---\n".join(render(r) for r in resources)
