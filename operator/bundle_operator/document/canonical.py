"""The canonical form of a bundle and its digest: one bundle, one digest, however it was written."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from bundle_operator.document.models import Bundle


def canonical_data(bundle: Bundle) -> dict[str, Any]:
    """The bundle as JSON data with defaults filled in and absent optionals dropped.

    The sections 0.2.0 added are dropped while empty, so a 0.1.0 document keeps the digest it had
    before they existed.
    """
    data: dict[str, Any] = bundle.model_dump(mode="json", exclude_none=True)
    for section in ("knowledge_sets", "apps"):
        if not data.get(section):
            data.pop(section, None)
    for agent in data.get("agents", []):
        if not agent.get("knowledge_sets"):
            agent.pop("knowledge_sets", None)
    return data


def canonical_json(bundle: Bundle) -> str:
    """Sorted, compact JSON of the canonical data: the bytes the digest is taken over."""
    return json.dumps(
        canonical_data(bundle), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(bundle: Bundle) -> str:
    """``sha256:<hex>`` of the canonical JSON."""
    return "sha256:" + hashlib.sha256(canonical_json(bundle).encode("utf-8")).hexdigest()
