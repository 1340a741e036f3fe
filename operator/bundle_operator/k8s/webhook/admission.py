"""What the validating webhook answers (DESIGN.md §9.1): analyze at admission.

A Bundle with an inline document is refused when the offline analyze of the document alone blocks
(as the Bundle's own status judges it); its warnings are returned for kubectl to print. A
BundleInstallation is refused when it is known to be wrong without calling the platform. Deletes,
status-only and metadata-only updates are never judged. No answer carries a value from a spec:
issue messages name codes, paths and keys.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from bundle_operator.document.issues import shown
from bundle_operator.document.parse import parse_bundle_data
from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.bundle.sources import SourceError, check_one_source
from bundle_operator.k8s.resources import (
    BUNDLE_PLURAL,
    GROUP,
    MAX_SETUP_VALUES,
    BundleInstallationSpec,
    BundleSpec,
    EndpointSpec,
)

# kubectl prints every cause; an answer stays readable (and small) with the first ones.
MAX_CAUSES = 20
MAX_WARNINGS = 20
# The API server drops a warning longer than this.
MAX_WARNING_CHARS = 256
# A cause's message names a code, a path and at most a key: longer is a key someone made long.
MAX_CAUSE_CHARS = 512
JUDGED_KINDS = frozenset({"Bundle", "BundleInstallation", "Endpoint"})
# Deletes and connects are never judged: an object already stored can always be removed.
NOT_JUDGED_OPERATIONS = frozenset({"DELETE", "CONNECT"})
# The one subresource our kinds have; its updates change no spec.
STATUS_SUBRESOURCE = "status"
# Admission's own threads: a flood of reviews waits here instead of taking the default executor's
# threads from the reconcilers (a Bundle's source is parsed there too).
ANALYSIS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="admission")
M = TypeVar("M", bound=BaseModel)
SETUP_SHAPE = "each setup entry is {key, value} or {key, secretKeyRef}"


class BundleReader(Protocol):
    """Reads a Bundle of the namespace, for the setup fields its status lists."""

    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as JSON, or None."""


@dataclass
class Verdict:
    """Allowed or refused, with one cause per problem (``field``, ``reason``, ``message``).

    Causes past ``MAX_CAUSES`` are counted, not kept: a request with a million bad entries gets
    an answer of the same size as one with twenty.
    """

    allowed: bool = True
    causes: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    more: int = 0

    def refuse(self, reason: str, field_path: str, message: str) -> None:
        """Add a problem; its message starts with its code, which is all kubectl shows of it."""
        self.allowed = False
        if len(self.causes) >= MAX_CAUSES:
            self.more += 1
            return
        text = f"{reason}: {message}"
        if len(text) > MAX_CAUSE_CHARS:
            text = text[: MAX_CAUSE_CHARS - 1] + "…"
        self.causes.append({"reason": reason, "field": field_path[:MAX_CAUSE_CHARS], "message": text})

    def warn(self, warning: str) -> None:
        """Add a warning for kubectl to print, while there is room for one."""
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(warning[:MAX_WARNING_CHARS])

    @property
    def all_causes(self) -> list[dict[str, str]]:
        """The causes kept, and one that counts the others when there were more."""
        if not self.more:
            return self.causes
        more = f"more_issues: {self.more} more problems; bundlectl analyze lists all"
        return [*self.causes, {"reason": "more_issues", "field": "/", "message": more}]

    @property
    def message(self) -> str:
        """Every problem on one line: ``code at path: message; ...``."""
        shown = [f"{c['reason']} at {c['field']}: {c['message'].split(': ', 1)[-1]}" for c in self.all_causes]
        return "; ".join(shown)


def unreadable(field_path: str, message: str) -> Verdict:
    """The verdict on a review the webhook cannot read: refused, since it cannot be judged."""
    verdict = Verdict()
    verdict.refuse("invalid_review", field_path, message)
    return verdict


async def review(request: dict[str, Any], bundles: BundleReader) -> Verdict:
    """The verdict on one AdmissionReview request of our group.

    What the webhook cannot read is refused: a review it does not understand is never let through
    as if it had been judged.
    """
    given = request.get("operation")
    operation = given if isinstance(given, str) else ""
    if operation in NOT_JUDGED_OPERATIONS:
        return Verdict()
    if operation not in ("CREATE", "UPDATE"):
        return unreadable("request.operation", "must be CREATE, UPDATE, DELETE or CONNECT")
    sub = request.get("subResource")
    if sub == STATUS_SUBRESOURCE:
        return Verdict()
    if sub not in (None, ""):
        return unreadable("request.subResource", "only the status subresource is served")
    kind = _kind(request.get("kind"))
    if kind is None:
        return unreadable("request.kind", f"must name a kind of {GROUP}: {', '.join(sorted(JUDGED_KINDS))}")
    obj = request.get("object")
    if not isinstance(obj, dict):
        return unreadable("request.object", f"a {operation} carries the object as a JSON object")
    for part in ("metadata", "spec"):
        if not isinstance(obj.get(part), dict | None):
            return unreadable(f"request.object.{part}", "must be a JSON object")
    old = request.get("oldObject")
    if operation == "UPDATE" and isinstance(old, dict) and old.get("spec") == obj.get("spec"):
        return Verdict()  # metadata only (a finalizer removed, a label): nothing to judge
    if kind == "Bundle":
        return await _bundle(obj)
    if kind == "BundleInstallation":
        namespace = request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
        if not isinstance(namespace, str):
            return unreadable("request.namespace", "must be a string")
        return await _installation(obj, namespace, bundles)
    return _endpoint(obj)


