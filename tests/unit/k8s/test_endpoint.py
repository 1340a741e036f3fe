"""The Endpoint reconciler: its pure parts, and whole runs against an in-memory cluster and platform
that answer as the real ones do (ids, revisions, a key shown once, name_taken across workspaces)."""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.endpoint.reconciler import EndpointReconciler, idempotency_key, wanted_update
from bundle_operator.k8s.endpoint.secret import (
    ANNOTATION_ENDPOINT_ID,
    ANNOTATION_ROTATE,
    ANNOTATION_ROTATED_FOR,
    key_needed,
    secret_body,
)
from bundle_operator.k8s.endpoint.status import ready_conditions, served_view
from bundle_operator.k8s.endpoint.target import gateway_id, installation_marker
from bundle_operator.k8s.event_reasons import EventReason
from bundle_operator.k8s.kube import KubeError
from bundle_operator.k8s.reconcile import OperatorSettings, Retry
from bundle_operator.k8s.resources import API_VERSION, EndpointSpec
from bundle_operator.platform.errors import Conflict, NotFound, Unavailable
from bundle_operator.platform.models import (
    Endpoint,
    EndpointCreate,
    EndpointUpdate,
    GatewayMember,
    GatewayTool,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GATEWAY = "gwb_01"
UID = "0d6f5a52-7a43-4a8e-9a9c-5f8f3b7c2e11"


def endpoint(**changes: Any) -> Endpoint:
    data: dict[str, Any] = {
        "id": "ept_01",
        "revision": 1,
        "created_at": NOW,
        "updated_at": NOW,
        "name": "triage-kit",
        "gateway_bundle_id": GATEWAY,
        "auth_mode": "ApiKey",
        "profile": "Default",
        "enabled": True,
        "url": "http://gw.example/mcp/triage-kit/mcp",
    }
    return Endpoint.model_validate({**data, **changes})


def tool(name: str, *, served: bool = True) -> GatewayTool:
    member, _, short = name.partition("__")
    return GatewayTool.model_validate(
        {
            "id": name,
            "member": member,
            "tool": short,
            "presented_name": name,
            "enabled": served,
            "member_enabled": True,
            "override_name": None,
            "override_title": None,
            "override_description": None,
            "override_annotations": None,
            "definition": None,
            "stale": False,
            "served": served,
        }
    )


def member(name: str, *, healthy: bool, message: str = "") -> GatewayMember:
    return GatewayMember(
        name=name,
        mcp_instance_id="mci_01",
        enabled=True,
        position=0,
        url="https://mcp.example/x",
        healthy=healthy,
        message=message,
    )


# --- pure parts ----------------------------------------------------------------------------------


def test_the_gateway_id_comes_from_the_installed_gateway_entity() -> None:
    status = {
        "entities": [
            {"kind": "mcp", "key": "github", "id": "mci_1", "action": "Created"},
            {"kind": "gateway", "key": "gateway", "id": GATEWAY, "action": "Created"},
        ]
    }
    assert gateway_id(status) == GATEWAY
    assert gateway_id({"entities": [{"kind": "gateway", "key": "gateway", "id": None}]}) is None
    assert gateway_id(None) is None and gateway_id({}) is None


def test_the_installation_marker_moves_only_with_what_endpoints_depend_on() -> None:
    base = {
        "metadata": {"name": "kit"},
        "spec": {"workspace": "acme"},
        "status": {"entities": [{"kind": "gateway", "id": GATEWAY}]},
    }
    drifted = copy.deepcopy(base)
    drifted["status"]["drift"] = [{"entity": "agent:bot", "paths": ["/model"]}]
    assert installation_marker(base) == installation_marker(drifted)
    reinstalled = copy.deepcopy(base)
    reinstalled["status"]["entities"] = [{"kind": "gateway", "id": "gwb_02"}]
    assert installation_marker(base) != installation_marker(reinstalled)
    deleting = copy.deepcopy(base)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert installation_marker(base) != installation_marker(deleting)
    assert installation_marker(None) == "deleted"


def test_the_idempotency_key_is_the_uid_and_the_body() -> None:
    body = EndpointCreate(name="kit", gateway_bundle_id=GATEWAY)
    key = idempotency_key(UID, body)
    assert key == idempotency_key(UID, EndpointCreate(name="kit", gateway_bundle_id=GATEWAY))
    assert UID in key and len(key) <= 255 and key.isascii() and " " not in key
    # Another body under one key would be refused by the platform as a reused key.
    assert key != idempotency_key(UID, EndpointCreate(name="kit", gateway_bundle_id=GATEWAY, enabled=False))
    assert key != idempotency_key("another-uid", body)


def test_profile_and_enabled_are_patched_only_when_they_differ() -> None:
    spec = EndpointSpec.model_validate({"installationRef": {"name": "kit"}, "credentialsSecretName": "s"})
    assert wanted_update(spec, endpoint()) is None
    off = spec.model_copy(update={"enabled": False, "profile": "ChatGPT"})
    assert wanted_update(off, endpoint()) == EndpointUpdate(profile="ChatGPT", enabled=False)
    assert wanted_update(off, endpoint(profile="ChatGPT")) == EndpointUpdate(enabled=False)


def test_allowed_origins_are_patched_when_they_drift() -> None:
    spec = EndpointSpec.model_validate(
        {
            "installationRef": {"name": "kit"},
            "credentialsSecretName": "s",
            "allowedOrigins": ["https://app.example"],
        }
    )
    assert wanted_update(spec, endpoint()) == EndpointUpdate(allowed_origins=["https://app.example"])
    assert wanted_update(spec, endpoint(allowed_origins=["https://app.example"])) is None
    # Emptied in the spec: the platform's list is emptied too, not left as it was.
    emptied = spec.model_copy(update={"allowed_origins": []})
    assert wanted_update(emptied, endpoint(allowed_origins=["https://app.example"])) == EndpointUpdate(
        allowed_origins=[]
    )


@pytest.mark.parametrize(
    "origin", ["https://app.example/", "https://app.example/path", "ftp://app.example", "app.example", "*"]
)
def test_an_allowed_origin_that_is_not_an_origin_is_refused(origin: str) -> None:
    with pytest.raises(ValueError, match="allowedOrigins"):
        EndpointSpec.model_validate(
            {"installationRef": {"name": "kit"}, "credentialsSecretName": "s", "allowedOrigins": [origin]}
        )


def secret(
    *, key: bool = True, endpoint_id: str = "ept_01", rotated_for: str | None = None
) -> dict[str, Any]:
    annotations = {ANNOTATION_ENDPOINT_ID: endpoint_id}
    if rotated_for is not None:
        annotations[ANNOTATION_ROTATED_FOR] = rotated_for
    data = {"url": "dXJs"} | ({"apiKey": "a2V5"} if key else {})
    return {"metadata": {"annotations": annotations}, "data": data}


def test_a_key_is_issued_when_missing_foreign_or_asked_to_rotate() -> None:
    assert key_needed(None, "ept_01", "") == "missing"
    assert key_needed(secret(key=False), "ept_01", "") == "missing"
    assert key_needed(secret(endpoint_id="ept_00"), "ept_01", "") == "endpoint"
    assert key_needed(secret(), "ept_01", "") is None
    assert key_needed(secret(), "ept_01", "2026-01-01") == "rotation"
    assert key_needed(secret(rotated_for="2026-01-01"), "ept_01", "2026-01-01") is None
    assert key_needed(secret(rotated_for="2026-01-01"), "ept_01", "2026-01-02") == "rotation"


def test_the_secret_is_owned_by_the_endpoint_and_keeps_a_key_it_is_not_given() -> None:
    owner = {"metadata": {"name": "kit", "namespace": "ns", "uid": UID}}
    written = secret_body(
        owner,
        "kit-endpoint",
        None,
        api_key=SecretStr("bok_secret-value"),
        url="http://gw/kit/mcp",
        endpoint_id="ept_01",
        rotated_for="",
    )
    [ref] = written["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["uid"], ref["controller"]) == (
        API_VERSION,
        "Endpoint",
        UID,
        True,
    )
    assert base64.b64decode(written["data"]["apiKey"]) == b"bok_secret-value"
    assert base64.b64decode(written["data"]["url"]) == b"http://gw/kit/mcp"
    assert "resourceVersion" not in written["metadata"]
    existing = copy.deepcopy(written)
    existing["metadata"]["resourceVersion"] = "42"
    again = secret_body(
        owner,
        "kit-endpoint",
        existing,
        api_key=None,
        url="http://gw2/kit/mcp",
        endpoint_id="ept_01",
        rotated_for="x",
    )
    assert again["data"]["apiKey"] == written["data"]["apiKey"]
    assert base64.b64decode(again["data"]["url"]) == b"http://gw2/kit/mcp"
    assert again["metadata"]["resourceVersion"] == "42"
    assert again["metadata"]["annotations"][ANNOTATION_ROTATED_FOR] == "x"


def test_status_shows_served_tools_in_order_and_every_members_health() -> None:
    tools = [tool("github__list_issues"), tool("github__delete_repo", served=False), tool("issues")]
    members = [member("github", healthy=True), member("jira", healthy=False, message="connection refused")]
    view = served_view(endpoint(), tools, members)
    assert view == {
        "url": "http://gw.example/mcp/triage-kit/mcp",
        "presentedTools": ["github__list_issues", "issues"],
        "withheldTools": [],  # a disabled tool is the bundle's choice, not a problem
        "members": [
            {"name": "github", "healthy": True, "message": ""},
            {"name": "jira", "healthy": False, "message": "connection refused"},
        ],
    }
    spec = EndpointSpec.model_validate({"installationRef": {"name": "kit"}, "credentialsSecretName": "s"})
    ready = ready_conditions(spec, view)[0]
    assert (ready.status, ready.reason) == ("True", "Serving")
    assert "2 tools from 2 members" in ready.message and "unhealthy members: jira" in ready.message
    disabled = ready_conditions(spec.model_copy(update={"enabled": False}), view)[0]
    assert (disabled.status, disabled.reason) == ("True", "Disabled")
    assert "spec.enabled" in disabled.message


# --- whole runs against fakes --------------------------------------------------------------------


class FakeKube:
    """Objects by (kind, name), with resourceVersions and preconditions as the API server has them."""

    def __init__(self) -> None:
        self.installations: dict[str, dict[str, Any]] = {}
        self.secrets: dict[str, dict[str, Any]] = {}
        self.status_writes: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.version = 0

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(obj)

    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        assert plural == "bundleinstallations"
        return copy.deepcopy(self.installations.get(name))

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.secrets.get(name))

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if name in self.secrets:
            raise KubeError(409, "AlreadyExists", name)
        self.secrets[name] = copy.deepcopy(body)
        return self._stamp(self.secrets[name])

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        current = self.secrets.get(name)
        if current is None:
            raise KubeError(404, "NotFound", name)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", name)
        self.secrets[name] = copy.deepcopy(body)
        return self._stamp(self.secrets[name])

    async def delete_secret(self, namespace: str, name: str) -> None:
        self.secrets.pop(name, None)

    async def read(self, path: str) -> dict[str, Any] | None:
        assert "/secrets?labelSelector=" in path
        return {"items": [copy.deepcopy(s) for s in self.secrets.values()]}

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        assert plural == "endpoints"
        self.status_writes.append(copy.deepcopy(status))
        return {}

    async def post_event(self, namespace: str, body: dict[str, Any]) -> None:
        self.events.append(body)


