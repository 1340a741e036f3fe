"""Where kopf keeps the last handled spec, small enough for an annotation and free of secrets."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

import kopf


class SpecDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base, with the inline bundle document replaced by its hash and no setup values.

    kopf keeps the last handled spec in one annotation, capped at 256 KiB with all annotations; a
    1 MB inline document would make every patch fail. A setup ``value`` may be a secret typed into
    the spec by mistake (refused, but there): the annotation must not repeat it, and a digest of a
    short secret could be guessed. Handlers are level-based and read the live object, so the diff
    base only has to change when the spec does: a setup value stands in as the generation that
    carried it, which changes with every change of the spec.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        essence = super().build(body=essential(body), extra_fields=extra_fields)
        spec = essence.get("spec")
        if not isinstance(spec, dict):
            return essence
        source = spec.get("source")
        if isinstance(source, dict) and "inline" in source:
            text = json.dumps(source["inline"], sort_keys=True, separators=(",", ":"))
            source["inline"] = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        setup = spec.get("setup")
        if isinstance(setup, list):
            generation = body.get("metadata", {}).get("generation")
            for entry in setup:
                if isinstance(entry, dict) and "value" in entry:
                    entry["value"] = f"(not kept: generation {generation})"
        return essence


def essential(body: kopf.Body) -> kopf.Body:
    """The body without what kopf's essence drops anyway: kopf deep-copies the whole object first,
    status and managedFields included, then throws all but the spec, labels and annotations away."""
    meta = body.get("metadata") or {}
    light: dict[str, Any] = {k: v for k, v in body.items() if k not in ("metadata", "status")}
    light["metadata"] = {k: meta[k] for k in ("labels", "annotations") if k in meta}
    return kopf.Body(cast(kopf.RawBody, light))
