"""What one endpoint serves right now, read from the store in one transaction.

An ``EndpointView`` is everything an MCP request to the endpoint needs: who may call it, the
tools under their presented names with merged annotations, the bundle's own prompts and
resources, the members' curated prompts and resources, and how to reach each member. Views are
cached per store generation, so a request reads the database only after something changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from bundle_operator.platform import kinds
from bundle_operator.platform.models import member_resource_id
from bundle_operator.reference_platform import gateway_rules as rules
from bundle_operator.reference_platform.bundle_rules import API_KEY_PURPOSE
from bundle_operator.reference_platform.gateway_catalog import (
    entry_views,
    members_in_order,
    offer_of,
    tool_views,
)
from bundle_operator.reference_platform.gateway_door import origin_key
from bundle_operator.reference_platform.kind_rules import owned_secret_key
from bundle_operator.reference_platform.member_link import MemberLink, member_link
from bundle_operator.reference_platform.storage import Row, Tx

BUNDLE_SCHEME = "bundle:"
OWN_RESOURCE_PREFIX = "bundle://resources/"
# Annotation keys the write-as-read profile rewrites; an explicit override of either wins.
_WRITE_KEYS = ("readOnlyHint", "destructiveHint")


@dataclass(frozen=True)
class Served:
    """What a member offers through the endpoint: the member, how to reach it, its listing."""

    member: str
    link: MemberLink | None
    listing: dict[str, Any]


@dataclass(frozen=True)
class ServedTool(Served):
    """A tool as the endpoint presents it, and where calls to it go."""

    presented: str
    tool: str


@dataclass(frozen=True)
class MemberPrompt(Served):
    """A member's prompt as the endpoint presents it."""

    presented: str
    name: str


@dataclass(frozen=True)
class MemberResource(Served):
    """A member's resource the endpoint passes through under its own URI."""

    uri: str


@dataclass(frozen=True)
class MemberTemplate(Served):
    """A member's resource template: listed as the member lists it, and where matching reads go."""

    uri_template: str

    def matches(self, uri: str) -> bool:
        """Whether ``uri`` is one of the resources this template describes."""
        try:
            return UriTemplate.parse(self.uri_template).match(uri) is not None
        except (InvalidUriTemplate, ValueError):
            return False


@dataclass(frozen=True)
class EndpointView:
    """Everything a request to one endpoint needs, as the store stood at one generation."""

    endpoint_id: str
    workspace: str
    name: str
    enabled: bool
    auth_mode: str
    profile: str
    api_key: str | None
    bundle_id: str
    bundle_name: str
    description: str
    tools: dict[str, ServedTool] = field(default_factory=dict)
    # Presented names the bundle knows but does not serve, with the reason (for clear errors).
    withheld_tools: dict[str, str] = field(default_factory=dict)
    own_prompts: dict[str, dict[str, Any]] = field(default_factory=dict)
    own_resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    member_prompts: dict[str, MemberPrompt] = field(default_factory=dict)
    hidden_prompts: frozenset[str] = frozenset()
    member_resources: dict[str, MemberResource] = field(default_factory=dict)
    hidden_uris: frozenset[str] = frozenset()
    # Members' resource templates in member order; the first that matches a URI serves it.
    member_templates: tuple[MemberTemplate, ...] = ()
    overview: str = ""  # the catalogue's text for a person deciding whether to connect (seed 002)
    oauth: dict[str, Any] | None = None  # the endpoint's stored OAuth settings (OAuth endpoints)
    rate_limit: tuple[int, int] | None = None  # requests per minute and burst, per client
    # Origins allowed besides the public URL's, as gateway_door.origin_key compares them.
    allowed_origins: frozenset[str] = frozenset()

    def serving(self, uri: str) -> Served | None:
        """What serves a member URI: the member listing it, else the first whose template matches."""
        listed = self.member_resources.get(uri)
        if listed is not None:
            return listed
        if uri in self.hidden_uris:
            return None  # curated away: no template brings it back
        return next((t for t in self.member_templates if t.matches(uri)), None)

    def fingerprint(self, what: str) -> str:
        """A hash of what ``tools/list``, ``prompts/list`` or ``resources/list`` would answer."""
        if what == "tools":
            shown: Any = [self.bundle_name, [t.listing for t in self.tools.values()]]
        elif what == "prompts":
            shown = [list(self.own_prompts.values()), [p.listing for p in self.member_prompts.values()]]
        else:
            shown = [
                list(self.own_resources.values()),
                [r.listing for r in self.member_resources.values()],
                [t.listing for t in self.member_templates],
            ]
        return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()