class FakePlatform:
    """The endpoint routes as the reference platform answers them."""

    def __init__(self) -> None:
        self.endpoints: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self.idempotency: dict[str, str] = {}
        self.elsewhere: set[str] = set()  # endpoint names held in other workspaces
        self.calls: list[str] = []
        self.fail_next: Exception | None = None
        self.issued = 0

    def _maybe_fail(self, call: str) -> None:
        self.calls.append(call)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error

    def _show(self, row: dict[str, Any], key: str | None = None) -> Endpoint:
        return Endpoint.model_validate({**row, **({"api_key": key} if key else {})})

    async def list_all(
        self, workspace: str, kind: Any, *, filters: dict[str, Any] | None = None
    ) -> list[Endpoint]:
        self._maybe_fail("list")
        found = [r for r in self.endpoints.values() if all(r[k] == v for k, v in (filters or {}).items())]
        return [self._show(r) for r in found]

    async def create(
        self, workspace: str, kind: Any, body: EndpointCreate, *, idempotency_key: str
    ) -> Endpoint:
        self._maybe_fail("create")
        if idempotency_key in self.idempotency:
            row = self.endpoints.get(self.idempotency[idempotency_key])
            if row is None:
                raise NotFound("deleted", status=404, code="not_found")
            return self._show(row, self.keys[row["id"]])
        if body.name in self.elsewhere or any(r["name"] == body.name for r in self.endpoints.values()):
            raise Conflict(f"an endpoint is already named '{body.name}'", status=409, code="name_taken")
        entity_id = f"ept_{len(self.idempotency) + 1:02d}"
        row = {
            **body.model_dump(mode="json"),
            "id": entity_id,
            "revision": 1,
            "created_at": NOW,
            "updated_at": NOW,
            "url": f"http://gw.example/mcp/{body.name}/mcp",
        }
        self.endpoints[entity_id] = row
        self.idempotency[idempotency_key] = entity_id
        self.keys[entity_id] = self._new_key()
        return self._show(row, self.keys[entity_id])

    def _new_key(self) -> str:
        self.issued += 1
        return f"bok_very-secret-key-number-{self.issued:04d}"

    async def update(
        self, workspace: str, kind: Any, entity_id: str, body: EndpointUpdate, *, revision: int
    ) -> Endpoint:
        self._maybe_fail("update")
        row = self.endpoints[entity_id]
        assert revision == row["revision"]
        row.update(body.model_dump(exclude_none=True))
        row["revision"] += 1
        return self._show(row)

    async def issue_endpoint_key(self, workspace: str, endpoint_id: str) -> SecretStr:
        self._maybe_fail("issue")
        self.keys[endpoint_id] = self._new_key()
        return SecretStr(self.keys[endpoint_id])

    async def delete(self, workspace: str, kind: Any, entity_id: str, *, revision: int | None = None) -> None:
        self._maybe_fail("delete")
        if self.endpoints.pop(entity_id, None) is None:
            raise NotFound("gone", status=404, code="not_found")

    async def list_members(self, workspace: str, bundle_id: str) -> list[GatewayMember]:
        self._maybe_fail("members")
        return [member("github", healthy=False, message="connection refused")]

    async def list_tools(self, workspace: str, bundle_id: str) -> list[GatewayTool]:
        self._maybe_fail("tools")
        return [tool("github__list_issues"), tool("github__hidden", served=False)]


