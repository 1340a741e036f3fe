"""The watch caches: what they answer without the API server, and when they go back to it."""

from __future__ import annotations

import asyncio
from typing import Any

from bundle_operator.k8s.installation.watch_cache import (
    MISS,
    Bundles,
    ReferencedSecrets,
    StateSecrets,
    bundle_view,
    state_view,
)


class Reads:
    """A Kube that serves objects from a dict and counts its reads; ``gate`` holds them."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.objects.get((namespace, name))

    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return self.objects.get((namespace, name))


def secret(version: str, **data: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "s",
            "namespace": "ns",
            "resourceVersion": version,
            "ownerReferences": [{"uid": "u"}],
        },
        "data": data,
    }


def index(**entries: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    return {("ns", name): [state_view(body)] for name, body in entries.items()}


# --- state Secrets ------------------------------------------------------------------------------------


def test_without_an_index_every_state_lookup_goes_to_the_api_server() -> None:
    states = StateSecrets()
    states.wrote("ns", "s", secret("5", r="a"))
    assert states.lookup("ns", "s") is MISS


def test_a_state_secret_the_index_lacks_is_absent_and_a_listed_one_is_served() -> None:
    states = StateSecrets()
    states.index = index(s=secret("3", r="a"))
    assert states.lookup("ns", "other") is None
    assert states.lookup("ns", "s")["data"] == {"r": "a"}


def test_the_own_write_wins_over_a_lagging_watch_until_the_watch_catches_up() -> None:
    states = StateSecrets()
    states.index = index(s=secret("3", r="old"))
    states.wrote("ns", "s", secret("7", r="mine"))
    assert states.lookup("ns", "s")["data"] == {"r": "mine"}
    states.index = index(s=secret("7", r="mine"))
    assert states.lookup("ns", "s")["metadata"]["resourceVersion"] == "7"
    # A later write by somebody else, seen by the watch, is newer than what this process wrote.
    states.index = index(s=secret("9", r="theirs"))
    assert states.lookup("ns", "s")["data"] == {"r": "theirs"}


def test_an_own_write_is_let_go_once_the_watch_delivers_it_and_kept_while_it_lags() -> None:
    states = StateSecrets()
    states.index = index(s=secret("3", r="old"))
    states.wrote("ns", "s", secret("7", r="mine"))
    states.delivered("ns", "s", secret("5", r="between"))  # an older event: the write still wins
    assert states.lookup("ns", "s")["data"] == {"r": "mine"}
    states.delivered("ns", "s", secret("7", r="mine"))
    assert states._written == {}, "a fleet's records would be held twice until their next run"
    states.index = index(s=secret("7", r="mine"))
    assert states.lookup("ns", "s")["data"] == {"r": "mine"}


def test_a_created_state_secret_is_served_before_the_watch_delivers_it() -> None:
    states = StateSecrets()
    states.index = {}
    states.wrote("ns", "s", secret("4", r="new"))
    assert states.lookup("ns", "s")["data"] == {"r": "new"}


def test_after_a_conflict_the_state_secret_is_read_from_the_api_server_until_written() -> None:
    states = StateSecrets()
    states.index = index(s=secret("3", r="a"))
    states.conflicted("ns", "s")
    assert states.lookup("ns", "s") is MISS
    assert states.lookup("ns", "s") is MISS
    states.wrote("ns", "s", secret("8", r="b"))
    assert states.lookup("ns", "s")["data"] == {"r": "b"}


def test_a_released_state_secret_is_absent_once_the_watch_saw_it_go() -> None:
    states = StateSecrets()
    states.index = index(s=secret("3", r="a"))
    states.released("ns", "s")
    assert states.lookup("ns", "s") is MISS  # still listed: a re-created owner reads the API server
    states.index = {}
    assert states.lookup("ns", "s") is None


def test_a_non_numeric_resource_version_is_never_compared() -> None:
    states = StateSecrets()
    states.index = index(s=secret("3", r="a"))
    states.wrote("ns", "s", secret("x1", r="b"))
    assert states.lookup("ns", "s") is MISS


def test_the_state_view_keeps_what_loading_needs_and_drops_the_rest() -> None:
    body = secret("3", r="a")
    body["metadata"].update(
        {"finalizers": ["f"], "deletionTimestamp": "2026-01-01T00:00:00Z", "managedFields": [{"x": 1}]}
    )
    view = state_view(body)
    assert view == {
        "metadata": {
            "resourceVersion": "3",
            "ownerReferences": [{"uid": "u"}],
            "finalizers": ["f"],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        },
        "data": {"r": "a"},
    }


# --- referenced Secrets ---------------------------------------------------------------------------


def test_referenced_secrets_are_read_every_time_until_the_watch_runs() -> None:
    kube = Reads({("ns", "s"): secret("1", k="v")})
    secrets = ReferencedSecrets(kube)  # type: ignore[arg-type]

    async def twice() -> None:
        await secrets.read_secret("ns", "s")
        await secrets.read_secret("ns", "s")

    asyncio.run(twice())
    assert kube.reads == 2


def test_a_referenced_secret_is_read_once_and_then_follows_the_watch() -> None:
    kube = Reads({("ns", "s"): secret("1", k="v1")})
    secrets = ReferencedSecrets(kube)  # type: ignore[arg-type]
    secrets.live = True

    async def scenario() -> list[Any]:
        seen = [await secrets.read_secret("ns", "s"), await secrets.read_secret("ns", "s")]
        secrets.observe("ns", "s", secret("2", k="v2"))
        seen.append(await secrets.read_secret("ns", "s"))
        secrets.observe("ns", "s", None)
        seen.append(await secrets.read_secret("ns", "s"))
        secrets.observe("ns", "other", secret("9", k="x"))  # never asked for: not kept
        return seen

    seen = asyncio.run(scenario())
    assert [s["data"] if s else None for s in seen] == [{"k": "v1"}, {"k": "v1"}, {"k": "v2"}, None]
    assert kube.reads == 1


def test_a_fleet_asking_at_once_shares_one_read() -> None:
    kube = Reads({("ns", "s"): secret("1", k="v")})
    kube.gate = asyncio.Event()
    secrets = ReferencedSecrets(kube)  # type: ignore[arg-type]
    secrets.live = True

    async def scenario() -> list[dict[str, Any] | None]:
        asked = [asyncio.ensure_future(secrets.read_secret("ns", "s")) for _ in range(50)]
        await asyncio.sleep(0)
        assert kube.gate is not None
        kube.gate.set()
        return list(await asyncio.gather(*asked))

    answers = asyncio.run(scenario())
    assert kube.reads == 1
    assert all(a is not None and a["data"] == {"k": "v"} for a in answers)


def test_a_read_overtaken_by_a_watch_event_is_not_kept() -> None:
    kube = Reads({("ns", "s"): secret("1", k="old")})
    kube.gate = asyncio.Event()
    secrets = ReferencedSecrets(kube)  # type: ignore[arg-type]
    secrets.live = True

    async def scenario() -> dict[str, Any] | None:
        reading = asyncio.ensure_future(secrets.read_secret("ns", "s"))
        await asyncio.sleep(0)
        secrets.observe("ns", "s", secret("2", k="new"))  # the answer in flight may be older
        assert kube.gate is not None
        kube.gate.set()
        await reading
        kube.objects[("ns", "s")] = secret("2", k="new")
        return await secrets.read_secret("ns", "s")

    latest = asyncio.run(scenario())
    assert latest is not None and latest["data"] == {"k": "new"}
    assert kube.reads == 2


# --- Bundles ----------------------------------------------------------------------------------------


def test_a_bundle_comes_from_the_index_and_one_it_lacks_from_the_api_server() -> None:
    listed = {
        "metadata": {"name": "b", "namespace": "ns", "uid": "u", "generation": 2, "resourceVersion": "5"},
        "spec": {"source": {"inline": {"name": "b"}}, "other": True},
        "status": {"observedGeneration": 2, "source": {"version": "1"}, "issues": [{"code": "X"}]},
    }
    kube = Reads({("ns", "new"): {"metadata": {"name": "new"}}})
    bundles = Bundles(kube)  # type: ignore[arg-type]
    bundles.index = {("ns", "b"): [bundle_view(listed)]}

    async def scenario() -> tuple[Any, Any, Any]:
        return (
            await bundles.read("bundles", "ns", "b"),
            await bundles.read("bundles", "ns", "new"),
            await bundles.read("bundles", "ns", "gone"),
        )

    cached, new, gone = asyncio.run(scenario())
    assert cached["spec"] == {"source": {"inline": {"name": "b"}}}
    assert cached["status"] == {"observedGeneration": 2, "source": {"version": "1"}}
    assert cached["metadata"]["generation"] == 2
    assert new == {"metadata": {"name": "new"}} and gone is None
    assert kube.reads == 2
