"""The route table of the platform API v1: every operation with its path, parameters, bodies
and answers. openapi_build.py renders it, with the models' schemas, into ``openapi.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from bundle_operator.platform import catalog, kinds, models
from bundle_operator.platform.conventions import MAX_LIMIT, WORKSPACE_PATTERN
from bundle_operator.platform.http_calls import page_of

WS = "/v1/workspaces/{workspace}"
GW = WS + "/gateway-bundles/{bundle_id}"
KS = WS + "/knowledge-sets/{set_id}"
APP = WS + "/apps/{app_id}"
ARTIFACT = WS + "/artifacts/{digest}"


@dataclass(frozen=True)
class Param:
    """A path, query or header parameter."""

    name: str
    where: Literal["path", "query", "header"]
    schema: dict[str, Any]
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Op:
    """One operation of the API."""

    method: str
    path: str
    op_id: str
    summary: str
    tag: str
    request: type[BaseModel] | None = None
    # The media type of a body sent as raw bytes instead of a JSON ``request`` model.
    raw_request: str | None = None
    ok: int = 200
    response: type[BaseModel] | None = None
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400, 401, 404, 422)
    also_ok: tuple[int, ...] = ()
    etag: bool = False
    # OpenAPI links from this operation's success answer: name -> (operationId, parameters).
    links: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)


def path_params(path: str) -> tuple[Param, ...]:
    """The path template's {placeholders} as required path parameters."""
    params = []
    for part in path.split("/"):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            schema: dict[str, Any] = {"type": "string", "minLength": 1}
            if name == "workspace":
                schema["pattern"] = WORKSPACE_PATTERN.pattern
            elif name == "key":
                schema["pattern"] = IDEMPOTENCY_KEY_PATTERN
            elif name == "digest":
                schema["pattern"] = models.DIGEST_PATTERN
            params.append(Param(name, "path", schema, required=True))
        elif ":" in part and part.startswith("{"):
            raise ValueError(part)
    return tuple(params)