class FakePool:
    def __init__(self, platform: FakePlatform) -> None:
        self.platform = platform
        self.asked: list[tuple[str, str | None]] = []

    def get(self, url: str, token: str | None) -> FakePlatform:
        self.asked.append((url, token))
        return self.platform


class FakeEvents:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    async def post(self, obj: dict[str, Any], event: EventReason, message: str) -> None:
        self.posted.append((event.type, event.reason, message))


class World:
    def __init__(self) -> None:
        self.kube = FakeKube()
        self.platform = FakePlatform()
        self.pool = FakePool(self.platform)
        self.events = FakeEvents()
        settings = OperatorSettings(default_platform_url="http://platform.example")
        self.reconciler = EndpointReconciler(self.kube, settings, self.pool, self.events)  # type: ignore[arg-type]
        self.body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "Endpoint",
            "metadata": {"name": "triage-kit", "namespace": "agents", "uid": UID, "generation": 1},
            "spec": {"installationRef": {"name": "kit"}, "credentialsSecretName": "kit-endpoint"},
        }

    def install(self, gateway: str | None = GATEWAY, *, installed: bool = True) -> None:
        entities = (
            [{"kind": "gateway", "key": "gateway", "id": gateway, "action": "Created"}] if gateway else []
        )
        conditions = (
            cond.merge_conditions(None, [cond.true("Installed", "Installed", "ok")], 1) if installed else []
        )
        self.kube.installations["kit"] = {
            "metadata": {"name": "kit", "namespace": "agents"},
            "spec": {"bundleRef": {"name": "kit"}, "workspace": "acme"},
            "status": {"entities": entities, "conditions": conditions},
        }

    def run(self) -> str:
        try:
            return asyncio.run(self.reconciler.reconcile(copy.deepcopy(self.body)))
        finally:
            # What the API server holds after the merge patches.
            status = dict(self.body.get("status") or {})
            for write in self.kube.status_writes:
                status.update(write)
            self.body["status"] = status

    def condition(self, type_: str) -> dict[str, Any]:
        found = cond.condition_of(self.body.get("status"), type_)
        assert found is not None, type_
        return found

    def api_key(self) -> str:
        return base64.b64decode(self.kube.secrets["kit-endpoint"]["data"]["apiKey"]).decode()


