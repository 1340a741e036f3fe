"""Discovery: what each gateway member offers, asked of the member itself with an MCP client.

Every url MCP instance that is a member of some gateway bundle has a watcher. It connects, lists
tools, prompts and resources (up to 500 of each), stores them as the instance's discovery entry,
then waits for the member's own list_changed notification or the refresh interval and lists
again. A member that cannot be reached or answers wrongly is stored as unhealthy with the reason;
what it offered before stays, shown stale, with its curation. A change of the member's URL or
headers, or any write to a member entry that names it (a disable and enable in one burst too),
restarts its watcher, which is a fresh discovery.

Health follows the member between discoveries (DESIGN.md §9.4, issue 40): the watcher probes it
every ``PROBE_SECONDS`` (``ping``, or ``server/discover`` on the 2026-07-28 wire, where ping is
gone), so a member that stopped shows unhealthy within 10 s on the default settings; a listen
stream that breaks is probed at once; and a call the gateway could not make (``member_failed``)
marks the member unhealthy with the reason at once and has it discovered again.

A server spec that declares a ``catalog`` is not discovered: the declared catalog stands in for
discovery. That is a test seam for the engine's and the API's tests, which need members with
known tools and no live server; real members declare nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types import METHOD_NOT_FOUND

from bundle_operator.document.names import MEMBER_ENTRY_NAME_MAX
from bundle_operator.platform import kinds
from bundle_operator.reference_platform import gateway_rules
from bundle_operator.reference_platform.gateway_catalog import tool_views
from bundle_operator.reference_platform.member_link import MemberLink, connected, member_link, server_of
from bundle_operator.reference_platform.member_offer import DISCOVERY, LATEST, declared_catalog
from bundle_operator.reference_platform.member_probe import PROBE_SECONDS, error_text, probe
from bundle_operator.reference_platform.storage import Store, Tx, new_id, now_iso

log = logging.getLogger("bundle_operator.platform.gateway")

MAX_ENTRIES = 500
DEFAULT_INTERVAL = 60.0
_EMPTY: dict[str, list[dict[str, Any]]] = {"tools": [], "prompts": [], "resources": [], "templates": []}


# --- turning what a member lists into stored entries -----------------------------------------


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _kept_name(name: Any) -> bool:
    """Whether the gateway keeps an entry of this name: any name a member can give, within bounds.

    Which names a client can be shown is decided per bundle (gateway_catalog.py), and a name that
    cannot be shown is reported there, never dropped here.
    """
    return isinstance(name, str) and 0 < len(name) <= MEMBER_ENTRY_NAME_MAX


def _tool(tool: Any) -> dict[str, Any] | None:
    if not _kept_name(tool.name):
        return None
    annotations = (
        tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json") if tool.annotations else {}
    )
    return {
        "name": tool.name,
        "title": _text(tool.title, 500) or None,
        "description": _text(tool.description, 8000),
        "annotations": annotations,
        "input_schema": tool.input_schema or {"type": "object"},
    }


def _prompt(prompt: Any) -> dict[str, Any] | None:
    if not _kept_name(prompt.name):
        return None
    arguments = [
        {"name": a.name, "description": _text(a.description, 2000), "required": bool(a.required)}
        for a in (prompt.arguments or [])
        if _kept_name(a.name)
    ][:50]
    return {
        "name": prompt.name,
        "title": _text(prompt.title, 500) or None,
        "description": _text(prompt.description, 8000),
        "arguments": arguments,
    }


def _resource(resource: Any) -> dict[str, Any] | None:
    uri = str(resource.uri)
    if len(uri) > 2048:
        return None
    return {
        "uri": uri,
        "name": _text(resource.name, 500),
        "title": _text(resource.title, 500) or None,
        "description": _text(resource.description, 8000),
        "mime_type": _text(resource.mime_type, 200) or None,
    }


def _template(template: Any) -> dict[str, Any] | None:
    uri_template = template.uri_template
    if not isinstance(uri_template, str) or len(uri_template) > 2048:
        return None
    try:
        UriTemplate.parse(uri_template)
    except InvalidUriTemplate:
        return None  # nothing could be matched against it
    return {
        "uri_template": uri_template,
        "name": _text(template.name, 500),
        "title": _text(template.title, 500) or None,
        "description": _text(template.description, 8000),
        "mime_type": _text(template.mime_type, 200) or None,
    }


async def _collect(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    """Up to MAX_ENTRIES items over the member's pages."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_ENTRIES):  # a member whose cursors never end still stops
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor or len(items) >= MAX_ENTRIES:
            break
    return items[:MAX_ENTRIES]


