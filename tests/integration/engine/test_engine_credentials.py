"""Literal credentials never install, and the installer never switches off the platform's own
``secret_required`` check (seed 000)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.apply import Blocked
from bundle_operator.engine.desired import Inputs
from bundle_operator.engine.kinds.mcp import desired_mcp, server_create
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.errors import Refused
from bundle_operator.platform.models import McpInstanceCreate, SecretRef
from tests.documents import bundle_document
from tests.integration.engine.harness import install, parse, workspace_state

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PASSWORD = "hunter2-but-longer"
DOC: dict[str, Any] = bundle_document(
    "pg-creds",
    version=None,
    setup=[{"key": "pw", "label": "Database password", "type": "secret"}],
    mcps=[
        {
            "key": "postgres",
            "name": "Postgres",
            "type": "command",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-postgres"],
            "env": {"PGHOST": "db.internal", "PGPASSWORD": "${setup.pw}"},
        }
    ],
)


@pytest.mark.parametrize(
    ("site", "value", "path"),
    [
        ("env", {"PGHOST": "db.internal", "PGPASSWORD": PASSWORD}, "/mcps/0/env/PGPASSWORD"),
        ("args", ["-y", "server", f"postgresql://reader:{PASSWORD}@db.internal/app"], "/mcps/0/args/2"),
        ("args", ["-y", "server", f"--password={PASSWORD}"], "/mcps/0/args/2"),
    ],
)
async def test_a_literal_credential_blocks_the_install_and_writes_nothing(
    client: PlatformClient, ws: str, site: str, value: Any, path: str
) -> None:
    doc = copy.deepcopy(DOC)
    doc["mcps"][0][site] = value
    before = await workspace_state(client, ws)
    with pytest.raises(Blocked) as blocked:
        await install(client, ws, parse(doc), {"pw": "x" * 20})
    preview = blocked.value.preview
    assert [(i.code, i.path) for i in preview.issues if i.blocking] == [("credential_literal", path)]
    assert await workspace_state(client, ws) == before
    assert PASSWORD not in json.dumps(preview.to_json())
    assert PASSWORD not in str(blocked.value)


async def test_every_secret_backed_value_is_stored_as_a_secret(client: PlatformClient, ws: str) -> None:
    doc = copy.deepcopy(DOC)
    # A name the platform's own heuristic would not call a secret: only the setup field says so.
    doc["mcps"][0]["env"]["DATABASE_URL"] = "postgresql://reader:${setup.pw}@db.internal/app"
    result, _ = await install(client, ws, parse(doc), {"pw": PASSWORD})
    assert not result.preview.blocking and result.created == ["mcp:postgres"]
    (server,) = await client.list_all(ws, kinds.MCP_SERVERS)
    (instance,) = await client.list_all(ws, kinds.MCP_INSTANCES)
    secret = {entry.name: entry.secret for entry in server.env_schema}
    assert secret == {"PGHOST": False, "PGPASSWORD": True, "DATABASE_URL": True}
    assert instance.env["PGHOST"] == "db.internal"
    assert isinstance(instance.env["PGPASSWORD"], SecretRef)
    assert isinstance(instance.env["DATABASE_URL"], SecretRef)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("PGPASSWORD", PASSWORD),  # a credential written into the document
        ("PGPASSWORD", "${setup.plain}"),  # a credential from a setup field that is not secret
        ("UPSTREAM", f"Bearer {PASSWORD}"),  # an Authorization-style value under a plain name
    ],
)
async def test_the_installer_never_declares_a_credential_a_plain_string(
    client: PlatformClient, ws: str, name: str, text: str
) -> None:
    # Even were analyze bypassed, the server spec must leave the platform's secret_required check
    # on: a plain credential is refused by the platform, never stored as text.
    doc = copy.deepcopy(DOC)
    doc["setup"].append({"key": "plain", "label": "Plain", "type": "string"})
    doc["mcps"][0]["env"] = {name: text}
    parsed = parse_bundle_text(json.dumps(doc))
    assert parsed.bundle is not None
    inputs = Inputs(parsed.bundle, {"plain": PASSWORD}, frozenset({"pw"}))
    desired = desired_mcp(parsed.bundle.mcps[0], inputs)
    assert desired.spec["server"]["env_schema"] == [{"name": name, "type": "secret"}]
    server = await client.create(
        ws, kinds.MCP_SERVERS, server_create(desired.spec["server"]), idempotency_key=f"{ws}-server"
    )
    body = McpInstanceCreate(server_id=server.id, name="Postgres", env={name: inputs.setup.get("plain", "")})
    with pytest.raises(Refused) as refused:
        await client.create(ws, kinds.MCP_INSTANCES, body, idempotency_key=f"{ws}-instance")
    assert refused.value.code == "secret_required"


async def test_settings_named_like_credentials_install_as_plain_settings(
    client: PlatformClient, ws: str
) -> None:
    # Analyze lets these through, so the installer must not declare them secret either: a
    # plain value in a secret-declared env entry is refused by the platform (secret_required).
    doc = copy.deepcopy(DOC)
    doc["mcps"][0]["env"] = {
        "PGPASSWORD": "${setup.pw}",
        "MAX_TOKENS": "4096",
        "TOKEN_LIMIT": "4k",
        "AUTH_MODE": "oauth",
        "SESSION_DIR": "/tmp/sessions",
        "PASSWORD_FILE": "/run/secrets/pw",
    }
    result, _ = await install(client, ws, parse(doc), {"pw": PASSWORD})
    assert "mcp:postgres" in result.created
    servers = await client.list_all(ws, kinds.MCP_SERVERS)
    schema = {entry.name: entry.type for entry in servers[0].env_schema}
    assert schema["PGPASSWORD"] == "secret"
    assert {
        schema[n] for n in ("MAX_TOKENS", "TOKEN_LIMIT", "AUTH_MODE", "SESSION_DIR", "PASSWORD_FILE")
    } == {"string"}
