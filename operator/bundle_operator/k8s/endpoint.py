"""The level-based reconcile of an Endpoint: find the gateway its BundleInstallation installed,
make the platform endpoint match the spec, keep the issued API key in a Secret the Endpoint owns,
and report the URL, the served tools and the members' health. Create, update, resume, the refresh
timer, a changed installation or Secret and the reconcile annotation all come here. No kopf types:
handlers call it and map ``Retry``.

The platform endpoint is found again by name and gateway bundle (its name is the Endpoint's
``metadata.name``), so no id needs to live in spec or status. An API key is shown by the platform
once, when it is issued: it goes straight into the Secret and nowhere else (not status, events,
logs or errors).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydantic import SecretStr, ValidationError

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.installation import (
    ANNOTATION_PAUSED,
    OperatorSettings,
    Retry,
    StatusDraft,
    backoff,
    is_paused,
)
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import REDACTOR, object_extra
from bundle_operator.k8s.metrics import ReconcileResult
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.resources import (
    API_VERSION,
    ENDPOINT_NAME_PATTERN,
    ENDPOINT_PLURAL,
    INSTALLATION_PLURAL,
    BundleInstallationSpec,
    EndpointSpec,
)
from bundle_operator.k8s.setup import SetupProblem, secret_value
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import (
    Conflict,
    NotFound,
    PlatformError,
    PreconditionFailed,
    Refused,
    Unavailable,
)
from bundle_operator.platform.models import (
    Endpoint,
    EndpointCreate,
    EndpointUpdate,
    GatewayMember,
    GatewayTool,
)
from bundle_operator.platform.protocol import PlatformAPI

log = logging.getLogger(__name__)

KIND = "Endpoint"
ANNOTATION_ROTATE = "bundle-operator.dev/rotate-key-requested-at"
# On the credentials Secret: the rotation request its key answers, and the endpoint it belongs to.
ANNOTATION_ROTATED_FOR = "bundle-operator.dev/rotated-for"
ANNOTATION_ENDPOINT_ID = "bundle-operator.dev/endpoint-id"
LABEL_ENDPOINT = "bundle-operator.dev/endpoint"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
KEY_API_KEY = "apiKey"
KEY_URL = "url"
_NAME = re.compile(ENDPOINT_NAME_PATTERN)


class Waiting(Exception):
    """Something the Endpoint needs is not there yet; it continues by itself once it is."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Target:
    """Where the platform endpoint lives, as the referenced installation says."""

    installation: str
    platform_url: str
    platform: PlatformAPI
    workspace: str
    gateway_id: str


# --- pure parts ------------------------------------------------------------------------------------


def gateway_id(installation_status: dict[str, Any] | None) -> str | None:
    """The platform id of the gateway bundle an installation installed, if it did."""
    for entity in (installation_status or {}).get("entities") or []:
        if isinstance(entity, dict) and entity.get("kind") == "gateway" and entity.get("id"):
            return str(entity["id"])
    return None


def installation_marker(installation: dict[str, Any] | None) -> str:
    """What of an installation its Endpoints depend on, hashed: changes only when one of them does."""
    if installation is None:
        return "deleted"
    spec = installation.get("spec") or {}
    meta = installation.get("metadata") or {}
    status = installation.get("status") or {}
    relevant = {
        "gateway": gateway_id(status),
        "platform": spec.get("platform"),
        "workspace": spec.get("workspace"),
        "deleting": bool(meta.get("deletionTimestamp")),
        "installed": cond.is_true(status, "Installed"),
    }
    text = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def idempotency_key(uid: str, body: EndpointCreate) -> str:
    """The create's Idempotency-Key: the Endpoint's uid and what is sent, so a repeated create
    finds the same endpoint and a create of a different body is never refused as a reuse."""
    text = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return f"bundle-operator/endpoint/{uid}/{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def wanted_update(spec: EndpointSpec, endpoint: Endpoint) -> EndpointUpdate | None:
    """The PATCH that brings ``endpoint`` to the spec's profile and enabled, or None."""
    changes: dict[str, Any] = {}
    if endpoint.profile != spec.profile:
        changes["profile"] = spec.profile
    if endpoint.enabled != spec.enabled:
        changes["enabled"] = spec.enabled
    return EndpointUpdate(**changes) if changes else None


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


