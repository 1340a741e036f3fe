"""The watch check against a real API server: versions read as metadata, a change the watch never
delivered found once it has waited past the limit, in one namespace and cluster-wide."""

from __future__ import annotations

import asyncio

import pytest

from bundle_operator.devcluster import DevCluster, Kubectl
from bundle_operator.k8s.kube import Kube, KubeError, load_connection
from bundle_operator.k8s.process.watch_lag import Deliveries, WatchLag
from tests.e2e.operator_harness import EXAMPLES

pytestmark = pytest.mark.e2e

NAME = "github-triage"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_undelivered_change_on_the_api_server_wedges_the_watch_after_the_limit(
    devcluster: DevCluster,
    kubectl: Kubectl,
    crds: None,
    solo_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(devcluster.kubeconfig))
    kubectl.apply(EXAMPLES / "github-triage-bundle.yaml", namespace=solo_namespace)
    clock = Clock()
    deliveries = Deliveries(clock=clock)
    lag = WatchLag(deliveries, ("bundles",), limit=60)

    async def scenario() -> list[str | None]:
        kube = Kube(load_connection())
        try:
            here = await kube.list_versions("bundles", solo_namespace)
            everywhere = await kube.list_versions("bundles")
            assert [(ns, name) for ns, name, _ in here] == [(solo_namespace, NAME)]
            assert here[0] in everywhere
            # A kind with nothing in the namespace lists as nothing (the API server sends null).
            for _ in range(40):  # a new API server answers 429 while its cache of the kind fills
                try:
                    assert await kube.list_versions("endpoints", solo_namespace) == []
                    break
                except KubeError as exc:
                    if exc.status != 429:
                        raise
                    await asyncio.sleep(0.5)
            # What a watch delivered when it listed: the same version, nothing pending.
            deliveries.note("bundles", solo_namespace, NAME, here[0][2], deleted=False)

            async def listed(plural: str) -> list[tuple[str, str, str]]:
                return await kube.list_versions(plural, solo_namespace)

            found = [await lag.check(listed)]
            await asyncio.to_thread(
                kubectl.run, "annotate", "bundle", NAME, "-n", solo_namespace, "e2e/touched=yes"
            )
            found.append(await lag.check(listed))  # changed, not delivered: first seen
            clock.now += 61
            found.append(await lag.check(listed))  # past the limit and nothing came
            changed = await kube.list_versions("bundles", solo_namespace)
            assert changed[0][2] != here[0][2]
            clock.now += 1
            deliveries.note("bundles", solo_namespace, NAME, changed[0][2], deleted=False)
            found.append(await lag.check(listed))
            return found
        finally:
            await kube.aclose()

    found = asyncio.run(scenario())
    assert found[0] is None and found[1] is None, found
    assert found[2] is not None and "the watch of bundles has delivered nothing for 61s" in found[2]
    assert f"{solo_namespace}/{NAME}" in found[2]
    assert found[3] is None
