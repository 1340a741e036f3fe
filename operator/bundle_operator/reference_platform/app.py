"""The reference platform's aiohttp application: middlewares, routes and lifecycle."""

from __future__ import annotations

import asyncio
import hmac
import logging
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from bundle_operator.fetch import PRIVATE_NETWORKS, tls_context
from bundle_operator.reference_platform import (
    app_routes,
    artifact_files,
    artifact_routes,
    call_counts,
    endpoint_routes,
    faults,
    idempotency_routes,
    knowledge_routes,
    request_spans,
)
from bundle_operator.reference_platform.agent_rules import AgentRules, ChannelRules, PolicyRules, TriggerRules
from bundle_operator.reference_platform.app_rules import AppRules
from bundle_operator.reference_platform.bundle_rules import EndpointRules, GatewayBundleRules
from bundle_operator.reference_platform.context import CONTEXT, Context, ServerConfig
from bundle_operator.reference_platform.discovery import DiscoveryService
from bundle_operator.reference_platform.entity_routes import EntityRoutes
from bundle_operator.reference_platform.gateway_audit import Retention
from bundle_operator.reference_platform.gateway_mcp import (
    CATALOG_ROUTE_NAME,
    METADATA_PREFIX,
    METADATA_ROUTE_NAME,
    ROUTE_NAME,
    Gateway,
    mcp_path_prefix,
)
from bundle_operator.reference_platform.gateway_oauth import TokenVerifier
from bundle_operator.reference_platform.gateway_routes import GatewayRoutes
from bundle_operator.reference_platform.http import json_response
from bundle_operator.reference_platform.kind_rules import KindRules
from bundle_operator.reference_platform.knowledge_rules import KnowledgeSetRules
from bundle_operator.reference_platform.mcp_rules import McpInstanceRules, McpServerRules
from bundle_operator.reference_platform.problems import ApiError, problem_response
from bundle_operator.reference_platform.protocol import Oversize
from bundle_operator.reference_platform.secret_store import SecretRules
from bundle_operator.reference_platform.skill_rules import SkillRules
from bundle_operator.reference_platform.stdio_bridge import Bridges
from bundle_operator.reference_platform.stdio_loopback import PATH as STDIO_PATH
from bundle_operator.reference_platform.stdio_loopback import ROUTE_NAME as STDIO_ROUTE_NAME
from bundle_operator.reference_platform.stdio_runner import StdioRunner
from bundle_operator.reference_platform.storage import Store
from bundle_operator.telemetry import tracing

log = logging.getLogger("bundle_operator.reference_platform")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_BODY = 8 * 1024 * 1024

RULES: tuple[KindRules, ...] = (
    McpServerRules(),
    McpInstanceRules(),
    SkillRules(),
    AgentRules(),
    ChannelRules(),
    TriggerRules(),
    PolicyRules(),
    SecretRules(),
    GatewayBundleRules(),
    EndpointRules(),
    KnowledgeSetRules(),
    AppRules(),
)


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer every failure as problem+json; unexpected errors are logged without request bodies."""
    try:
        return await handler(request)
    except ApiError as exc:
        return problem_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status, f"http_{exc.status}"
        )
        # Neither the path nor the method is repeated: both came from the client.
        detail = {
            404: "there is no route for this path",
            405: "this method is not allowed on this path; the Allow header lists those that are",
            413: f"the request body is larger than {MAX_BODY} bytes",
        }.get(exc.status, exc.reason)
        # 405 must say what is allowed (RFC 9110 section 15.5.6).
        kept = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return problem_response(ApiError(exc.status, code, detail, headers=kept))
    except (RecursionError, UnicodeError):
        # Input no rule caught (text that cannot be encoded, data nested past the stack): the
        # request is at fault, and a 5xx would make clients repeat it.
        log.warning("unusable input in %s %s", request.method, request.path, exc_info=True)
        return problem_response(
            ApiError(400, "invalid_input", "the request holds data the platform cannot use")
        )
    except Exception:
        log.exception("unexpected error in %s %s", request.method, request.path)
        return problem_response(ApiError(500, "internal_error", "the platform failed unexpectedly"))


METRICS_ROUTE_NAME = "platform-metrics"


def auth_middleware(token: str | None) -> Middleware:
    """Require ``Authorization: Bearer <token>`` on the API and admin routes when a token is set."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token is None or request.path == "/healthz":
            return await handler(request)
        if request.match_info.route.name in (
            ROUTE_NAME,
            METADATA_ROUTE_NAME,
            CATALOG_ROUTE_NAME,
            STDIO_ROUTE_NAME,
        ):
            return await handler(request)  # endpoints and the stdio bridge check their own keys or tokens
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            raise ApiError(
                401,
                "unauthorized",
                "send Authorization: Bearer <token> with the platform's token",
                headers={"WWW-Authenticate": 'Bearer realm="platform"'},
            )
        return await handler(request)

    return check


async def health(request: web.Request) -> web.Response:
    """GET /healthz: the server is up."""
    return json_response({"status": "ok"})


def artifacts_dir(config: ServerConfig) -> tuple[Path, bool]:
    """Where uploaded archives are extracted, and whether the folder is a temporary one."""
    # Absolute, because the launcher runs a binary bundle with its folder as the working directory.
    if config.artifacts_dir is not None:
        return config.artifacts_dir.resolve(), False
    if config.in_memory:
        return Path(tempfile.mkdtemp(prefix="reference-platform-artifacts-")).resolve(), True
    return (config.db_path.parent / "artifacts").resolve(), False