def served_view(
    endpoint: Endpoint | None, tools: list[GatewayTool], members: list[GatewayMember]
) -> dict[str, Any]:
    """status.url, presentedTools (served ones, in the platform's order) and members."""
    return {
        "url": endpoint.url if endpoint is not None else None,
        "presentedTools": [t.presented_name for t in tools if t.served],
        "members": [{"name": m.name, "healthy": m.healthy, "message": m.message or ""} for m in members],
    }


def ready_conditions(spec: EndpointSpec, view: dict[str, Any], *, paused: bool = False) -> list[cond.Cond]:
    """Ready with a message a person can act on: what is served, and which members are unhealthy."""
    members: list[dict[str, Any]] = view["members"]
    tools = len(view["presentedTools"])
    unhealthy = [m["name"] for m in members if not m["healthy"]]
    if not spec.enabled:
        reason = "Disabled"
        message = (
            f"the endpoint at {view['url']} is disabled (spec.enabled is false); set it to true to serve"
        )
    else:
        reason = "Serving"
        message = f"serving {tools} tools from {len(members)} members at {view['url']}"
    if unhealthy:
        shown = ", ".join(unhealthy[:5]) + (f" and {len(unhealthy) - 5} more" if len(unhealthy) > 5 else "")
        message += f"; unhealthy members: {shown} (see status.members)"
    if paused:
        reason = "Paused"
        message = (
            f"up to date; the {ANNOTATION_PAUSED} annotation is set, so nothing would be written: {message}"
        )
    return cond.ready(reason, message)


def _temporary(exc: PlatformError) -> bool:
    # 412: the endpoint changed since it was read. 404: it (or the gateway) went away between two
    # calls of this run; the next run finds out what is there now.
    return isinstance(exc, Unavailable | PreconditionFailed | NotFound) or (
        exc.status is not None and exc.status >= 500
    )


# --- status ---------------------------------------------------------------------------------------


@dataclass
class _Status(StatusDraft):
    """The Endpoint's status; written only when something changed."""

    def served(self, view: dict[str, Any]) -> None:
        self.patch.update(view)

    def changed(self) -> bool:
        previous = self.previous()
        for key, value in self.patch.items():
            if key == "conditions":
                if _comparable(value) != _comparable(previous.get(key) or []):
                    return True
            elif (previous.get(key) if key in previous else _EMPTY.get(key)) != value:
                return True
        return False

    async def write(self, *, observed: bool = True) -> None:
        if observed:
            self.patch["observedGeneration"] = self.generation
        if not self.changed() or not await self.send(ENDPOINT_PLURAL, observed=observed):
            return
        # A later write in the same run compares with what is there now.
        self.body = {**self.body, "status": {**self.previous(), **self.patch}}


_EMPTY: dict[str, Any] = {"url": None, "presentedTools": [], "members": [], "observedGeneration": None}


