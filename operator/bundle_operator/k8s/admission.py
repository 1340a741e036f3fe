"""What the validating webhook answers (DESIGN.md §9.1): analyze at admission.

A Bundle with an inline document is refused when the offline analyze of the document alone blocks
(as the Bundle's own status judges it); its warnings are returned for kubectl to print. A
BundleInstallation is refused when it is known to be wrong without calling the platform. Deletes,
status-only and metadata-only updates are never judged. No answer carries a value from a spec:
issue messages name codes, paths and keys.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from bundle_operator.document.parse import parse_bundle_data
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.resources import (
    BUNDLE_PLURAL,
    BundleInstallationSpec,
    BundleSpec,
    EndpointSpec,
)
from bundle_operator.k8s.sources import SourceError, check_one_source

GROUP = "bundle-operator.dev"
# kubectl prints every cause; an answer stays readable (and small) with the first ones.
MAX_CAUSES = 20
MAX_WARNINGS = 20
# The API server drops a warning longer than this.
MAX_WARNING_CHARS = 256


class BundleReader(Protocol):
    """Reads a Bundle of the namespace, for the setup fields its status lists."""

    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as JSON, or None."""


@dataclass
class Verdict:
    """Allowed or refused, with one cause per problem (``field``, ``reason``, ``message``)."""

    allowed: bool = True
    causes: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def refuse(self, reason: str, field_path: str, message: str) -> None:
        """Add a problem; its message starts with its code, which is all kubectl shows of it."""
        self.allowed = False
        self.causes.append({"reason": reason, "field": field_path, "message": f"{reason}: {message}"})

    @property
    def message(self) -> str:
        """Every problem on one line: ``code at path: message; ...``."""
        shown = [f"{c['reason']} at {c['field']}: {c['message'].split(': ', 1)[-1]}" for c in self.causes]
        return "; ".join(shown)


async def review(request: dict[str, Any], bundles: BundleReader) -> Verdict:
    """The verdict on one AdmissionReview request of our group."""
    if request.get("operation") not in ("CREATE", "UPDATE") or request.get("subResource"):
        return Verdict()
    obj = request.get("object")
    if not isinstance(obj, dict):
        return Verdict()
    old = request.get("oldObject")
    if request.get("operation") == "UPDATE" and isinstance(old, dict) and old.get("spec") == obj.get("spec"):
        return Verdict()  # metadata only (a finalizer removed, a label): nothing to judge
    kind = (request.get("kind") or {}).get("kind")
    if kind == "Bundle":
        return await _bundle(obj)
    if kind == "BundleInstallation":
        namespace = str(request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "")
        return await _installation(obj, namespace, bundles)
    if kind == "Endpoint":
        return _shape(EndpointSpec, obj, Verdict())
    return Verdict()


def _shape(model: type[BaseModel], obj: dict[str, Any], verdict: Verdict) -> Verdict:
    try:
        model.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        verdict.refuse("invalid_spec", "spec", cond.spec_error(exc))
    return verdict


async def _bundle(obj: dict[str, Any]) -> Verdict:
    verdict = Verdict()
    try:
        spec = BundleSpec.model_validate(obj.get("spec") or {})
        check_one_source(spec.source)  # the same rule the operator's resolve applies
    except ValidationError as exc:
        verdict.refuse("invalid_spec", "spec", cond.spec_error(exc))
        return verdict
    except SourceError as exc:
        verdict.refuse("invalid_source", "spec.source", exc.message.removeprefix("spec.source: "))
        return verdict
    if spec.source.inline is None:
        return verdict  # read by the operator later: shape checks only here
    parsed = await asyncio.to_thread(parse_bundle_data, spec.source.inline)
    for issue in parsed.issues:
        if issue.blocking:
            if len(verdict.causes) < MAX_CAUSES:
                verdict.refuse(str(issue.code), issue.path or "/", issue.message)
            else:
                verdict.allowed = False
        elif len(verdict.warnings) < MAX_WARNINGS:
            warning = f"{issue.code} at {issue.path or '/'}: {issue.message}"
            verdict.warnings.append(warning[:MAX_WARNING_CHARS])
    blocking = sum(1 for i in parsed.issues if i.blocking)
    if blocking > MAX_CAUSES:
        more = f"{blocking - MAX_CAUSES} more blocking issues; bundlectl analyze lists all"
        verdict.causes.append({"reason": "more_issues", "field": "/", "message": f"more_issues: {more}"})
    return verdict


async def _installation(obj: dict[str, Any], namespace: str, bundles: BundleReader) -> Verdict:
    verdict = Verdict()
    spec = obj.get("spec") or {}
    given = spec.get("setup")
    setup: list[Any] = given if isinstance(given, list) else []
    seen: set[str] = set()
    for index, item in enumerate(setup):
        at = f"/spec/setup/{index}"
        if not isinstance(item, dict):
            verdict.refuse("invalid_setup", at, "each setup entry is {key, value} or {key, secretKeyRef}")
            continue
        key = str(item.get("key") or "")
        has_value, has_ref = (
            "value" in item and item["value"] is not None,
            item.get("secretKeyRef") is not None,
        )
        if has_value == has_ref:
            verdict.refuse(
                "invalid_setup", at, f"setup key '{key}': give exactly one of value or secretKeyRef"
            )
        if key in seen:
            verdict.refuse("duplicate_setup_key", at, f"setup key '{key}' is given twice")
        seen.add(key)
    if not verdict.allowed:
        return verdict
    verdict = _shape(BundleInstallationSpec, obj, verdict)
    if not verdict.allowed:
        return verdict
    name = (spec.get("bundleRef") or {}).get("name")
    bundle = await bundles.read_custom(BUNDLE_PLURAL, namespace, str(name)) if name else None
    fields = ((bundle or {}).get("status") or {}).get("setupFields")
    if not isinstance(fields, list):
        return verdict  # no Bundle yet, or not resolved yet: the operator checks it later
    declared = {str(f.get("key")): str(f.get("type")) for f in fields if isinstance(f, dict)}
    for index, item in enumerate(setup):
        key, at = str(item.get("key") or ""), f"/spec/setup/{index}"
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            verdict.refuse(
                "unknown_setup_key", at, f"bundle {name} declares no setup field '{key}' (it has: {known})"
            )
        elif declared[key] == "secret" and item.get("value") is not None:
            verdict.refuse(
                "secret_as_value",
                at,
                f"setup field '{key}' is a secret: put it in a Secret and refer to it with secretKeyRef",
            )
    return verdict


def admission_response(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview that answers request ``uid``."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {
            "code": 422,
            "reason": "Invalid",
            "message": verdict.message,
            "details": {"causes": verdict.causes},
        }
    if verdict.warnings:
        response["warnings"] = verdict.warnings
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