@pytest.fixture
def world() -> World:
    return World()


def test_a_missing_installation_is_waited_for_without_platform_calls(world: World) -> None:
    assert world.run() == "retry"
    reconciling = world.condition("Reconciling")
    assert (reconciling["status"], reconciling["reason"]) == ("True", "InstallationNotFound")
    assert "BundleInstallation 'kit'" in reconciling["message"]
    assert world.condition("Ready")["status"] == "False"
    assert world.condition("Stalled")["status"] == "False"
    assert "observedGeneration" not in world.body["status"]
    assert world.platform.calls == []
    # Once the installation has its gateway, the next run (a nudge or the timer) serves it.
    world.install()
    assert world.run() == "success"
    assert world.condition("Ready")["status"] == "True"
    assert world.condition("Reconciling")["status"] == "False"


@pytest.mark.parametrize(
    ("gateway", "installed", "reason"),
    [(None, False, "InstallationNotInstalled"), (None, True, "NoGateway")],
)
def test_an_installation_without_a_gateway_is_waited_for(
    world: World, gateway: str | None, installed: bool, reason: str
) -> None:
    world.install(gateway, installed=installed)
    assert world.run() == "retry"
    assert world.condition("Reconciling")["reason"] == reason
    assert world.platform.calls == []


def test_oauth_without_its_issuer_stalls_and_creates_nothing(world: World) -> None:
    world.install()
    world.body["spec"] = {"installationRef": {"name": "kit"}, "auth": {"mode": "OAuth"}}
    assert world.run() == "stalled"
    stalled = world.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
    assert stalled["message"].startswith("spec.auth.oauth: required when auth.mode is OAuth")
    assert world.condition("Ready")["status"] == "False"
    assert world.platform.calls == [] and world.kube.secrets == {}