def left_out(found: dict[str, list[dict[str, Any]]], listed: dict[str, int]) -> str:
    """The member's health note on entries it listed that discovery could not keep, or ''."""
    notes = [
        f"{listed[what] - len(found[what])} {what} whose names are empty or over "
        f"{MEMBER_ENTRY_NAME_MAX} characters"
        for what in ("tools", "prompts")
        if listed.get(what, 0) > len(found[what])
    ]
    return f"the member lists {' and '.join(notes)}; the gateway cannot present them" if notes else ""


async def discover(client: Client) -> dict[str, Any]:
    """Everything a connected member lists, as stored entries, and a note on what it could not keep."""
    capabilities = client.server_capabilities
    found: dict[str, list[dict[str, Any]]] = {what: [] for what in _EMPTY}
    listed: dict[str, int] = {}
    if capabilities.tools is not None:
        tools = await _collect(client.list_tools, "tools")
        listed["tools"] = len(tools)
        found["tools"] = [t for t in map(_tool, tools) if t is not None]
    if capabilities.prompts is not None:
        prompts = await _collect(client.list_prompts, "prompts")
        listed["prompts"] = len(prompts)
        found["prompts"] = [p for p in map(_prompt, prompts) if p is not None]
    if capabilities.resources is not None:
        resources = await _collect(client.list_resources, "resources")
        found["resources"] = [r for r in map(_resource, resources) if r is not None]
        try:
            templates = await _collect(client.list_resource_templates, "resource_templates")
        except MCPError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            templates = []  # a member with resources need not have templates
        found["templates"] = [t for t in map(_template, templates) if t is not None]
    return {**found, "message": left_out(found, listed)}


def save(tx: Tx, workspace: str, instance_id: str, data: dict[str, Any]) -> None:
    """Store a discovery result; a failure keeps what the last success found."""
    instance = tx.get(workspace, kinds.MCP_INSTANCES.path, instance_id)
    if instance is None:
        return
    existing = tx.entry(instance.id, DISCOVERY, LATEST)
    if not data["ok"] and existing is not None:
        data = {**{what: existing.data.get(what, []) for what in _EMPTY}, **data}
    if existing is not None:
        same = all(existing.data.get(k) == data.get(k) for k in ("ok", "message", *_EMPTY))
        if same:
            return  # nothing a reader sees changed; keep the store (and every cached view) as it is
    before = _shadowed_by_instance(tx, workspace, instance_id)
    stamped = {**_EMPTY, **data, "discovered_at": now_iso()}
    if existing is None:
        tx.insert(workspace, DISCOVERY, new_id("dsc"), stamped, name=LATEST, parent=instance.id)
    else:
        tx.update(existing, stamped)
    after = _shadowed_by_instance(tx, workspace, instance_id)
    for bundle_id, tool_id, holder in sorted(after - before):
        # Seed 002: discovery cannot be refused; the override keeps its name and this is logged.
        log.warning(
            "bundle.presented_name_collision: %s discovered a tool whose presented name an override holds",
            tool_id,
            extra={
                "event": "bundle.presented_name_collision",
                "gateway_bundle_id": bundle_id,
                "tool": tool_id,
                "held_by": holder,
            },
        )


def _shadowed_by_instance(tx: Tx, workspace: str, instance_id: str) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for member in tx.holders(workspace, (gateway_rules.MEMBER,), instance_id):
        bundle = tx.get(workspace, kinds.GATEWAY_BUNDLES.path, member.parent or "")
        if bundle is None:
            continue
        for view in tool_views(tx, workspace, bundle):
            if view["member"] == member.key and view["shadowed_by"]:
                out.add((bundle.id, view["id"], view["shadowed_by"]))
    return out