def merged_annotations(
    upstream: dict[str, Any], overrides: dict[str, Any] | None, profile: str
) -> dict[str, Any]:
    """Upstream annotations, the profile's rewrite, then overrides shallow-merged (null removes)."""
    merged = dict(upstream)
    overrides = overrides or {}
    if profile == "ChatGPT" and not any(key in overrides for key in _WRITE_KEYS):
        # ChatGPT refuses tools that say they write; present every tool as a read.
        merged["readOnlyHint"] = True
        merged.pop("destructiveHint", None)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def _links(tx: Tx, workspace: str, bundle: Row) -> dict[str, MemberLink | None]:
    links: dict[str, MemberLink | None] = {}
    for member in members_in_order(tx, bundle):
        instance = tx.get(workspace, kinds.MCP_INSTANCES.path, member.data["mcp_instance_id"])
        links[member.key] = member_link(tx, workspace, instance) if instance else None
    return links


def _tools(
    tx: Tx, workspace: str, bundle: Row, profile: str, links: dict[str, MemberLink | None]
) -> tuple[dict[str, ServedTool], dict[str, str]]:
    served: dict[str, ServedTool] = {}
    withheld: dict[str, str] = {}
    for view in tool_views(tx, workspace, bundle):
        name = view["presented_name"]
        if not view["served"]:
            withheld.setdefault(name, view["withheld_reason"])
            continue
        definition = view["definition"] or {}
        listing: dict[str, Any] = {
            "name": name,
            "description": view["override_description"] or definition.get("description") or "",
            "inputSchema": definition.get("input_schema") or {"type": "object"},
            "annotations": merged_annotations(
                definition.get("annotations") or {}, view["override_annotations"], profile
            ),
        }
        title = view["override_title"] or definition.get("title")
        if title:
            listing["title"] = title
        served[name] = ServedTool(view["member"], links.get(view["member"]), listing, name, view["tool"])
    return served, withheld


def _own(tx: Tx, bundle: Row, kind: str) -> dict[str, dict[str, Any]]:
    rows = sorted(tx.entries(bundle.id, kind), key=lambda row: row.key)
    return {row.key: dict(row.data) for row in rows}


def _member_prompts(
    tx: Tx, workspace: str, bundle: Row, enabled: dict[str, bool], links: dict[str, MemberLink | None]
) -> tuple[dict[str, MemberPrompt], frozenset[str]]:
    served: dict[str, MemberPrompt] = {}
    hidden: set[str] = set()
    for view in entry_views(tx, workspace, bundle, "prompts", rules.MEMBER_PROMPT):
        presented = view["presented_name"]
        if not (view["enabled"] and enabled.get(view["member"], False)) or view["stale"]:
            hidden.add(presented)
            continue
        definition = view["definition"] or {}
        listing: dict[str, Any] = {
            "name": presented,
            "description": view["description"] or definition.get("description") or "",
            "arguments": [
                {"name": a["name"], "description": a.get("description") or "", "required": a.get("required")}
                for a in definition.get("arguments") or []
            ],
        }
        title = view["title"] or definition.get("title")
        if title:
            listing["title"] = title
        served[presented] = MemberPrompt(
            view["member"], links.get(view["member"]), listing, presented, view["name"]
        )
    return served, frozenset(hidden - set(served))


def _member_resources(
    tx: Tx, workspace: str, bundle: Row, enabled: dict[str, bool], links: dict[str, MemberLink | None]
) -> tuple[dict[str, MemberResource], frozenset[str]]:
    served: dict[str, MemberResource] = {}
    hidden: set[str] = set()
    for view in entry_views(tx, workspace, bundle, "resources", rules.MEMBER_RESOURCE):
        uri = view["uri"]
        if uri.lower().startswith(BUNDLE_SCHEME):
            continue  # the bundle's own resources own that scheme
        if not (view["enabled"] and enabled.get(view["member"], False)) or view["stale"]:
            hidden.add(uri)
            continue
        if uri in served:
            continue  # the first enabled member in member order serves a URI
        definition = view["definition"] or {}
        listing: dict[str, Any] = {
            "uri": uri,
            "name": definition.get("name") or uri,
            "description": view["description"] or definition.get("description") or "",
        }
        title = view["title"] or definition.get("title")
        if title:
            listing["title"] = title
        if definition.get("mime_type"):
            listing["mimeType"] = definition["mime_type"]
        served[uri] = MemberResource(view["member"], links.get(view["member"]), listing, uri)
    return served, frozenset(hidden - set(served))


