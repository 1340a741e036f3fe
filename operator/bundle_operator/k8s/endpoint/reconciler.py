"""The level-based reconcile of an Endpoint, as named steps in the manner of an external-resource
reconciler (observe, create, update, then the credentials):

    read_spec -> target -> own_secret -> observe -> create -> update -> credentials -> report

It finds the gateway its BundleInstallation installed, makes the platform endpoint match the
spec, keeps the issued API key in a Secret the Endpoint owns, and reports the URL, the served
tools and the members' health. A step returns what the next needs, or ``Done`` when the run ends
there. Create, update, resume, the refresh timer, a changed installation or Secret and the
reconcile annotation all come here. No kopf types: handlers call it and map ``Retry``.

The platform endpoint is found again by name and gateway bundle (its name is the Endpoint's
``metadata.name``), so no id needs to live in spec or status. An API key is shown by the platform
once, when it is issued: it goes straight into the Secret and nowhere else (not status, events,
logs or errors).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from pydantic import SecretStr, ValidationError

from bundle_operator.k8s import conditions as cond
from bundle_operator.k8s import spans
from bundle_operator.k8s.endpoint.secret import (
    KIND,
    LABEL_ENDPOINT,
    key_needed,
    label_value,
    owned_by,
    predecessor_owns,
    remembered_rotation,
    rotation_request,
    secret_body,
    secret_current,
)
from bundle_operator.k8s.endpoint.status import (
    EndpointStatus,
    MembersCallback,
    cleared,
    ready_conditions,
    served_view,
)
from bundle_operator.k8s.endpoint.target import Target, Waiting, find_target
from bundle_operator.k8s.event_reasons import (
    DELETE_BLOCKED,
    DELETE_FAILED,
    ENDPOINT_CREATED,
    ENDPOINT_DELETED,
    ENDPOINT_UPDATED,
    KEY_ISSUED,
    KEY_ROTATED,
    NOT_DELETED,
)
from bundle_operator.k8s.events import Events
from bundle_operator.k8s.installation.setup import SetupProblem
from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import REDACTOR, object_extra
from bundle_operator.k8s.platforms import PlatformPool
from bundle_operator.k8s.process.metrics import ReconcileResult
from bundle_operator.k8s.reconcile import (
    ANNOTATION_PAUSED,
    Done,
    OperatorSettings,
    Retry,
    backoff,
    is_paused,
    kube_retry,
    retry_after,
    temporary,
)
from bundle_operator.k8s.resources import ENDPOINT_NAME_PATTERN, EndpointSpec
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import Conflict, NotFound, PlatformError, PreconditionFailed, Refused
from bundle_operator.platform.models import Endpoint, EndpointCreate, EndpointUpdate
from bundle_operator.platform.models import EndpointOAuth as PlatformOAuth
from bundle_operator.platform.models import EndpointRateLimit as PlatformRateLimit
from bundle_operator.telemetry import tracing

log = logging.getLogger(__name__)

_NAME = re.compile(ENDPOINT_NAME_PATTERN)


def idempotency_key(uid: str, body: EndpointCreate) -> str:
    """The create's Idempotency-Key: the Endpoint's uid and what is sent, so a repeated create
    finds the same endpoint and a create of a different body is never refused as a reuse."""
    text = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return f"bundle-operator/endpoint/{uid}/{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def platform_oauth(spec: EndpointSpec) -> PlatformOAuth | None:
    """The platform's OAuth settings for the spec's ``auth.oauth``."""
    oauth = spec.auth.oauth
    if spec.auth.mode != "OAuth" or oauth is None:
        return None
    return PlatformOAuth(
        issuer=oauth.issuer,
        audience=oauth.audience,
        required_scopes=list(oauth.required_scopes),
        tool_scopes={k: list(v) for k, v in oauth.tool_scopes.items()},
    )


def platform_rate_limit(spec: EndpointSpec) -> PlatformRateLimit | None:
    """The platform's rate limit for the spec's ``rateLimit``."""
    limit = spec.rate_limit
    if limit is None:
        return None
    return PlatformRateLimit(requests_per_minute=limit.requests_per_minute, burst=limit.burst)


def wanted_update(spec: EndpointSpec, endpoint: Endpoint) -> EndpointUpdate | None:
    """The PATCH that brings ``endpoint`` to the spec's profile, enabled, OAuth settings, rate
    limit and allowed origins, or None."""
    changes: dict[str, Any] = {}
    if endpoint.profile != spec.profile:
        changes["profile"] = spec.profile
    if endpoint.enabled != spec.enabled:
        changes["enabled"] = spec.enabled
    oauth = platform_oauth(spec)
    if oauth is not None and endpoint.oauth != oauth:
        changes["oauth"] = oauth
    rate_limit = platform_rate_limit(spec)
    if endpoint.rate_limit != rate_limit:
        changes["rate_limit"] = rate_limit
    if endpoint.allowed_origins != spec.allowed_origins:
        changes["allowed_origins"] = list(spec.allowed_origins)
    return EndpointUpdate(**changes) if changes else None


@dataclass
class Run:
    """One reconcile of one Endpoint: the object, its status draft, and what the run did or,
    paused, would have done."""

    body: dict[str, Any]
    status: EndpointStatus
    attempt: int
    paused: bool
    done: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.body["metadata"]["uid"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])


@dataclass
class Observed:
    """The platform endpoint as this run leaves it (None: missing, and paused), and a key it issued."""

    endpoint: Endpoint | None
    issued: SecretStr | None = None


class EndpointReconciler:
    """Reconciles Endpoints against the platform their installations install into."""

    def __init__(
        self,
        kube: Kube,
        settings: OperatorSettings,
        platforms: PlatformPool,
        events: Events,
        on_members: MembersCallback | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.platforms = platforms
        self.events = events
        self.on_members = on_members

    async def reconcile(self, body: dict[str, Any], *, attempt: int = 0) -> ReconcileResult:
        """Bring the platform endpoint and the credentials Secret to the spec; the result for metrics."""
        spans.endpoint(body)
        run = Run(body, EndpointStatus(self.kube, body, on_members=self.on_members), attempt, is_paused(body))
        spec = self._read_spec(run)
        if isinstance(spec, Done):
            await run.status.write()
            return spec.result
        try:
            return (await self._run(run, spec)).result
        except Waiting as exc:
            # Not a kopf retry: a delayed handler would not run before its delay is out, however
            # soon the installation changes. Its changes nudge the Endpoint, and the refresh timer
            # looks again in the meantime.
            run.status.served(cleared())
            run.status.conditions(cond.progressing(exc.reason, exc.message))
            await run.status.write(observed=False)
            return "retry"
        except SetupProblem as exc:
            run.status.conditions(cond.stalled(exc.reason, exc.message))
            await run.status.write()
            return "stalled"
        except KubeError as exc:
            raise kube_retry(exc, attempt) from None
        except PlatformError as exc:
            if temporary(exc):
                run.status.conditions(
                    cond.progressing("PlatformUnavailable", f"the platform answered {exc}; retrying")
                )
                await run.status.write(observed=False)
                raise Retry(str(exc), backoff(attempt, retry_after=retry_after(exc))) from None
            run.status.conditions(
                cond.stalled(
                    "PlatformRefused",
                    f"the platform refused a call: {exc}; fix the cause and edit the Endpoint (or annotate "
                    "it with bundle-operator.dev/reconcile-requested-at)",
                )
            )
            await run.status.write()
            return "stalled"

    async def _run(self, run: Run, spec: EndpointSpec) -> Done:
        """The steps in order; Waiting, SetupProblem and failed calls end the run in ``reconcile``."""
        with tracing.span("target"):
            target = await find_target(self.kube, self.settings, self.platforms, run.namespace, spec)
        tracing.set_attributes({spans.WORKSPACE: target.workspace})
        with tracing.span("secret"):
            secret = await self._own_secret(run, spec)
        with tracing.span("observe"):
            found = await self._observe(target, run.name)
        with tracing.span("create"):
            observed = await self._create(run, spec, target, found)
        with tracing.span("update"):
            observed = await self._update(run, spec, target, observed)
        with tracing.span("credentials"):
            await self._credentials(run, spec, target, observed, secret)
        with tracing.span("report"):
            return await self._report(run, spec, target, observed)

    # --- the steps -------------------------------------------------------------------------------

    def _read_spec(self, run: Run) -> EndpointSpec | Done:
        """The spec, validated, with what the schema cannot say checked here; stalled otherwise."""
        status, name = run.status, run.name
        try:
            spec = EndpointSpec.model_validate(run.body.get("spec") or {})
        except ValidationError as exc:
            status.conditions(cond.stalled("InvalidSpec", f"{cond.spec_error(exc)}; fix the resource"))
            return Done("stalled")
        if not _NAME.fullmatch(name):
            status.conditions(
                cond.stalled(
                    "InvalidName",
                    f"metadata.name '{name}' cannot name a platform endpoint (a URL path segment: at most 64 "
                    "letters, digits, '-' or '_'); create the Endpoint under another name",
                )
            )
            return Done("stalled")
        if (spec.auth.mode == "OAuth") != (spec.auth.oauth is not None):
            status.conditions(
                cond.stalled(
                    "InvalidSpec",
                    "spec.auth.oauth: required when auth.mode is OAuth (at least its issuer), and only then; "
                    "fix the resource",
                )
            )
            return Done("stalled")
        if spec.credentials_secret_name is None and spec.auth.mode == "ApiKey":
            status.conditions(
                cond.stalled(
                    "InvalidSpec",
                    "spec.credentialsSecretName: required when auth.mode is ApiKey; name the Secret the "
                    "API key is written to",
                )
            )
            return Done("stalled")
        return spec

    async def _own_secret(self, run: Run, spec: EndpointSpec) -> dict[str, Any] | None:
        """The credentials Secret, if it exists; a Secret this Endpoint does not own is never touched.

        An OAuth endpoint has no key, so it keeps no Secret.
        """
        if spec.auth.mode == "OAuth" or spec.credentials_secret_name is None:
            return None
        secret = await self.kube.read_secret(run.namespace, spec.credentials_secret_name)
        if secret is None or owned_by(secret, run.uid):
            return secret
        if predecessor_owns(secret, run.name):
            raise Waiting(
                "SecretOfEarlierEndpoint",
                f"Secret '{spec.credentials_secret_name}' belongs to an earlier Endpoint named "
                f"'{run.name}' and goes with it by garbage collection; waiting for it to go",
            )
        raise SetupProblem(
            "SecretNotOwned",
            f"spec.credentialsSecretName: Secret '{spec.credentials_secret_name}' exists in "
            f"namespace '{run.namespace}' and is not owned by this Endpoint, so it is never "
            "overwritten; name another Secret, or delete that one",
        )

    async def _observe(self, target: Target, name: str) -> Endpoint | None:
        """The platform endpoint of this name on the target gateway, if there is one."""
        found = await target.platform.list_all(
            target.workspace, kinds.ENDPOINTS, filters={"name": name, "gateway_bundle_id": target.gateway_id}
        )
        return found[0] if found else None

    async def _create(
        self, run: Run, spec: EndpointSpec, target: Target, endpoint: Endpoint | None
    ) -> Observed:
        """Create the platform endpoint when it is missing; refuse one of another auth mode."""
        issued: SecretStr | None = None
        if endpoint is None:
            if run.paused:
                run.pending.append("the platform endpoint would be created")
                return Observed(None)
            endpoint = await self._create_endpoint(target, run.name, run.uid, spec)
            issued = endpoint.api_key
            run.done.append(f"created {endpoint.id}")
            await self.events.post(
                run.body, ENDPOINT_CREATED, f"created platform endpoint {endpoint.id} at {endpoint.url}"
            )
        if endpoint.auth_mode != spec.auth.mode:
            raise SetupProblem(
                "AuthModeMismatch",
                f"the platform endpoint '{run.name}' ({endpoint.id}) uses {endpoint.auth_mode}, not "
                f"{spec.auth.mode}; delete it on the platform, or create this Endpoint with auth.mode "
                f"{endpoint.auth_mode}",
            )
        return Observed(endpoint, issued)

    async def _update(self, run: Run, spec: EndpointSpec, target: Target, observed: Observed) -> Observed:
        """Bring the endpoint's profile and enabled to the spec."""
        endpoint = observed.endpoint
        update = wanted_update(spec, endpoint) if endpoint is not None else None
        if endpoint is None or update is None:
            return observed
        what = ", ".join(f"{k} {v}" for k, v in update.model_dump(exclude_none=True).items())
        if run.paused:
            run.pending.append(f"the platform endpoint would get {what}")
            return observed
        endpoint = await target.platform.update(
            target.workspace, kinds.ENDPOINTS, endpoint.id, update, revision=endpoint.revision
        )
        run.done.append(f"set {what}")
        await self.events.post(run.body, ENDPOINT_UPDATED, f"set {what} on platform endpoint {endpoint.id}")
        return Observed(endpoint, observed.issued)

    async def _credentials(
        self, run: Run, spec: EndpointSpec, target: Target, observed: Observed, secret: dict[str, Any] | None
    ) -> None:
        """Issue a key when the Secret has none, another endpoint's, or a rotation is asked; write it."""
        endpoint, issued = observed.endpoint, observed.issued
        secret_name = spec.credentials_secret_name
        if endpoint is None or secret_name is None or spec.auth.mode == "OAuth":
            return
        # A removed annotation asks for nothing: the Secret keeps the request it last answered.
        rotation = rotation_request(run.body) or remembered_rotation(secret)
        need = None if issued is not None else key_needed(secret, endpoint.id, rotation)
        if need is not None and run.paused:
            run.pending.append(
                "a new API key would be issued" if need != "rotation" else "the key would rotate"
            )
        elif need is not None:
            issued = await target.platform.issue_endpoint_key(target.workspace, endpoint.id)
            run.done.append(f"issued a key ({need})")
        if issued is not None:
            REDACTOR.add(issued.get_secret_value())
        current = secret is not None and secret_current(secret, endpoint.url, endpoint.id, rotation)
        if run.paused:
            if secret is not None and not current:
                run.pending.append(f"Secret '{secret_name}' would be updated")
            return
        if issued is None and current:
            return
        written = secret_body(
            run.body,
            secret_name,
            secret,
            api_key=issued,
            url=endpoint.url,
            endpoint_id=endpoint.id,
            rotated_for=rotation,
        )
        await self._write_secret(run.body, secret_name, secret, written)
        run.done.append(f"wrote Secret '{secret_name}'")
        if need == "rotation":
            await self.events.post(
                run.body,
                KEY_ROTATED,
                f"issued a new API key for platform endpoint {endpoint.id} into Secret "
                f"'{secret_name}'; the previous key no longer works",
            )
        elif issued is not None:
            await self.events.post(
                run.body,
                KEY_ISSUED,
                f"wrote the API key of platform endpoint {endpoint.id} to Secret '{secret_name}'",
            )

    async def _report(self, run: Run, spec: EndpointSpec, target: Target, observed: Observed) -> Done:
        """status.url, the served tools, the members' health and Ready (or what a pause holds back)."""
        platform, workspace, endpoint = target.platform, target.workspace, observed.endpoint
        members = await platform.list_members(workspace, target.gateway_id) if endpoint is not None else []
        tools = await platform.list_tools(workspace, target.gateway_id) if endpoint is not None else []
        view = served_view(endpoint, tools, members)
        run.status.served(view)
        if run.pending:
            message = f"the {ANNOTATION_PAUSED} annotation is set: nothing is written; " + "; ".join(
                run.pending
            )
            run.status.conditions(
                [
                    cond.false("Ready", "Paused", message),
                    cond.false("Reconciling", "Paused", ""),
                    cond.false("Stalled", "Paused", ""),
                ]
            )
        else:
            run.status.conditions(ready_conditions(spec, view, paused=run.paused))
        await run.status.write()
        if run.done:
            log.info(
                "endpoint reconciled: %s",
                "; ".join(run.done),
                extra=object_extra(KIND, run.namespace, run.name, run.uid),
            )
        return Done("success")

    # --- platform and Secret writes --------------------------------------------------------------

    async def _create_endpoint(self, target: Target, name: str, uid: str, spec: EndpointSpec) -> Endpoint:
        body = EndpointCreate(
            name=name,
            gateway_bundle_id=target.gateway_id,
            auth_mode=spec.auth.mode,
            oauth=platform_oauth(spec),
            rate_limit=platform_rate_limit(spec),
            allowed_origins=list(spec.allowed_origins),
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

    async def _write_secret(
        self, body: dict[str, Any], secret_name: str, existing: dict[str, Any] | None, new: dict[str, Any]
    ) -> None:
        """Create the Secret, or replace ``existing`` (compare-and-swap on its resourceVersion)."""
        namespace = body["metadata"]["namespace"]
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
        if (spec.auth.mode == "OAuth" and spec.auth.oauth is None) or not _NAME.fullmatch(meta["name"]):
            return  # a spec the reconcile stalls on created nothing
        try:
            target = await find_target(
                self.kube, self.settings, self.platforms, meta["namespace"], spec, deleting_ok=True
            )
            endpoint = await self._observe(target, meta["name"])
            if endpoint is not None:
                with contextlib.suppress(NotFound):  # gone already: that is what was wanted
                    await target.platform.delete(target.workspace, kinds.ENDPOINTS, endpoint.id)
                await self.events.post(body, ENDPOINT_DELETED, f"deleted platform endpoint {endpoint.id}")
        except Waiting as exc:
            if exc.reason == "InstallationNotFound":
                await self.events.post(
                    body,
                    NOT_DELETED,
                    f"BundleInstallation '{spec.installation_ref.name}' is gone, so the platform and gateway "
                    "are unknown; its uninstall deleted the gateway and its endpoints unless its "
                    f"deletionPolicy was Orphan (then delete endpoint '{meta['name']}' on the platform)",
                )
            # Otherwise no gateway, so no endpoint (the platform deletes a gateway's endpoints with it).
        except SetupProblem as exc:
            await self.events.post(body, DELETE_BLOCKED, exc.message)
            raise Retry(exc.message, backoff(attempt, cap=120)) from None
        except KubeError as exc:
            raise kube_retry(exc, attempt) from None
        except PlatformError as exc:
            await self.events.post(body, DELETE_FAILED, f"the platform answered {exc}; retrying")
            raise Retry(str(exc), backoff(attempt, retry_after=exc.retry_after)) from None
        log.info(
            "endpoint finalized",
            extra=object_extra(KIND, meta.get("namespace"), meta.get("name", ""), meta.get("uid")),
        )
