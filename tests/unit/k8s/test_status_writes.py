"""A status write that would change nothing is not sent: a fleet's drift checks would otherwise
patch every installation once per interval."""

from __future__ import annotations

import asyncio
from typing import Any

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.reconcile import StatusDraft


class RecordingKube:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch_status(self, plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.patches.append(status)


def body(status: dict[str, Any] | None) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "bi", "generation": 3}, "status": status or {}}


def send(kube: RecordingKube, status: dict[str, Any] | None, patch: dict[str, Any]) -> dict[str, Any]:
    draft = StatusDraft(kube, body(status))  # type: ignore[arg-type]
    draft.patch.update(patch)
    draft.conditions(cond.ready("Installed", "12 entities installed"))
    assert asyncio.run(draft.send("bundleinstallations", observed=True))
    return draft.patch


def test_an_unchanged_status_is_not_written_again_nulls_included() -> None:
    kube = RecordingKube()
    # The preview has a null reason; the API server stores the entity without it.
    first = send(kube, None, {"preview": {"entities": [{"kind": "agent", "key": "a", "reason": None}]}})
    assert len(kube.patches) == 1
    stored = {**first, "preview": {"entities": [{"kind": "agent", "key": "a"}]}}
    send(kube, stored, {"preview": {"entities": [{"kind": "agent", "key": "a", "reason": None}]}})
    assert len(kube.patches) == 1
    # Anything that differs is written.
    send(kube, stored, {"preview": {"entities": [{"kind": "agent", "key": "b", "reason": None}]}})
    assert len(kube.patches) == 2


def test_a_new_generation_is_written() -> None:
    kube = RecordingKube()
    stored = send(kube, None, {})
    stored["observedGeneration"] = 2
    send(kube, stored, {})
    assert len(kube.patches) == 2 and kube.patches[-1]["observedGeneration"] == 3