def _kind(given: object) -> str | None:
    """The kind a review's ``kind`` (a group, version and kind) names, when it is one of ours."""
    if not isinstance(given, dict) or given.get("group") != GROUP:
        return None
    kind = given.get("kind")
    return kind if isinstance(kind, str) and kind in JUDGED_KINDS else None


def _validated(model: type[M], obj: dict[str, Any], verdict: Verdict) -> M | None:
    """The object's spec as ``model``, or None with the first problem refused in ``verdict``."""
    try:
        return model.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        verdict.refuse("invalid_spec", "spec", cond.spec_error(exc))
        return None


def _endpoint(obj: dict[str, Any]) -> Verdict:
    verdict = Verdict()
    _validated(EndpointSpec, obj, verdict)
    return verdict


async def _bundle(obj: dict[str, Any]) -> Verdict:
    verdict = Verdict()
    spec = _validated(BundleSpec, obj, verdict)
    if spec is None:
        return verdict
    try:
        check_one_source(spec.source)  # the same rule the operator's resolve applies
    except SourceError as exc:
        verdict.refuse("invalid_source", "spec.source", exc.message.removeprefix("spec.source: "))
        return verdict
    if spec.source.inline is None:
        return verdict  # read by the operator later: shape checks only here
    parsed = await asyncio.get_running_loop().run_in_executor(ANALYSIS, parse_bundle_data, spec.source.inline)
    for issue in parsed.issues:
        if issue.blocking:
            verdict.refuse(str(issue.code), issue.path or "/", issue.message)
        else:
            verdict.warn(f"{issue.code} at {issue.path or '/'}: {issue.message}")
    return verdict


async def _installation(obj: dict[str, Any], namespace: str, bundles: BundleReader) -> Verdict:
    verdict = Verdict()
    spec = obj.get("spec") or {}
    given = spec.get("setup")
    setup: list[Any] = given if isinstance(given, list) else []
    if len(setup) > MAX_SETUP_VALUES:
        verdict.refuse("invalid_setup", "/spec/setup", f"at most {MAX_SETUP_VALUES} setup entries")
        return verdict
    seen: set[str] = set()
    for index, item in enumerate(setup):
        at = f"/spec/setup/{index}"
        key = item.get("key") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(key, str):
            verdict.refuse("invalid_setup", at, SETUP_SHAPE)
            continue
        has_value, has_ref = (
            "value" in item and item["value"] is not None,
            item.get("secretKeyRef") is not None,
        )
        if has_value == has_ref:
            verdict.refuse(
                "invalid_setup", at, f"setup key '{shown(key)}': give exactly one of value or secretKeyRef"
            )
        if key in seen:
            verdict.refuse("duplicate_setup_key", at, f"setup key '{shown(key)}' is given twice")
        seen.add(key)
    if not verdict.allowed:
        return verdict
    checked = _validated(BundleInstallationSpec, obj, verdict)
    if checked is None:
        return verdict
    name = checked.bundle_ref.name
    bundle = await bundles.read_custom(BUNDLE_PLURAL, namespace, name) if namespace else None
    status = (bundle or {}).get("status")
    fields = status.get("setupFields") if isinstance(status, dict) else None
    if not isinstance(fields, list):
        return verdict  # no Bundle yet, or not resolved yet: the operator checks it later
    declared = {str(f.get("key")): str(f.get("type")) for f in fields if isinstance(f, dict)}
    known = ", ".join(shown(k) for k in sorted(declared)[:MAX_CAUSES]) or "none"
    for index, entry in enumerate(checked.setup):
        at = f"/spec/setup/{index}"
        if entry.key not in declared:
            verdict.refuse(
                "unknown_setup_key",
                at,
                f"bundle {shown(name)} declares no setup field '{shown(entry.key)}' (it has: {known})",
            )
        elif declared[entry.key] == "secret" and entry.value is not None:
            verdict.refuse(
                "secret_as_value",
                at,
                f"setup field '{shown(entry.key)}' is a secret: put it in a Secret and refer to it "
                "with secretKeyRef",
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
            "details": {"causes": verdict.all_causes},
        }
    if verdict.warnings:
        response["warnings"] = verdict.warnings
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