def _member_templates(
    tx: Tx, workspace: str, bundle: Row, enabled: dict[str, bool], links: dict[str, MemberLink | None]
) -> tuple[MemberTemplate, ...]:
    """Enabled members' templates, curated as member resources are (by the template as the URI)."""
    curated = {row.name: row.data for row in tx.entries(bundle.id, rules.MEMBER_RESOURCE)}
    served: list[MemberTemplate] = []
    seen: set[str] = set()
    for member in members_in_order(tx, bundle):
        if not enabled.get(member.key, False):
            continue
        offer = offer_of(tx, workspace, member)
        if not offer.fresh:
            continue
        for template in offer.templates:
            uri_template = str(template["uri_template"])
            curation = curated.get(member_resource_id(member.key, uri_template), {})
            if not curation.get("enabled", True) or uri_template in seen:
                continue
            seen.add(uri_template)
            listing: dict[str, Any] = {
                "uriTemplate": uri_template,
                "name": template.get("name") or uri_template,
                "description": curation.get("description") or template.get("description") or "",
            }
            title = curation.get("title") or template.get("title")
            if title:
                listing["title"] = title
            if template.get("mime_type"):
                listing["mimeType"] = template["mime_type"]
            served.append(MemberTemplate(member.key, links.get(member.key), listing, uri_template))
    return tuple(served)


def endpoint_view(tx: Tx, name: str) -> EndpointView | None:
    """The view of the endpoint named ``name`` (endpoint names are unique across the gateway)."""
    endpoint = tx.find_name(kinds.ENDPOINTS.path, name)
    if endpoint is None:
        return None
    workspace = endpoint.workspace
    bundle = tx.get(workspace, kinds.GATEWAY_BUNDLES.path, endpoint.data["gateway_bundle_id"])
    if bundle is None:
        return None
    profile = str(endpoint.data.get("profile") or "Default")
    links = _links(tx, workspace, bundle)
    enabled = {m.key: bool(m.data["enabled"]) for m in members_in_order(tx, bundle)}
    tools, withheld = _tools(tx, workspace, bundle, profile, links)
    member_prompts, hidden_prompts = _member_prompts(tx, workspace, bundle, enabled, links)
    member_resources, hidden_uris = _member_resources(tx, workspace, bundle, enabled, links)
    api_key = None
    if endpoint.data["auth_mode"] == "ApiKey":
        api_key = tx.secret(owned_secret_key(endpoint.id, API_KEY_PURPOSE))
    return EndpointView(
        endpoint_id=endpoint.id,
        workspace=workspace,
        name=name,
        enabled=bool(endpoint.data.get("enabled", True)),
        auth_mode=str(endpoint.data["auth_mode"]),
        profile=profile,
        api_key=api_key,
        bundle_id=bundle.id,
        bundle_name=str(bundle.data["name"]),
        description=str(bundle.data.get("description") or ""),
        tools=tools,
        withheld_tools=withheld,
        own_prompts=_own(tx, bundle, rules.PROMPT),
        own_resources=_own(tx, bundle, rules.RESOURCE),
        member_prompts=member_prompts,
        hidden_prompts=hidden_prompts,
        member_resources=member_resources,
        hidden_uris=hidden_uris,
        member_templates=_member_templates(tx, workspace, bundle, enabled, links),
        overview=str(bundle.data.get("overview") or ""),
        oauth=endpoint.data.get("oauth"),
        rate_limit=_rate_limit(endpoint.data.get("rate_limit")),
        allowed_origins=frozenset(origin_key(o) for o in endpoint.data.get("allowed_origins") or ()),
    )


def _rate_limit(stored: Any) -> tuple[int, int] | None:
    if not isinstance(stored, dict):
        return None
    per_minute = int(stored["requests_per_minute"])
    return per_minute, int(stored.get("burst") or per_minute)
