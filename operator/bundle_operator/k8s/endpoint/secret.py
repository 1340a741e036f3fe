"""The credentials Secret of an Endpoint: what it holds, who owns it, and when a new API key
must be issued into it. Pure functions over the Secret's JSON; the reconciler writes it.

The platform shows an API key once, when it is issued: it goes into this Secret and nowhere else.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from pydantic import SecretStr

from bundle_operator.k8s.resources import API_VERSION

KIND = "Endpoint"
ANNOTATION_ROTATE = "bundle-operator.dev/rotate-key-requested-at"
# On the credentials Secret: the rotation request its key answers, and the endpoint it belongs to.
ANNOTATION_ROTATED_FOR = "bundle-operator.dev/rotated-for"
ANNOTATION_ENDPOINT_ID = "bundle-operator.dev/endpoint-id"
LABEL_ENDPOINT = "bundle-operator.dev/endpoint"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
KEY_API_KEY = "apiKey"
KEY_URL = "url"


def owned_by(obj: dict[str, Any], uid: str) -> bool:
    """Whether ``obj`` has an ownerReference to the object with ``uid``."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(o, dict) and o.get("uid") == uid for o in owners)


def predecessor_owns(obj: dict[str, Any], name: str) -> bool:
    """Whether ``obj`` belongs to an Endpoint of the same name that was deleted (another uid)."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(
        isinstance(o, dict)
        and o.get("apiVersion") == API_VERSION
        and o.get("kind") == KIND
        and o.get("name") == name
        for o in owners
    )


def rotation_request(body: dict[str, Any]) -> str:
    """The value of the rotate-key annotation ('' when there is none)."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(ANNOTATION_ROTATE) or "").strip()


def key_needed(secret: dict[str, Any] | None, endpoint_id: str, rotation: str) -> str | None:
    """Why a new key must be issued for the Secret, or None: ``missing`` (no Secret or no apiKey,
    and a key can never be read back), ``endpoint`` (the key is another endpoint's) or ``rotation``
    (a rotation was asked for that the Secret's key does not answer yet)."""
    if secret is None or not (secret.get("data") or {}).get(KEY_API_KEY):
        return "missing"
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION_ENDPOINT_ID) != endpoint_id:
        return "endpoint"
    if rotation and annotations.get(ANNOTATION_ROTATED_FOR, "") != rotation:
        return "rotation"
    return None


def remembered_rotation(secret: dict[str, Any] | None) -> str:
    """The rotation request the Secret's key answers ('' when none)."""
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(ANNOTATION_ROTATED_FOR) or "")


def label_value(value: str) -> str:
    """``value`` as a label value (hashed when it would not fit)."""
    if len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value):
        return value
    return hashlib.sha256(value.encode()).hexdigest()[:40]


def secret_body(
    endpoint_obj: dict[str, Any],
    name: str,
    existing: dict[str, Any] | None,
    *,
    api_key: SecretStr | None,
    url: str,
    endpoint_id: str,
    rotated_for: str,
) -> dict[str, Any]:
    """The credentials Secret: ``apiKey`` (the new one, else the existing one) and ``url``, owned by
    the Endpoint; with ``existing`` it keeps that Secret's labels, annotations and resourceVersion."""
    meta = endpoint_obj["metadata"]
    old_meta = (existing or {}).get("metadata") or {}
    old_data = dict((existing or {}).get("data") or {})
    if api_key is not None:
        old_data[KEY_API_KEY] = base64.b64encode(api_key.get_secret_value().encode()).decode()
    old_data[KEY_URL] = base64.b64encode(url.encode()).decode()
    annotations = dict(old_meta.get("annotations") or {})
    annotations[ANNOTATION_ENDPOINT_ID] = endpoint_id
    annotations[ANNOTATION_ROTATED_FOR] = rotated_for
    labels = dict(old_meta.get("labels") or {})
    labels[LABEL_MANAGED_BY] = "bundle-operator"
    labels[LABEL_ENDPOINT] = label_value(meta["name"])
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": meta["namespace"],
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if old_meta.get("resourceVersion"):
        metadata["resourceVersion"] = old_meta["resourceVersion"]
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata, "data": old_data}


def secret_current(secret: dict[str, Any], url: str, endpoint_id: str, rotated_for: str) -> bool:
    """Whether an owned Secret already says what it should (the key itself cannot be checked)."""
    data = secret.get("data") or {}
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    return (
        data.get(KEY_URL) == base64.b64encode(url.encode()).decode()
        and annotations.get(ANNOTATION_ENDPOINT_ID) == endpoint_id
        and annotations.get(ANNOTATION_ROTATED_FOR, "") == rotated_for
    )
