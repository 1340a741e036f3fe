"""Export: a workspace's agents, MCPs, skills, knowledge sets, apps, automations, channels,
policies and the gateway bundle that carries the document's name as one bundle.

No credential travels: secret-backed values are never read and become secret setup fields, and
plain MCP configuration is screened (seed 000) the same way. Keys are derived from names and
setup keys from the MCP key and the position, so one workspace always exports the same bytes.

The document lists under ``requires`` the models and tools its agents use (seed 004: every model
is instance-specific, the platform's ``default`` included, so ``substitute``; a tool, one of the
bundle's own MCPs, ``strip``), and every agent keeps the model it has on the platform. What the export
replaced with a setup reference, and what it left out, is reported by path (a JSON Pointer into the
document, or the platform collection and id), never by value: the file itself looks unremarkable.

A knowledge set travels as its sources, never its documents (seed 004). What ties a source to the
exporting organisation (login names, the SMB domain, OneDrive shared links, the S3 endpoint) is
left out and reported; a tenant address (bucket, host, server, base URL) stays as written and is
declared under ``requires`` as a ``knowledge_source`` to substitute. An app travels as its latest
unarchived version. A document with neither keeps schema 0.1.0, byte for byte as before.

The gateway bundle travels by name (seed 002): the one named after the document becomes its
``gateway``, and each member's MCP keeps the member's name as its key, so an install elsewhere
presents the same tool names; other gateway bundles and all endpoints are reported as left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from bundle_operator.document.models import SCHEMA_VERSION, SCHEMA_VERSIONS
from bundle_operator.engine.export_report import (
    Dropped,
    ExportOut,
    ExportRefused,
    ExportReport,
    Replaced,
)
from bundle_operator.engine.kinds import ALL
from bundle_operator.platform.kinds import BY_PATH, GATEWAY_BUNDLES
from bundle_operator.platform.models import Entity, GatewayBundle
from bundle_operator.platform.protocol import PlatformAPI

__all__ = ["Dropped", "Export", "ExportRefused", "ExportReport", "Replaced", "build_document", "render"]


@dataclass(frozen=True)
class Export:
    """An exported workspace: the document, its YAML text, and the report."""

    document: dict[str, Any]
    text: str
    report: ExportReport


async def export_workspace(
    platform: PlatformAPI, workspace: str, name: str | None = None, version: str = "0.0.0"
) -> str:
    """The workspace as a bundle document (YAML), deterministic for the same workspace."""
    return (await export_with_report(platform, workspace, name, version)).text


async def export_with_report(
    platform: PlatformAPI, workspace: str, name: str | None = None, version: str = "0.0.0"
) -> Export:
    """The workspace as a bundle document, with the report of what was replaced and dropped.

    Without ``name`` the document is named after the workspace's one gateway bundle, when it has
    exactly one (so that bundle is exported), else after the workspace.
    """
    listed: dict[str, list[Entity]] = {}
    for kind in ALL:
        for collection in kind.reads or (kind.collection,):
            if collection.path not in listed:
                listed[collection.path] = list(await platform.list_all(workspace, BY_PATH[collection.path]))
    contents: dict[str, dict[str, Any]] = {}
    for kind in ALL:
        if kind.contents_reads:
            for item in listed.get(kind.collection.path, []):
                contents[item.id] = await kind.read_contents(platform, workspace, item)
    report = ExportReport()
    document = build_document(name or default_name(listed, workspace), version, listed, report, contents)
    return Export(document, render(document), report)


def default_name(listed: Mapping[str, list[Entity]], workspace: str) -> str:
    """The name of the workspace's one gateway bundle, when it has exactly one; else the workspace."""
    gateways = [g for g in listed.get(GATEWAY_BUNDLES.path, []) if isinstance(g, GatewayBundle)]
    return gateways[0].name if len(gateways) == 1 else workspace


def build_document(
    name: str,
    version: str,
    listed: Mapping[str, list[Entity]],
    report: ExportReport | None = None,
    contents: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Build the document from listed entities (collection path -> entities in the platform's
    creation order) and what their lists do not show (``contents``, per id), kind by kind; what was
    replaced and dropped goes to ``report``."""
    out = ExportOut(report=report if report is not None else ExportReport(), name=name)
    out.contents.update(contents or {})
    for kind in ALL:
        kind.claim_keys(listed, out)
    for kind in ALL:
        kind.export(listed, out)
    # A document with none of the newer sections keeps the first schema, byte for byte as before.
    used = [kind.schema for kind in ALL if out.sections.get(kind.section) or kind.section in out.objects]
    document: dict[str, Any] = {
        "schema_version": max(used, key=SCHEMA_VERSIONS.index, default=SCHEMA_VERSION),
        "name": name,
        "version": version,
    }
    required = requirements(
        [*out.section("agents"), *out.section("apps")], [m["key"] for m in out.section("mcps")]
    )
    required += [{"kind": "knowledge_source", "ref": ref, "policy": "substitute"} for ref in out.tenant_refs]
    sections: list[tuple[str, object]] = [("setup", out.setup)]
    sections += [
        (kind.section, out.sections.get(kind.section) or out.objects.get(kind.section)) for kind in ALL
    ]
    for section, items in [*sections, ("requires", required)]:
        if items:
            document[section] = items
    return document


def requirements(agent_docs: list[dict[str, Any]], mcp_keys: list[str]) -> list[dict[str, Any]]:
    """``requires`` for what the agents use (seed 004): each model, ``substitute`` (which model is
    which is instance-specific; what ``default`` runs differs between platforms too, so the
    installer names it like any other); each MCP an agent uses as a tool, ``strip`` (the bundle
    carries it; a target that skips it drops the reference). ``agent_docs`` may hold apps too: the
    MCPs an app's tools come from are required the same way."""
    models = sorted({doc["model"] for doc in agent_docs if "model" in doc})
    used = {key for doc in agent_docs for key in doc.get("mcps", [])}
    out = [{"kind": "model", "ref": model, "policy": "substitute"} for model in models]
    out += [{"kind": "tool", "ref": key, "policy": "strip"} for key in mcp_keys if key in used]
    return out


def render(document: dict[str, Any]) -> str:
    """YAML with the document's own key order, wide lines, literal blocks for multi-line text."""

    class _Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value and not value.startswith(" ") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, text)
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
