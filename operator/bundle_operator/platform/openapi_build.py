"""Build ``openapi.yaml`` from the route table (openapi_routes.py) and the shared pydantic models.

The schemas come from the same models the client sends and the reference platform validates,
so the document cannot disagree with either. Regenerate after changing a model or a route:
``python -m bundle_operator.platform.openapi_build > operator/bundle_operator/platform/openapi.yaml``
(a test fails while the checked-in file is stale).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from bundle_operator.platform import models
from bundle_operator.platform.openapi_routes import operations, path_params

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")

DESCRIPTION = """\
The agent platform API v1, spoken by bundle-operator and served by its reference platform
(`bundlectl platform serve`). Everything lives in a workspace: any name matching
`^[a-z0-9][a-z0-9-]{0,62}$` exists on first use.

Conventions:
- **Create** (`POST` on a collection) accepts `Idempotency-Key`. Repeating a create with the same
  key and body returns the entity the first call created (`200`, header `Idempotent-Replayed:
  true`) instead of creating another; the same key with a different body answers `422
  idempotency_key_reused`; a key whose entity was deleted since answers `404`.
  `GET /v1/workspaces/{workspace}/idempotency-keys/{key}` finds what a create with that key
  made (its collection `kind`, `id`, and whether it still `exists`), so a client that crashed
  before reading the answer finds the entity instead of creating it again; `404` when no create
  with that key was recorded in the workspace. Keys are meant to be unique per workspace; when
  one was used for several kinds, the latest create is shown.
- Every entity has an `id` (a kind prefix such as `agt_`) and a `revision`, also sent as the
  `ETag`. `PATCH` needs `If-Match` with the revision it is based on (`428` without it, `412`
  when the entity moved on); `DELETE` honours `If-Match` when given. `PATCH` changes only the
  fields present; `null` clears an optional field.
- Errors are `application/problem+json` with a machine-readable `code`, a `detail`, and
  `errors[]` naming the fields concerned (`field`, `message`, and `line` for SKILL.md). A `409`
  names who holds the contested name or still refers to the entity in `holders`.
- Lists are paginated: `limit` (1..500, default 100) and the `next_cursor` of the previous page
  as `cursor`; `next_cursor` is null on the last page.
- Secret values are write-only: secrets, bot tokens, context secrets go in and never come out.
  Configuration values that are secret are passed as `{"secret_id": ...}` references. An
  endpoint's API key is shown only in the answer to its create (and replays of it, until a new
  key is issued) and by `POST .../api-key`, which issues a new one.
- Idempotency keys are remembered for 24 hours; after that the same key creates anew.
- With a token configured, every route but `/healthz` needs `Authorization: Bearer <token>`.
- What exists for an agent to use: `GET /v1/workspaces/{workspace}/models` lists the models an
  agent's `model` may name (`default` is the model an agent runs on without one of its own); the
  tools an agent can use are the workspace's MCP instances (`GET .../mcp-instances?name=`). The
  reference platform lists a fixed set of models and does not refuse an agent that names another.
- The gateway discovers what each url member offers with an MCP client (tools, prompts and
  resources, up to 500 each) when it joins or changes, when the member says its lists changed,
  and on a timer; a member's `healthy` and `message` come from its last discovery. A server spec
  that declares a `catalog` is not discovered: the catalog stands in for it (a test seam).
- Each enabled endpoint is a streamable-HTTP MCP server at its `url` (`{public}/{name}/mcp`, on
  this same listener, outside this document); an ApiKey endpoint wants `Authorization: Bearer
  <key>` with its current key, a disabled one answers `403`.

Platform rules the reference platform enforces: MCP server specs are checked per type, command
runtimes are limited to npx, uvx, uv, python, python3, node, bunx and deno (a server run from an
artifact has its own forms, see Artifacts below), and an env or header
entry is secret when its declared `type` is `secret` (a name heuristic applies only when neither
`type` nor `secret` is given); an instance must pass secret inputs by reference, and a spec
change that would leave an existing instance with a plain value for a secret entry or without a
required one answers `409 instances_do_not_fit` naming the instances in `holders`; a context
secret (32..512 characters) is allowed on url servers only and shows as `context_signing`.
Skills are parsed from SKILL.md front matter (a bad one answers 422 naming the line; its
metadata is stored with text keys and may expand to at most 64 KiB, else `422 limit_exceeded`); GitHub
skills are fetched from `https://github.com/<owner>/<repo>/tree/<ref>/<path>` through the
server's configured raw-content base URL. Creating a cron trigger schedules it at once: it has
no `enabled` field on create, and an installer that wants it off disables it with a `PATCH`.
Agents are archived with `PATCH {"archived": true}`; archived agents take no new channels,
triggers or policies. Deleting an entity another entity still refers to answers `409 in_use`.