PAGING = (
    Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}, description="page size"),
    Param("cursor", "query", {"type": "string"}, description="next_cursor of the previous page"),
)
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
IDEMPOTENCY = Param(
    "Idempotency-Key",
    "header",
    {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
    description="repeat a create safely: the same key returns the entity the first call created",
)
IF_MATCH_REQUIRED = Param(
    "If-Match",
    "header",
    {"type": "string"},
    required=True,
    description='the revision the change is based on, e.g. "3"',
)
IF_MATCH = Param("If-Match", "header", {"type": "string"}, description="delete only at this revision")
IF_MATCH_SOURCE = Param(
    "If-Match", "header", {"type": "string"}, description="change only at this revision of the source"
)


def _listing(path: str, op_id: str, summary: str, tag: str, item: type[BaseModel]) -> Op:
    """A GET of one page of ``item``s."""
    return Op("get", path, op_id, summary, tag, response=page_of(item), params=PAGING)


def _reading(path: str, op_id: str, summary: str, tag: str, answer: type[BaseModel]) -> Op:
    """A GET of one ``answer``."""
    return Op("get", path, op_id, summary, tag, response=answer)


_FILTER_SCHEMAS: dict[str, dict[str, Any]] = {"archived": {"type": "boolean"}}


def _entity_ops(kind: kinds.Kind[Any, Any, Any]) -> list[Op]:
    singular = kind.path.rstrip("s").replace("-", " ")
    tag = kind.path
    op_name = kind.path.replace("-", "_")
    collection = f"{WS}/{kind.path}"
    item = f"{collection}/{{entity_id}}"
    filters = tuple(
        Param(
            f, "query", _FILTER_SCHEMAS.get(f, {"type": "string"}), description=f"only entities with this {f}"
        )
        for f in kind.filters
    )
    from_created = {"workspace": "$request.path.workspace", "entity_id": "$response.body#/id"}
    links = {
        "Get": (f"get_{op_name}", from_created),
        "Update": (f"update_{op_name}", from_created | {"header.If-Match": "$response.header.ETag"}),
        "Delete": (f"delete_{op_name}", from_created),
    }
    if kind.path in _SUB_OPS:
        param, op_ids = _SUB_OPS[kind.path]
        into = {"workspace": "$request.path.workspace", param: "$response.body#/id"}
        for op_id in op_ids:
            links[op_id] = (op_id, into)
    return [
        Op(
            "post",
            collection,
            f"create_{op_name}",
            f"Create a {singular}",
            tag,
            request=kind.create,
            ok=201,
            also_ok=(200,),
            response=kind.entity,
            params=(IDEMPOTENCY,),
            errors=(400, 401, 404, 409, 422, 502) if kind is kinds.SKILLS else (400, 401, 404, 409, 422),
            etag=True,
            links=links,
        ),
        Op(
            "get",
            collection,
            f"list_{op_name}",
            f"List {kind.path}",
            tag,
            response=page_of(kind.entity),
            params=PAGING + filters,
        ),
        Op("get", item, f"get_{op_name}", f"Get a {singular}", tag, response=kind.entity, etag=True),
        Op(
            "patch",
            item,
            f"update_{op_name}",
            f"Update a {singular}",
            tag,
            request=kind.update,
            response=kind.entity,
            params=(IF_MATCH_REQUIRED,),
            errors=(400, 401, 404, 409, 412, 422, 428, 502)
            if kind is kinds.SKILLS
            else (400, 401, 404, 409, 412, 422, 428),
            etag=True,
        ),
        Op(
            "delete",
            item,
            f"delete_{op_name}",
            f"Delete a {singular}",
            tag,
            ok=204,
            params=(IF_MATCH,),
            errors=(400, 401, 404, 409, 412, 422),
        ),
    ]


_BUNDLE_OPS = (
    "rename_gateway_bundle",
    "list_gateway_members",
    "order_gateway_members",
    "put_gateway_member",
    "list_gateway_tools",
    "put_gateway_tool",
    "list_gateway_member_prompts",
    "list_gateway_member_resources",
    "list_gateway_prompts",
    "put_gateway_prompt",
    "list_gateway_resources",
    "put_gateway_resource",
)
# Operations under one entity that its create links to: (the entity's path parameter, op ids).
_SUB_OPS: dict[str, tuple[str, tuple[str, ...]]] = {
    kinds.GATEWAY_BUNDLES.path: ("bundle_id", _BUNDLE_OPS),
    kinds.KNOWLEDGE_SETS.path: (
        "set_id",
        ("list_knowledge_sources", "put_knowledge_source", "add_knowledge_source"),
    ),
    kinds.APPS.path: ("app_id", ("list_app_versions", "add_app_version", "update_app_version")),
}


def operations() -> list[Op]:
    """Every operation of the API, in document order."""
    m = models
    ops: list[Op] = [
        Op("get", "/healthz", "health", "Is the platform up", "health", response=m.Health, errors=())
    ]
    for kind in kinds.ALL_KINDS:
        ops.extend(_entity_ops(kind))
    g = "gateway-bundles"
    ops += [
        Op(
            "post",
            f"{WS}/endpoints/{{entity_id}}/api-key",
            "issue_endpoint_api_key",
            "Issue a new API key for an ApiKey endpoint (the old one stops working)",
            "endpoints",
            response=m.ApiKeyIssued,
            errors=(400, 401, 404, 409, 422),
        ),
        Op(
            "get",
            f"{WS}/idempotency-keys/{{key}}",
            "find_by_idempotency_key",
            "Find the entity a create with this Idempotency-Key made",
            "idempotency",
            response=m.IdempotencyRecord,
        ),
        Op(
            "get",
            f"{WS}/models",
            "list_models",
            "List the models an agent may name",
            "catalog",
            response=page_of(catalog.ModelInfo),
            params=PAGING,
        ),
        Op(
            "post",
            f"{GW}/rename",
            "rename_gateway_bundle",
            "Rename a bundle (needs force)",
            g,
            request=m.GatewayRename,
            response=m.GatewayBundle,
            errors=(400, 401, 404, 409, 422),
            etag=True,
        ),
        Op(
            "get",
            f"{GW}/audit",
            "list_gateway_audit",
            "List the tool calls through the bundle's endpoints, newest first (kept in the database)",
            g,
            response=page_of(m.GatewayAuditEntry),
            params=PAGING,
        ),
        _listing(f"{GW}/members", "list_gateway_members", "List members in order", g, m.GatewayMember),
        Op(
            "put",
            f"{GW}/members:order",
            "order_gateway_members",
            "Set the whole member order",
            g,
            request=m.GatewayMemberOrder,
            response=page_of(m.GatewayMember),
        ),
        Op(
            "put",
            f"{GW}/members/{{member}}",
            "put_gateway_member",
            "Add or change a member",
            g,
            request=m.GatewayMemberPut,
            response=m.GatewayMember,
            errors=(400, 401, 404, 409, 422),
        ),
        Op(
            "delete",
            f"{GW}/members/{{member}}",
            "delete_gateway_member",
            "Remove a member and its curation",
            g,
            ok=204,
        ),
        _listing(
            f"{GW}/tools", "list_gateway_tools", "List the tools the bundle can serve", g, m.GatewayTool
        ),
        _reading(
            f"{GW}/tools/{{tool_id}}", "get_gateway_tool", "Get one tool (id member__tool)", g, m.GatewayTool
        ),
        Op(
            "put",
            f"{GW}/tools/{{tool_id}}",
            "put_gateway_tool",
            "Replace a tool's curation",
            g,
            request=m.GatewayToolCuration,
            response=m.GatewayTool,
            errors=(400, 401, 404, 409, 422),
        ),
        _listing(
            f"{GW}/member-prompts",
            "list_gateway_member_prompts",
            "List members' prompts",
            g,
            m.GatewayMemberPrompt,
        ),
        Op(
            "put",
            f"{GW}/member-prompts/{{entry_id}}",
            "put_gateway_member_prompt",
            "Curate a member's prompt (id member__prompt)",
            g,
            request=m.GatewayEntryCuration,
            response=m.GatewayMemberPrompt,
        ),
        _listing(
            f"{GW}/member-resources",
            "list_gateway_member_resources",
            "List members' resources",
            g,
            m.GatewayMemberResource,
        ),
        Op(
            "put",
            f"{GW}/member-resources/{{entry_id}}",
            "put_gateway_member_resource",
            "Curate a member's resource (id: member, '__', the URI in unpadded base64url)",
            g,
            request=m.GatewayEntryCuration,
            response=m.GatewayMemberResource,
        ),
        _listing(
            f"{GW}/prompts",
            "list_gateway_prompts",
            "List the bundle's prompts in name order",
            g,
            m.GatewayPrompt,
        ),
        _reading(f"{GW}/prompts/{{name}}", "get_gateway_prompt", "Get a bundle prompt", g, m.GatewayPrompt),
        Op(
            "put",
            f"{GW}/prompts/{{name}}",
            "put_gateway_prompt",
            "Create or replace a bundle prompt",
            g,
            request=m.GatewayPromptPut,
            response=m.GatewayPrompt,
            also_ok=(201,),
        ),
        Op("delete", f"{GW}/prompts/{{name}}", "delete_gateway_prompt", "Delete a bundle prompt", g, ok=204),
        _listing(
            f"{GW}/resources",
            "list_gateway_resources",
            "List the bundle's resources in name order",
            g,
            m.GatewayResource,
        ),
        _reading(
            f"{GW}/resources/{{name}}",
            "get_gateway_resource",
            "Get a bundle resource (the name may contain '/')",
            g,
            m.GatewayResource,
        ),
        Op(
            "put",
            f"{GW}/resources/{{name}}",
            "put_gateway_resource",
            "Create or replace a bundle resource",
            g,
            request=m.GatewayResourcePut,
            response=m.GatewayResource,
            also_ok=(201,),
        ),
        Op(
            "delete",
            f"{GW}/resources/{{name}}",
            "delete_gateway_resource",
            "Delete a bundle resource (409 while a prompt embeds it)",
            g,
            ok=204,
            errors=(400, 401, 404, 409, 422),
        ),
        Op(
            "get",
            f"{KS}/sources",
            "list_knowledge_sources",
            "List a knowledge set's sources in creation order",
            "knowledge-sets",
            response=page_of(m.KnowledgeSource),
            params=PAGING,
        ),
        Op(
            "post",
            f"{KS}/sources",
            "add_knowledge_source",
            "Add a source of the user's own (it has no key)",
            "knowledge-sets",
            request=m.KnowledgeSourcePut,
            ok=201,
            response=m.KnowledgeSource,
        ),
        Op(
            "put",
            f"{KS}/sources/{{source}}",
            "put_knowledge_source",
            "Create or replace the source with this key (only at the If-Match revision when given)",
            "knowledge-sets",
            request=m.KnowledgeSourcePut,
            response=m.KnowledgeSource,
            also_ok=(201,),
            params=(IF_MATCH_SOURCE,),
            errors=(400, 401, 404, 412, 422),
        ),
        Op(
            "delete",
            f"{KS}/sources/{{source}}",
            "delete_knowledge_source",
            "Delete a source by its key or its src_ id (only at the If-Match revision when given)",
            "knowledge-sets",
            ok=204,
            params=(IF_MATCH_SOURCE,),
            errors=(400, 401, 404, 412, 422),
        ),
        Op(
            "get",
            f"{APP}/versions",
            "list_app_versions",
            "List an app's versions, oldest first",
            "apps",
            response=page_of(m.AppVersion),
            params=PAGING,
        ),
        Op(
            "post",
            f"{APP}/versions",
            "add_app_version",
            "Add the app's next version (the answer is the app)",
            "apps",
            request=m.AppVersionCreate,
            ok=201,
            response=m.App,
            etag=True,
        ),
        Op(
            "patch",
            f"{APP}/versions/{{version}}",
            "update_app_version",
            "Archive or restore one version of an app",
            "apps",
            request=m.AppVersionUpdate,
            response=m.AppVersion,
        ),
        _listing(
            f"{WS}/artifacts",
            "list_artifacts",
            "List the workspace's artifacts in upload order",
            "artifacts",
            m.Artifact,
        ),
        Op(
            "put",
            ARTIFACT,
            "put_artifact",
            "Store an archive under its digest (the same digest again answers the stored artifact)",
            "artifacts",
            raw_request="application/octet-stream",
            ok=201,
            also_ok=(200,),
            response=m.Artifact,
            errors=(400, 401, 413, 422),
        ),
        _reading(ARTIFACT, "get_artifact", "Get an artifact's metadata", "artifacts", m.Artifact),
        Op(
            "delete",
            ARTIFACT,
            "delete_artifact",
            "Delete an artifact and its extracted files (409 while an MCP server spec refers to it)",
            "artifacts",
            ok=204,
            errors=(400, 401, 404, 409, 422),
        ),
        Op(
            "post",
            "/_admin/faults",
            "add_fault",
            "Arm a fault (only with --enable-fault-injection)",
            "admin",
            request=m.FaultSpec,
            ok=201,
            response=m.Fault,
            errors=(400, 401, 422),
        ),
        Op(
            "get",
            "/_admin/faults",
            "list_faults",
            "List armed faults (only with --enable-fault-injection)",
            "admin",
            response=page_of(m.Fault),
            errors=(401,),
        ),
        Op(
            "delete",
            "/_admin/faults",
            "clear_faults",
            "Disarm every fault (only with --enable-fault-injection)",
            "admin",
            ok=204,
            errors=(401,),
        ),
    ]
    return ops