# --- the watchers ------------------------------------------------------------------------------


def _method(message: Any) -> str | None:
    method = getattr(message, "method", None)
    if method is None:
        method = getattr(getattr(message, "root", None), "method", None)
    return method if isinstance(method, str) else None


@dataclass
class _Watcher:
    workspace: str
    instance_id: str
    link: MemberLink
    # The revisions of the member entries that name the instance: any write changes it.
    marker: tuple[tuple[str, int], ...] = ()
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    broken: str | None = None  # why the listen stream ended, until the member is probed


# How long stopping waits for the watchers to end.
STOP_SECONDS = 5.0


class DiscoveryService:
    """Keeps one watcher per discoverable member instance, following the store."""

    def __init__(self, store: Store, interval: float = DEFAULT_INTERVAL) -> None:
        self.store = store
        self.interval = interval
        self._watchers: dict[str, _Watcher] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reports: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Begin following the store."""
        self.store.listen(lambda _generation: self._wake.set())
        self._wake.set()
        self._task = asyncio.create_task(self._follow(), name="gateway-discovery")

    async def stop(self) -> None:
        """Stop every watcher."""
        watchers = [w.task for w in self._watchers.values()]
        tasks = [t for t in [self._task, *watchers, *self._reports] if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: a watcher stuck in a member's transport must not hold the server's shutdown
            # (seen once under load, past the 20 s a stop is given).
            await asyncio.wait(tasks, timeout=STOP_SECONDS)
        self._watchers.clear()

    def member_failed(self, link: MemberLink, reason: str) -> None:
        """A call to the member behind ``link`` failed: unhealthy now with ``reason``, then discovered again.

        ``reason`` is already scrubbed of the link's secrets.
        """
        for watcher in list(self._watchers.values()):
            if watcher.link == link:
                self._schedule_report(watcher, f"a call failed: {reason}")

    def instance_failed(self, instance_id: str, reason: str) -> None:
        """The platform's own process of a member instance could not start: unhealthy now with ``reason``."""
        watcher = self._watchers.get(instance_id)
        if watcher is not None:
            self._schedule_report(watcher, reason)

    def _schedule_report(self, watcher: _Watcher, message: str) -> None:
        task = asyncio.create_task(self._report(watcher, message))
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)

    async def _report(self, watcher: _Watcher, message: str) -> None:
        with contextlib.suppress(Exception):
            await self.store.transact(
                functools.partial(_save_for, watcher, {"ok": False, "message": message})
            )
        watcher.changed.set()  # discovery then says whether the member is back

    def wake(self) -> None:
        """Look at the members again now (the platform's own instances are reachable once it listens)."""
        self._wake.set()

    def refresh(self, instance_id: str) -> None:
        """Discover one instance again now."""
        watcher = self._watchers.get(instance_id)
        if watcher is not None:
            watcher.changed.set()

    async def _follow(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.interval)
            # Writes come in bursts (an install); look at the members once the burst settles.
            await asyncio.sleep(0.2)
            self._wake.clear()
            try:
                wanted = await self.store.transact(_wanted)
            except Exception:
                log.exception("cannot read the gateway members for discovery")
                await asyncio.sleep(1)
                continue
            self._reconcile(wanted)

    def _reconcile(self, wanted: dict[str, tuple[str, MemberLink, tuple[tuple[str, int], ...]]]) -> None:
        for instance_id in list(self._watchers):
            watcher = self._watchers[instance_id]
            target = wanted.get(instance_id)
            if target is None or target[1] != watcher.link or target[2] != watcher.marker:
                if watcher.task is not None:
                    watcher.task.cancel()
                del self._watchers[instance_id]
        for instance_id, (workspace, link, marker) in wanted.items():
            if instance_id not in self._watchers:
                watcher = _Watcher(workspace, instance_id, link, marker)
                watcher.task = asyncio.create_task(self._watch(watcher), name=f"discover-{instance_id}")
                self._watchers[instance_id] = watcher

    async def _watch(self, watcher: _Watcher) -> None:
        failures = 0
        while True:
            try:
                await self._session(watcher)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                failures += 1
                reason = watcher.link.scrub(error_text(exc))
                log.info("discovery of %s failed: %s", watcher.instance_id, reason)
                data = {"ok": False, "message": f"discovery failed: {reason}"}
                with contextlib.suppress(Exception):
                    await self.store.transact(functools.partial(_save_for, watcher, data))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watcher.changed.wait(), timeout=min(self.interval, 2.0**failures))
                watcher.changed.clear()

    async def _session(self, watcher: _Watcher) -> None:
        async def on_message(message: Any) -> None:
            method = _method(message)
            if method is not None and method.endswith("/list_changed"):
                watcher.changed.set()

        async with connected(watcher.link, message_handler=on_message) as client:
            listener = asyncio.create_task(self._listen(client, watcher))
            try:
                while True:
                    watcher.changed.clear()
                    data = {"ok": True, **await discover(client)}
                    await self.store.transact(functools.partial(_save_for, watcher, data))
                    await self._until_due(client, watcher)
                    if listener.done() and listener.result():  # it had opened: open it again
                        listener = asyncio.create_task(self._listen(client, watcher))
            finally:
                listener.cancel()
                with contextlib.suppress(BaseException):
                    await listener

    async def _until_due(self, client: Client, watcher: _Watcher) -> None:
        """Wait for a change or the interval, probing the member meanwhile; a failed probe raises."""
        due = asyncio.get_running_loop().time() + self.interval
        while (left := due - asyncio.get_running_loop().time()) > 0:
            try:
                await asyncio.wait_for(watcher.changed.wait(), timeout=min(left, PROBE_SECONDS))
            except TimeoutError:
                if left > PROBE_SECONDS:
                    await probe(client, "the member stopped answering")
                continue
            if watcher.broken is None:
                return
            # The stream ended: the member is gone, or the stream only closed (then listed again).
            broken, watcher.broken = watcher.broken, None
            await probe(client, f"its change stream broke ({broken})")
            return

    @staticmethod
    async def _listen(client: Client, watcher: _Watcher) -> bool:
        """On the 2026-07-28 wire, change notifications come only on a listen stream; True if one opened."""
        capabilities = client.server_capabilities
        tools = bool(capabilities.tools and capabilities.tools.list_changed)
        prompts = bool(capabilities.prompts and capabilities.prompts.list_changed)
        resources = bool(capabilities.resources and capabilities.resources.list_changed)
        if not (tools or prompts or resources):
            return False
        opened = False
        try:
            async with client.listen(
                tools_list_changed=tools, prompts_list_changed=prompts, resources_list_changed=resources
            ) as subscription:
                opened = True
                async for _event in subscription:
                    watcher.changed.set()
            reason = "the member ended it"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not opened:
                # A legacy member notifies through the session instead (message_handler above).
                log.debug("no listen stream from %s: %s", watcher.instance_id, type(exc).__name__)
                return False
            reason = watcher.link.scrub(error_text(exc))
        watcher.broken = reason
        watcher.changed.set()
        return True


def _save_for(watcher: _Watcher, data: dict[str, Any], tx: Tx) -> None:
    save(tx, watcher.workspace, watcher.instance_id, data)


def _wanted(tx: Tx) -> dict[str, tuple[str, MemberLink, tuple[tuple[str, int], ...]]]:
    """Each member instance the gateway discovers, with its workspace, link and member entries' marker."""
    wanted: dict[str, tuple[str, MemberLink, tuple[tuple[str, int], ...]]] = {}
    for member in tx.every(gateway_rules.MEMBER):
        instance_id = str(member.data["mcp_instance_id"])
        if instance_id in wanted:
            held = wanted[instance_id]
            wanted[instance_id] = (held[0], held[1], (*held[2], (member.id, member.revision)))
            continue
        instance = tx.get(member.workspace, kinds.MCP_INSTANCES.path, instance_id)
        if instance is None:
            continue
        server = server_of(tx, member.workspace, instance)
        if server is None or declared_catalog(server.data) is not None:
            continue
        link = member_link(tx, member.workspace, instance)
        if link is not None:
            wanted[instance_id] = (member.workspace, link, ((member.id, member.revision),))
    return wanted
