"""A status write that would change nothing is not sent: a fleet's drift checks would otherwise
patch every installation once per interval."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.installation import reconciler as installation
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


def test_a_quick_install_writes_its_status_once_and_a_slow_one_shows_installing_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(installation, "INSTALLING_SHOWN_AFTER", 0.05)
    kube = RecordingKube()
    reconciler = installation.InstallationReconciler(kube, None, None, None)  # type: ignore[arg-type]

    def run() -> installation.Run:
        obj = {**body(None), "metadata": {"namespace": "ns", "name": "bi", "generation": 3, "uid": "u"}}
        started = installation.Run(obj, installation.InstallationStatus(kube, obj), attempt=0)  # type: ignore[arg-type]
        started.status.conditions(cond.progressing("Installing", "writing the bundle's entities"))
        return started

    async def writes(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "written"

    assert asyncio.run(reconciler._shown_when_slow(run(), writes(0.0))) == "written"
    assert kube.patches == []  # the run's own end writes its status, once
    assert asyncio.run(reconciler._shown_when_slow(run(), writes(0.3))) == "written"
    assert len(kube.patches) == 1
    reasons = {c["type"]: c["reason"] for c in kube.patches[0]["conditions"]}
    assert reasons["Reconciling"] == "Installing" and "observedGeneration" not in kube.patches[0]
