"""The call counters of `bundlectl platform serve --count-calls`, which the fleet benchmark reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from platform_harness import TOKEN, PlatformProcess, start_platform

from bundle_operator.reference_platform.call_counts import classify

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def counting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    db = tmp_path_factory.mktemp("counting") / "platform.db"
    running = start_platform(db, "--token", TOKEN, "--count-calls")
    yield running
    running.stop()


def counts(view: dict[str, Any]) -> dict[tuple[str, str, str, str, int], int]:
    return {(c["method"], c["kind"], c["op"], c["workspace"], c["status"]): c["count"] for c in view["calls"]}


def test_calls_are_counted_by_method_kind_operation_workspace_and_status(counting: PlatformProcess) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=counting.url, headers=auth, timeout=10) as http:
        http.delete("/_admin/calls").raise_for_status()
        created = http.post(
            "/v1/workspaces/ws-a/skills",
            json={"source_type": "inline", "content": "---\nname: s\ndescription: d\n---\nbody\n"},
            headers={"Idempotency-Key": "k-1"},
        )
        assert created.status_code == 201, created.text
        skill_id = created.json()["id"]
        for _ in range(2):
            http.get("/v1/workspaces/ws-a/skills").raise_for_status()
        http.get("/v1/workspaces/ws-b/skills").raise_for_status()
        http.get(f"/v1/workspaces/ws-a/skills/{skill_id}").raise_for_status()
        assert http.get("/v1/workspaces/ws-a/agents/agt_missing").status_code == 404
        http.get("/v1/workspaces/ws-a/idempotency-keys/k-1").raise_for_status()
        http.get("/healthz").raise_for_status()

        seen = http.get("/_admin/calls").json()
        assert counts(seen) == {
            ("POST", "skills", "create", "ws-a", 201): 1,
            ("GET", "skills", "list", "ws-a", 200): 2,
            ("GET", "skills", "list", "ws-b", 200): 1,
            ("GET", "skills", "get", "ws-a", 200): 1,
            ("GET", "agents", "get", "ws-a", 404): 1,
            ("GET", "idempotency-keys", "get", "ws-a", 200): 1,
        }
        assert seen["total"] == 7
        # DELETE answers what it cleared, then counting starts again from zero.
        assert http.delete("/_admin/calls").json() == seen
        assert http.get("/_admin/calls").json() == {"total": 0, "calls": []}


def test_the_admin_routes_need_the_token(counting: PlatformProcess) -> None:
    assert httpx.get(f"{counting.url}/_admin/calls", timeout=10).status_code == 401


def test_without_the_flag_there_are_no_counters(platform: PlatformProcess) -> None:
    answer = httpx.get(
        f"{platform.url}/_admin/calls", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert answer.status_code == 404


@pytest.mark.parametrize(
    ("method", "route", "expected"),
    [
        ("GET", "/v1/workspaces/{workspace}/agents", ("agents", "list")),
        ("POST", "/v1/workspaces/{workspace}/agents", ("agents", "create")),
        ("PATCH", "/v1/workspaces/{workspace}/triggers/{entity_id}", ("triggers", "update")),
        ("DELETE", "/v1/workspaces/{workspace}/triggers/{entity_id}", ("triggers", "delete")),
        (
            "PUT",
            "/v1/workspaces/{workspace}/gateway-bundles/{bundle_id}/members/{member}",
            ("gateway-bundles", "put members"),
        ),
        ("GET", "/mcp/{endpoint}/mcp", ("/mcp/{endpoint}/mcp", "get")),
    ],
)
def test_routes_are_classified(method: str, route: str, expected: tuple[str, str]) -> None:
    assert classify(method, route) == expected