Gateway bundles follow the MCP gateway's rules: members are ordered and their tools are
presented as `member__tool`, so a member name matches `[a-zA-Z0-9_-]+`, holds no `__` and
neither starts nor ends with `_` (one split of `member__tool` only); a bundle has at most 200
members; an `override_name` must match `[a-zA-Z0-9_-]+` and differ from every
other presented name (`409 presented_name_taken` naming the holder, also when adding a member
would clash); the member order must name every member exactly once (`422`); a member whose URL
is one of the gateway's own endpoints (`{public_url}/{name}/mcp`, however spelled: case, ports,
percent-escapes, dot segments, loopback host spellings; a URL kept in a secret is resolved, and
an instance URL cleared to fall back to its server's is checked on that) answers `409`;
a bundle holds at most 100 prompts and 200 resources, a prompt at most 64 KiB of message text, a
resource at most 256 KiB and all resources together at most 4 MiB; resource names have no `.` or
`..` segments; prompt names have no `__`,
placeholders `{{arg}}` must name declared arguments, embedded resources must exist and cannot
be deleted while embedded; rename needs `force: true`.

Discovery on the reference platform: it has no upstream MCP servers to ask, so what a member
offers is the `catalog` (tools, prompts, resources) declared on the member instance's server
spec. Changing the catalog with a `PATCH` stands in for a new discovery. Curation may be stored
for a tool, prompt or resource the catalog does not list; it is shown with `stale: true`, is not
served, and is kept for when the entry comes back. Discovery cannot be refused: when a catalog
change adds a tool whose `member__tool` name an override already holds, the override keeps the
name and the new tool is listed with `served: false` and `shadowed_by` naming the holder; it is
left out of name checks until the override lets go. `served` is false too for a disabled, stale
or disabled-member tool.

Knowledge sets hold sources an agent searches; an agent names the sets it uses in
`knowledge_set_ids`, and a set an agent still names cannot be deleted (`409 in_use`). A set
shows its sources in `sources` (creation order) on get and list. A source's `type` decides which
fields it takes and which it needs (`422` naming a field of another type, or a missing one); a
`PUT .../sources/{source}` creates or replaces the source with that key (`[a-z][a-z0-9-]*`, at
most 63 characters), a `POST .../sources` adds a source of the user's own (`key: null`), and a
`DELETE` takes a key or a `src_` id. Credentials are write-only: each is kept as a secret of the
workspace and shown as its id; `credentials: null` on a `PUT` keeps those stored, an object
replaces them all, and a secret no source uses any more is deleted. `sync_schedule` is a
five-field cron expression in UTC. A source has its own `revision`: a `PUT` or `DELETE` with
`If-Match` changes it only at that revision (`412` when it moved on or is gone). Every source write
moves the set to a new revision; a set holds at most 200 sources.