def test_an_oauth_endpoint_carries_its_issuer_and_scopes_and_keeps_no_secret(world: World) -> None:
    world.install()
    oauth = {
        "issuer": "https://login.example",
        "requiredScopes": ["mcp:tools"],
        "toolScopes": {"github__*": ["repo"]},
    }
    world.body["spec"] = {
        "installationRef": {"name": "kit"},
        "auth": {"mode": "OAuth", "oauth": oauth},
        "rateLimit": {"requestsPerMinute": 60},
    }
    assert world.run() == "success"
    [row] = world.platform.endpoints.values()
    assert row["auth_mode"] == "OAuth"
    assert row["oauth"] == {
        "issuer": "https://login.example",
        "audience": None,
        "required_scopes": ["mcp:tools"],
        "tool_scopes": {"github__*": ["repo"]},
    }
    assert row["rate_limit"] == {"requests_per_minute": 60, "burst": None}
    assert row["allowed_origins"] == []
    assert world.kube.secrets == {}
    assert world.condition("Ready")["status"] == "True"


def test_an_endpoint_is_created_its_key_written_to_an_owned_secret_and_nowhere_else(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.install()
    caplog.set_level(logging.DEBUG)
    assert world.run() == "success"
    [row] = world.platform.endpoints.values()
    assert (row["name"], row["gateway_bundle_id"], row["auth_mode"]) == ("triage-kit", GATEWAY, "ApiKey")
    assert world.pool.asked == [("http://platform.example", None)]
    written = world.kube.secrets["kit-endpoint"]
    key = world.api_key()
    assert key == world.platform.keys[row["id"]]
    assert base64.b64decode(written["data"]["url"]).decode() == row["url"]
    [owner] = written["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == (UID, True)
    status = world.body["status"]
    assert status["url"] == "http://gw.example/mcp/triage-kit/mcp"
    assert status["presentedTools"] == ["github__list_issues"]
    assert status["members"] == [{"name": "github", "healthy": False, "message": "connection refused"}]
    assert world.condition("Ready")["status"] == "True" and status["observedGeneration"] == 1
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "MemberUnavailable")
    assert "github: connection refused" in degraded["message"]
    assert {reason for _, reason, _ in world.events.posted} == {"Created", "KeyIssued"}
    for text in (str(world.kube.status_writes), str(world.events.posted), caplog.text):
        assert key not in text

    # Level-based: a second run finds the endpoint, issues nothing and writes no status.
    calls, writes = len(world.platform.endpoints), len(world.kube.status_writes)
    assert world.run() == "success"
    assert len(world.platform.endpoints) == calls and world.platform.issued == 1
    assert len(world.kube.status_writes) == writes
    assert world.api_key() == key


def test_a_crash_after_the_create_adopts_the_endpoint_and_issues_a_key(world: World) -> None:
    world.install()
    world.run()
    first = world.api_key()
    del world.kube.secrets["kit-endpoint"]  # as if the operator died before writing it
    world.run()
    assert len(world.platform.endpoints) == 1
    assert world.api_key() != first and world.api_key() == world.platform.keys["ept_01"]


def test_the_rotation_annotation_issues_a_new_key_once(world: World) -> None:
    world.install()
    world.run()
    first = world.api_key()
    world.body["metadata"]["annotations"] = {ANNOTATION_ROTATE: "2026-01-02T00:00:00Z"}
    world.run()
    second = world.api_key()
    assert second != first and second == world.platform.keys["ept_01"]
    assert ("Normal", "KeyRotated") in {(t, r) for t, r, _ in world.events.posted}
    world.run()
    assert world.api_key() == second and world.platform.issued == 2
    # Taking the annotation away asks for nothing; the Secret keeps the request it answered.
    world.body["metadata"]["annotations"] = {}
    world.run()
    assert world.platform.issued == 2
    assert world.kube.secrets["kit-endpoint"]["metadata"]["annotations"][ANNOTATION_ROTATED_FOR] == (
        "2026-01-02T00:00:00Z"
    )


def test_a_secret_of_someone_else_is_never_overwritten(world: World) -> None:
    world.install()
    world.kube.secrets["kit-endpoint"] = {"metadata": {"name": "kit-endpoint"}, "data": {"mine": "eA=="}}
    assert world.run() == "stalled"
    stalled = world.condition("Stalled")
    assert stalled["reason"] == "SecretNotOwned" and "'kit-endpoint'" in stalled["message"]
    assert world.platform.endpoints == {}
    assert world.kube.secrets["kit-endpoint"]["data"] == {"mine": "eA=="}


def test_the_secret_of_a_deleted_endpoint_of_the_same_name_is_waited_for(world: World) -> None:
    world.install()
    earlier = {"apiVersion": API_VERSION, "kind": "Endpoint", "name": "triage-kit", "uid": "old-uid"}
    world.kube.secrets["kit-endpoint"] = {"metadata": {"name": "kit-endpoint", "ownerReferences": [earlier]}}
    assert world.run() == "retry"
    assert world.condition("Reconciling")["reason"] == "SecretOfEarlierEndpoint"
    assert world.condition("Stalled")["status"] == "False"
    del world.kube.secrets["kit-endpoint"]  # garbage-collected
    assert world.run() == "success"
    assert owner_uid(world.kube.secrets["kit-endpoint"]) == UID


def owner_uid(secret: dict[str, Any]) -> str:
    [owner] = secret["metadata"]["ownerReferences"]
    uid: str = owner["uid"]
    return uid


def test_a_name_held_in_another_workspace_stalls(world: World) -> None:
    world.install()
    world.platform.elsewhere.add("triage-kit")
    assert world.run() == "stalled"
    stalled = world.condition("Stalled")
    assert stalled["reason"] == "NameTaken" and "metadata.name" in stalled["message"]
    assert world.kube.secrets == {}


def test_enabled_and_profile_are_patched_without_a_new_key(world: World) -> None:
    world.install()
    world.run()
    world.body["spec"] = {**world.body["spec"], "enabled": False, "profile": "ChatGPT"}
    world.body["metadata"]["generation"] = 2
    world.run()
    [row] = world.platform.endpoints.values()
    assert (row["enabled"], row["profile"]) == (False, "ChatGPT")
    assert world.platform.issued == 1
    ready = world.condition("Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("True", "Disabled", 2)


def test_allowed_origins_reach_the_platform_on_create_and_on_change(world: World) -> None:
    world.install()
    world.body["spec"] = {**world.body["spec"], "allowedOrigins": ["https://app.example"]}
    world.run()
    [row] = world.platform.endpoints.values()
    assert row["allowed_origins"] == ["https://app.example"]
    world.body["spec"] = {
        **world.body["spec"],
        "allowedOrigins": ["https://app.example", "http://localhost:3000"],
    }
    world.body["metadata"]["generation"] = 2
    world.run()
    assert row["allowed_origins"] == ["https://app.example", "http://localhost:3000"]
    assert world.platform.issued == 1


def test_a_temporary_platform_error_retries_and_a_permanent_one_stalls(world: World) -> None:
    world.install()
    world.platform.fail_next = Unavailable("down", status=503, code="unavailable", retry_after=7.0)
    with pytest.raises(Retry) as raised:
        world.run()
    assert raised.value.delay >= 7.0
    assert world.condition("Reconciling")["reason"] == "PlatformUnavailable"
    world.platform.fail_next = Conflict("in use", status=409, code="in_use")
    assert world.run() == "stalled"
    assert world.condition("Stalled")["reason"] == "PlatformRefused"


def test_paused_reports_what_would_be_written(world: World) -> None:
    world.install()
    world.body["metadata"]["annotations"] = {"bundle-operator.dev/paused": "true"}
    assert world.run() == "success"
    ready = world.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Paused")
    assert "would be created" in ready["message"]
    assert world.platform.endpoints == {} and world.kube.secrets == {}


def test_delete_removes_the_platform_endpoint_and_tolerates_it_gone(world: World) -> None:
    world.install()
    world.run()
    asyncio.run(world.reconciler.finalize(copy.deepcopy(world.body)))
    assert world.platform.endpoints == {}
    asyncio.run(world.reconciler.finalize(copy.deepcopy(world.body)))  # nothing left: fine
    del world.kube.installations["kit"]
    asyncio.run(world.reconciler.finalize(copy.deepcopy(world.body)))
    assert world.events.posted[-1][1] == "NotDeleted"


def test_delete_retries_while_the_platform_is_down(world: World) -> None:
    world.install()
    world.run()
    world.platform.fail_next = Unavailable("down", status=503, code="unavailable")
    with pytest.raises(Retry):
        asyncio.run(world.reconciler.finalize(copy.deepcopy(world.body)))
    assert len(world.platform.endpoints) == 1