def body_refusal(app: web.Application) -> Oversize:
    """The 413 for a request body declared too long: an artifact upload has a limit of its own."""
    artifact_limit = app[CONTEXT].config.artifact_max_bytes

    def check(request: web.BaseRequest, length: int) -> ApiError | None:
        if request.method == "PUT" and artifact_routes.UPLOAD_PATH.fullmatch(request.path):
            return artifact_routes.too_large(artifact_limit) if length > artifact_limit else None
        if length > MAX_BODY:
            return ApiError(413, "payload_too_large", f"the request body is larger than {MAX_BODY} bytes")
        return None

    return check


def create_app(config: ServerConfig) -> web.Application:
    """The reference platform application for ``config``; the store opens on startup."""
    middlewares: list[Middleware] = [problem_middleware, auth_middleware(config.token)]
    if config.fault_injection:
        middlewares.append(faults.fault_middleware)
    if config.count_calls:
        middlewares.insert(0, call_counts.count_middleware)  # outermost: it sees every final status
    if tracing.enabled():
        # Outside the problem middleware, so a span sees the status the client gets; while tracing
        # is off the middleware is not there at all.
        middlewares.insert(0, request_spans.span_middleware)
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY)
    ctx = Context(config=config, store=Store(config.db_path))
    if config.public_url:
        ctx.public_url = config.public_url
    app[CONTEXT] = ctx
    gateway = Gateway(
        ctx.store,
        public_url=lambda: ctx.public_url,
        verifier=TokenVerifier(
            allow_networks=PRIVATE_NETWORKS if config.allow_private_issuers else (), verify=tls_context()
        ),
        retention=Retention(config.audit_max_entries, timedelta(days=config.audit_max_age_days)),
        allowed_hosts=config.allowed_hosts,
    )
    discovery = DiscoveryService(ctx.store, interval=config.discovery_interval)
    gateway.member_failed = discovery.member_failed
    runner = StdioRunner(
        ctx.store,
        artifact_files.extracted_artifact,
        idle_seconds=config.instance_idle_seconds,
        first_backoff=config.instance_backoff_seconds,
        tree_check_seconds=config.instance_tree_check_seconds,
    )
    runner.unhealthy = discovery.instance_failed
    bridges = Bridges(runner)
    runner.gone = bridges.forget
    ctx.instance_health = runner.health
    ctx.on_bound.append(discovery.wake)
    app.router.add_route("*", STDIO_PATH, bridges.handle, name=STDIO_ROUTE_NAME)
    app.router.add_get("/healthz", health)
    app.router.add_get("/metrics", gateway.metrics.route, name=METRICS_ROUTE_NAME)
    # Endpoints answer MCP on the API's own listener, under the public URL's path.
    endpoint_path = f"{mcp_path_prefix(config.public_url)}/{{endpoint}}/mcp"
    app.router.add_route("*", endpoint_path, gateway.handle, name=ROUTE_NAME)
    # RFC 9728: an OAuth endpoint's metadata, public as the endpoint itself is.
    app.router.add_get(METADATA_PREFIX + endpoint_path, gateway.metadata, name=METADATA_ROUTE_NAME)
    catalog_path = f"{mcp_path_prefix(config.public_url)}/{{endpoint}}/catalog"
    app.router.add_get(catalog_path, gateway.catalog, name=CATALOG_ROUTE_NAME)
    audit = "/v1/workspaces/{workspace}/gateway-bundles/{bundle_id}/audit"
    app.router.add_get(audit, gateway.audit_log.route)
    for rules in RULES:
        EntityRoutes(rules).register(app)
    GatewayRoutes().register(app)
    endpoint_routes.register(app)
    knowledge_routes.register(app)
    artifact_routes.register(app)
    app_routes.register(app)
    idempotency_routes.register(app)
    if config.fault_injection:
        faults.register(app)
    if config.count_calls:
        call_counts.register(app)

    async def open_store(app: web.Application) -> None:
        await ctx.store.open()
        folder, ctx.artifacts_temporary = await asyncio.to_thread(artifacts_dir, config)
        await asyncio.to_thread(artifact_files.open_root, folder)
        kept = await ctx.store.transact(artifact_files.stored_folders)
        await asyncio.to_thread(artifact_files.sweep, folder, kept)
        ctx.artifacts_dir = folder
        # Beside the workspaces' folders: a workspace name never starts with a dot.
        runner.start(folder / ".instances")
        gateway.start()
        discovery.start()

    async def stop_instances(app: web.Application) -> None:
        # Before aiohttp waits for the requests in flight: the gateway's own clients hold streams
        # to the bridges open until the clients close, which comes later (close_all).
        await bridges.close()
        await runner.close()

    async def close_all(app: web.Application) -> None:
        await discovery.stop()
        await gateway.stop()
        if ctx.session is not None:
            await ctx.session.close()
        await ctx.store.close()
        if ctx.artifacts_temporary and ctx.artifacts_dir is not None:
            await asyncio.to_thread(shutil.rmtree, ctx.artifacts_dir, True)

    app.on_startup.append(open_store)
    app.on_shutdown.append(stop_instances)
    app.on_cleanup.append(close_all)
    return app