def _comparable(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((dict(c) for c in conditions if isinstance(c, dict)), key=lambda c: str(c.get("type")))


def _cleared() -> dict[str, Any]:
    return {"url": None, "presentedTools": [], "members": []}


# --- the reconciler -------------------------------------------------------------------------------


class EndpointReconciler:
    """Reconciles Endpoints against the platform their installations install into."""

    def __init__(
        self, kube: Kube, settings: OperatorSettings, platforms: PlatformPool, events: Events
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.platforms = platforms
        self.events = events

    # --- inputs ----------------------------------------------------------------------------------

    async def _platform(
        self, namespace: str, installation: str, spec: BundleInstallationSpec
    ) -> tuple[str, PlatformAPI]:
        """The installation's platform connection, exactly as the installation resolves it."""
        where = f"BundleInstallation '{installation}'"
        if spec.platform is not None:
            token = None
            if spec.platform.token_secret_ref is not None:
                try:
                    token = await secret_value(
                        self.kube, namespace, spec.platform.token_secret_ref, "spec.platform.tokenSecretRef"
                    )
                except SetupProblem as exc:
                    raise SetupProblem(exc.reason, f"{where}: {exc.message}") from None
            return spec.platform.url, self.platforms.get(spec.platform.url, token)
        url = self.settings.default_platform_url
        if not url:
            raise SetupProblem(
                "NoPlatform",
                f"{where} names no platform and the operator has no default: set its spec.platform.url, "
                "or start the operator with --platform-url",
            )
        return url, self.platforms.get(url, self.settings.default_token())

    async def _target(self, namespace: str, spec: EndpointSpec, *, deleting_ok: bool = False) -> Target:
        """Where the endpoint lives; Waiting while the installation has no gateway to expose. With
        ``deleting_ok`` an installation being deleted still counts (the Endpoint's own delete)."""
        ref = spec.installation_ref.name
        installation = await self.kube.read_custom(INSTALLATION_PLURAL, namespace, ref)
        if installation is None:
            raise Waiting(
                "InstallationNotFound",
                f"waiting for BundleInstallation '{ref}' (spec.installationRef) in namespace '{namespace}'; "
                "create it (the Endpoint continues by itself once it has installed a gateway)",
            )
        if (installation.get("metadata") or {}).get("deletionTimestamp") and not deleting_ok:
            raise Waiting(
                "InstallationDeleting",
                f"BundleInstallation '{ref}' is being deleted, and its gateway with it; the Endpoint "
                "waits for a new installation of that name",
            )
        try:
            installation_spec = BundleInstallationSpec.model_validate(installation.get("spec") or {})
        except ValidationError:
            raise Waiting(
                "InstallationNotInstalled",
                f"waiting for BundleInstallation '{ref}', whose spec is invalid (see its status); fix it",
            ) from None
        status = installation.get("status") or {}
        gateway = gateway_id(status)
        if gateway is None:
            if cond.is_true(status, "Installed"):
                raise Waiting(
                    "NoGateway",
                    f"BundleInstallation '{ref}' installed a bundle without a gateway section, so there "
                    "is nothing to serve; add a gateway section to its Bundle (the Endpoint continues by "
                    "itself)",
                )
            ready = cond.condition_of(status, "Ready") or {}
            detail = f" (its Ready condition: {ready.get('reason')}: {ready.get('message')})" if ready else ""
            raise Waiting(
                "InstallationNotInstalled",
                f"waiting for BundleInstallation '{ref}' to install its bundle's gateway{detail}",
            )
        url, platform = await self._platform(namespace, ref, installation_spec)
        return Target(ref, url, platform, installation_spec.workspace, gateway)

    async def _find(self, target: Target, name: str) -> Endpoint | None:
        found = await target.platform.list_all(
            target.workspace, kinds.ENDPOINTS, filters={"name": name, "gateway_bundle_id": target.gateway_id}
        )
        return found[0] if found else None

    async def _create(self, target: Target, name: str, uid: str, spec: EndpointSpec) -> Endpoint:
        body = EndpointCreate(
            name=name,
            gateway_bundle_id=target.gateway_id,
            auth_mode=spec.auth.mode,
            profile=spec.profile,
            enabled=spec.enabled,
        )
        key = idempotency_key(uid, body)
        try:
            try:
                return await target.platform.create(
                    target.workspace, kinds.ENDPOINTS, body, idempotency_key=key
                )
            except NotFound:
                # The endpoint this key created was deleted on the platform since: create it anew.
                fresh = f"{key}/{int(time.time())}"
                return await target.platform.create(
                    target.workspace, kinds.ENDPOINTS, body, idempotency_key=fresh
                )
        except Conflict as exc:
            if isinstance(exc, PreconditionFailed) or exc.code != "name_taken":
                raise
            where = (
                f"in workspace '{target.workspace}' ({', '.join(exc.holders)})"
                if exc.holders
                else "in another workspace (an Endpoint of another namespace, perhaps)"
            )
            raise SetupProblem(
                "NameTaken",
                f"the platform already has an endpoint named '{name}' {where}, and endpoint names are "
                f"URL paths ({{gateway}}/{name}/mcp) unique across the platform; give this Endpoint "
                "another metadata.name, or delete the other endpoint",
            ) from None
        except Refused as exc:
            if exc.code == "unknown_reference":
                raise Waiting(
                    "GatewayNotFound",
                    f"the gateway bundle {target.gateway_id} that BundleInstallation '{target.installation}' "
                    "reports is not on the platform; waiting for the installation to install it again",
                ) from None
            raise

    # --- reconcile -------------------------------------------------------------------------------

    async def reconcile(self, body: dict[str, Any], *, attempt: int = 0) -> ReconcileResult:
        """Bring the platform endpoint and the credentials Secret to the spec; the result for metrics."""
        status = _Status(self.kube, body)
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            spec = EndpointSpec.model_validate(body.get("spec") or {})
        except ValidationError as exc:
            status.conditions(cond.stalled("InvalidSpec", f"{cond.spec_error(exc)}; fix the resource"))
            await status.write()
            return "stalled"
        if not _NAME.fullmatch(name):
            status.conditions(
                cond.stalled(
                    "InvalidName",
                    f"metadata.name '{name}' cannot name a platform endpoint (a URL path segment: at most 64 "
                    "letters, digits, '-' or '_'); create the Endpoint under another name",
                )
            )
            await status.write()
            return "stalled"
        if spec.auth.mode == "OAuth":
            # The reference platform stores OAuth endpoints but has no authorization server to sign
            # clients in: an endpoint created so would serve nobody. Nothing is created.
            status.served(_cleared())
            status.conditions(
                cond.stalled(
                    "OAuthUnsupported",
                    "auth.mode OAuth is not supported: the platform has no OAuth sign-in for endpoints, so "
                    "clients could not connect; nothing was created. Create the Endpoint with auth.mode "
                    "ApiKey instead (auth.mode cannot change in place)",
                )
            )
            await status.write()
            return "stalled"
        if spec.credentials_secret_name is None:
            status.conditions(
                cond.stalled(
                    "InvalidSpec",
                    "spec.credentialsSecretName: required when auth.mode is ApiKey; name the Secret the "
                    "API key is written to",
                )
            )
            await status.write()
            return "stalled"
        try:
            target = await self._target(namespace, spec)
            secret = await self.kube.read_secret(namespace, spec.credentials_secret_name)
            if secret is not None and not owned_by(secret, meta["uid"]):
                if predecessor_owns(secret, name):
                    raise Waiting(
                        "SecretOfEarlierEndpoint",
                        f"Secret '{spec.credentials_secret_name}' belongs to an earlier Endpoint named "
                        f"'{name}' and goes with it by garbage collection; waiting for it to go",
                    )
                raise SetupProblem(
                    "SecretNotOwned",
                    f"spec.credentialsSecretName: Secret '{spec.credentials_secret_name}' exists in "
                    f"namespace '{namespace}' and is not owned by this Endpoint, so it is never "
                    "overwritten; name another Secret, or delete that one",
                )
            return await self._converge(body, spec, status, target, secret)
        except Waiting as exc:
            # Not a kopf retry: a delayed handler would not run before its delay is out, however
            # soon the installation changes. Its changes nudge the Endpoint, and the refresh timer
            # looks again in the meantime.
            status.served(_cleared())
            status.conditions(cond.progressing(exc.reason, exc.message))
            await status.write(observed=False)
            return "retry"
        except SetupProblem as exc:
            status.conditions(cond.stalled(exc.reason, exc.message))
            await status.write()
            return "stalled"
        except KubeError as exc:
            raise Retry(f"the Kubernetes API answered {exc.status} {exc.reason}", backoff(attempt)) from None
        except PlatformError as exc:
            if _temporary(exc):
                status.conditions(
                    cond.progressing("PlatformUnavailable", f"the platform answered {exc}; retrying")
                )
                await status.write(observed=False)
                retry_after = exc.retry_after if isinstance(exc, Unavailable) else None
                raise Retry(str(exc), backoff(attempt, retry_after=retry_after)) from None
            status.conditions(
                cond.stalled(
                    "PlatformRefused",
                    f"the platform refused a call: {exc}; fix the cause and edit the Endpoint (or annotate "
                    "it with bundle-operator.dev/reconcile-requested-at)",
                )
            )
            await status.write()
            return "stalled"

    async def _converge(
        self,
        body: dict[str, Any],
        spec: EndpointSpec,
        status: _Status,
        target: Target,
        secret: dict[str, Any] | None,
    ) -> ReconcileResult:
        meta = body["metadata"]
        name, uid = meta["name"], meta["uid"]
        assert spec.credentials_secret_name is not None
        paused = is_paused(body)
        pending: list[str] = []
        done: list[str] = []
        platform, workspace = target.platform, target.workspace
        endpoint = await self._find(target, name)
        issued: SecretStr | None = None
        if endpoint is None:
            if paused:
                pending.append("the platform endpoint would be created")
            else:
                endpoint = await self._create(target, name, uid, spec)
                issued = endpoint.api_key
                done.append(f"created {endpoint.id}")
                await self.events.post(
                    body, "Normal", "Created", f"created platform endpoint {endpoint.id} at {endpoint.url}"
                )
        if endpoint is not None and endpoint.auth_mode != spec.auth.mode:
            raise SetupProblem(
                "AuthModeMismatch",
                f"the platform endpoint '{name}' ({endpoint.id}) uses {endpoint.auth_mode}, not "
                f"{spec.auth.mode}; delete it on the platform, or create this Endpoint with auth.mode "
                f"{endpoint.auth_mode}",
            )
        update = wanted_update(spec, endpoint) if endpoint is not None else None
        if endpoint is not None and update is not None:
            what = ", ".join(f"{k} {v}" for k, v in update.model_dump(exclude_none=True).items())
            if paused:
                pending.append(f"the platform endpoint would get {what}")
            else:
                endpoint = await platform.update(
                    workspace, kinds.ENDPOINTS, endpoint.id, update, revision=endpoint.revision
                )
                done.append(f"set {what}")
                await self.events.post(
                    body, "Normal", "Updated", f"set {what} on platform endpoint {endpoint.id}"
                )
        if endpoint is not None:
            # A removed annotation asks for nothing: the Secret keeps the request it last answered.
            rotation = rotation_request(body) or remembered_rotation(secret)
            need = None if issued is not None else key_needed(secret, endpoint.id, rotation)
            if need is not None and paused:
                pending.append(
                    "a new API key would be issued" if need != "rotation" else "the key would rotate"
                )
            elif need is not None:
                issued = await platform.issue_endpoint_key(workspace, endpoint.id)
                done.append(f"issued a key ({need})")
            if issued is not None:
                REDACTOR.add(issued.get_secret_value())
            if not paused and (
                issued is not None
                or secret is None
                or not secret_current(secret, endpoint.url, endpoint.id, rotation)
            ):
                await self._write_secret(
                    body, spec.credentials_secret_name, secret, issued, endpoint, rotation
                )
                done.append(f"wrote Secret '{spec.credentials_secret_name}'")
                if need == "rotation":
                    await self.events.post(
                        body,
                        "Normal",
                        "KeyRotated",
                        f"issued a new API key for platform endpoint {endpoint.id} into Secret "
                        f"'{spec.credentials_secret_name}'; the previous key no longer works",
                    )
                elif issued is not None:
                    await self.events.post(
                        body,
                        "Normal",
                        "KeyIssued",
                        f"wrote the API key of platform endpoint {endpoint.id} to Secret "
                        f"'{spec.credentials_secret_name}'",
                    )
            elif (
                paused
                and secret is not None
                and not secret_current(secret, endpoint.url, endpoint.id, rotation)
            ):
                pending.append(f"Secret '{spec.credentials_secret_name}' would be updated")
        members = await platform.list_members(workspace, target.gateway_id) if endpoint is not None else []
        tools = await platform.list_tools(workspace, target.gateway_id) if endpoint is not None else []
        view = served_view(endpoint, tools, members)
        status.served(view)
        if pending:
            message = f"the {ANNOTATION_PAUSED} annotation is set: nothing is written; " + "; ".join(pending)
            status.conditions(
                [
                    cond.false("Ready", "Paused", message),
                    cond.false("Reconciling", "Paused", ""),
                    cond.false("Stalled", "Paused", ""),
                ]
            )
        else:
            status.conditions(ready_conditions(spec, view, paused=paused))
        await status.write()
        if done:
            log.info(
                "endpoint reconciled: %s",
                "; ".join(done),
                extra=object_extra(KIND, meta.get("namespace"), name, uid),
            )
        return "success"

    async def _write_secret(
        self,
        body: dict[str, Any],
        secret_name: str,
        existing: dict[str, Any] | None,
        issued: SecretStr | None,
        endpoint: Endpoint,
        rotation: str,
    ) -> None:
        namespace = body["metadata"]["namespace"]
        new = secret_body(
            body,
            secret_name,
            existing,
            api_key=issued,
            url=endpoint.url,
            endpoint_id=endpoint.id,
            rotated_for=rotation,
        )
        try:
            if existing is None:
                await self.kube.create_secret(namespace, new)
            else:
                await self.kube.replace_secret(namespace, secret_name, new)
        except KubeError as exc:
            if exc.conflict:
                # Someone wrote it meanwhile (or created it): the next run reads it again. A key just
                # issued is lost, and the next run issues another: the lost one never left this process.
                raise Retry(
                    f"Secret '{secret_name}' changed while it was written; retrying", backoff(0)
                ) from None
            raise
        if existing is None:
            await self._forget_old_secrets(body, secret_name)

    async def _forget_old_secrets(self, body: dict[str, Any], current: str) -> None:
        """Delete credentials Secrets this Endpoint wrote under an earlier credentialsSecretName."""
        meta = body["metadata"]
        selector = quote(f"{LABEL_ENDPOINT}={label_value(meta['name'])}", safe="")
        listed = await self.kube.read(
            f"/api/v1/namespaces/{quote(meta['namespace'], safe='')}/secrets?labelSelector={selector}"
        )
        for item in (listed or {}).get("items") or []:
            old = item.get("metadata", {}).get("name")
            if old and old != current and owned_by(item, meta["uid"]):
                await self.kube.delete_secret(meta["namespace"], old)

    # --- delete ----------------------------------------------------------------------------------

    async def finalize(self, body: dict[str, Any], *, attempt: int = 0) -> None:
        """Delete the platform endpoint; Retry keeps the finalizer. The Secret goes by garbage collection."""
        meta = body["metadata"]
        try:
            spec = EndpointSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            return  # a spec that never validated never created anything
        if spec.auth.mode != "ApiKey" or not _NAME.fullmatch(meta["name"]):
            return  # nothing was created
        try:
            target = await self._target(meta["namespace"], spec, deleting_ok=True)
            endpoint = await self._find(target, meta["name"])
            if endpoint is not None:
                with contextlib.suppress(NotFound):  # gone already: that is what was wanted
                    await target.platform.delete(target.workspace, kinds.ENDPOINTS, endpoint.id)
                await self.events.post(body, "Normal", "Deleted", f"deleted platform endpoint {endpoint.id}")
        except Waiting as exc:
            if exc.reason == "InstallationNotFound":
                await self.events.post(
                    body,
                    "Normal",
                    "NotDeleted",
                    f"BundleInstallation '{spec.installation_ref.name}' is gone, so the platform and gateway "
                    "are unknown; its uninstall deleted the gateway and its endpoints unless its "
                    f"deletionPolicy was Orphan (then delete endpoint '{meta['name']}' on the platform)",
                )
            # Otherwise no gateway, so no endpoint (the platform deletes a gateway's endpoints with it).
        except SetupProblem as exc:
            await self.events.post(body, "Warning", "DeleteBlocked", exc.message)
            raise Retry(exc.message, backoff(attempt, cap=120)) from None
        except KubeError as exc:
            raise Retry(f"the Kubernetes API answered {exc.status} {exc.reason}", backoff(attempt)) from None
        except PlatformError as exc:
            await self.events.post(body, "Warning", "DeleteFailed", f"the platform answered {exc}; retrying")
            raise Retry(str(exc), backoff(attempt, retry_after=exc.retry_after)) from None
        log.info(
            "endpoint finalized",
            extra=object_extra(KIND, meta.get("namespace"), meta.get("name", ""), meta.get("uid")),
        )