Artifacts are archives (`.mcpb` bundles) a workspace stores by content. `PUT
.../artifacts/sha256:{hex}` sends the archive's bytes (`application/octet-stream`, at most 128
MiB, else `413 too_large`); the platform hashes them (`422 digest_mismatch` when they hash to
another digest), reads the archive with the `.mcpb` reader's rules and extracts it into a new
private folder (`422 artifact_refused`, the reader's code in the detail, and nothing is kept),
and answers `201` with the artifact: its `size`, `media_type`, the `tree_digest` of the extracted
tree, and `referenced_by`, the MCP server specs that name it. The same digest again answers `200`
with the same artifact and extracts nothing. `DELETE` answers `409 artifact_in_use` naming the
specs in `holders` while any refers to it. A command server spec runs an artifact with `runtime`
(`node`, `python` or `binary`) and `artifact: {digest, entry}`; both or neither, the artifact
must be stored in the workspace (`422 artifact_missing` at `artifact.digest`), and its command is
`node`, `python`/`python3`, or `${__dirname}/<path>` for a binary. Args and env may use
`${__dirname}` (the extracted folder), `${HOME}`, `${DESKTOP}`, `${DOCUMENTS}` and
`${DOWNLOADS}`, filled in by the platform at launch.

Apps are JSON documents (at most 256 KiB) the platform serves as small UIs, kept in versions
numbered from 1. An app shows its latest unarchived version as `latest_version` and `document`
(null when every version is archived); `POST .../versions` adds the next version and answers
the app, and archiving a version (`PATCH .../versions/{version}`) falls back to the one before.
Both move the app to a new revision. Archiving the app (`PATCH {"archived": true}`) keeps it
and its versions; `DELETE` removes them. An app holds the MCP instances it names as an agent does.
"""


_REASONS = {
    200: "OK",
    201: "Created",
    204: "No content",
    400: "Malformed request (body not JSON, bad If-Match)",
    401: "Missing or wrong bearer token",
    404: "No such entity, entry or route",
    409: "Conflicts with the platform's state: a name is held, the entity is in use, ...",
    412: "The entity moved past the If-Match revision",
    413: "The body is larger than the route takes",
    422: "Refused by the platform's rules; errors[] names the fields",
    428: "If-Match is required",
    502: "Fetching a GitHub skill failed",
}


def _schema_ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def build() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    ops = operations()
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(models.Problem, "serialization")]
    for op in ops:
        if op.request is not None:
            wanted.append((op.request, "validation"))
        if op.response is not None:
            wanted.append((op.response, "serialization"))
    keys, schemas = models_json_schema(
        list(dict.fromkeys(wanted)), ref_template="#/components/schemas/{model}"
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in ops:
        responses: dict[str, Any] = {}
        for status in sorted({op.ok, *op.also_ok}):
            response: dict[str, Any] = {"description": _REASONS[status]}
            if op.response is not None and status != 204:
                response["content"] = {"application/json": {"schema": keys[(op.response, "serialization")]}}
            if op.etag and status != 204:
                response["headers"] = {
                    "ETag": {"description": "the revision, quoted", "schema": {"type": "string"}}
                }
            if op.links and status != 204:
                response["links"] = {
                    name: {"operationId": target, "parameters": dict(params)}
                    for name, (target, params) in op.links.items()
                }
            responses[str(status)] = response
        for status in op.errors:
            responses[str(status)] = {
                "description": _REASONS[status],
                "content": {"application/problem+json": {"schema": _schema_ref(models.Problem)}},
            }
        responses["default"] = {
            "description": "Any other failure (5xx, 429 with Retry-After, injected faults)",
            "content": {"application/problem+json": {"schema": _schema_ref(models.Problem)}},
        }
        operation: dict[str, Any] = {
            "operationId": op.op_id,
            "summary": op.summary,
            "tags": [op.tag],
        }
        parameters = [*path_params(op.path), *op.params]
        if parameters:
            operation["parameters"] = [
                {"name": p.name, "in": p.where, "required": p.required, "schema": p.schema}
                | ({"description": p.description} if p.description else {})
                for p in parameters
            ]
        if op.request is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": keys[(op.request, "validation")]}},
            }
        elif op.raw_request is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {op.raw_request: {"schema": {"type": "string", "format": "binary"}}},
            }
        operation["responses"] = responses
        if op.path == "/healthz":
            operation["security"] = []
        paths.setdefault(op.path, {})[op.method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Agent platform API", "version": "1.0.0", "description": DESCRIPTION},
        "servers": [{"url": "http://127.0.0.1:8080", "description": "a local reference platform"}],
        "security": [{"bearerAuth": []}, {}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas.get("$defs", {}),
        },
    }


class _Dumper(yaml.SafeDumper):
    """Writes multi-line text as literal blocks so the description reads as written."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def render() -> str:
    """The OpenAPI document as YAML text."""
    header = "# Generated by `python -m bundle_operator.platform.openapi_build`: edit the models or routes.\n"
    return header + yaml.dump(build(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
