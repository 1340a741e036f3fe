"""Apps: texts, the MCP instances their tools come from, and a document that each change adds as
a new version. An app is archived, never deleted (seed 004): its running instances keep working,
and so do the MCPs they use."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from bundle_operator.engine.desired import Desired, Inputs, installed_mcps, resolve
from bundle_operator.engine.export_report import ExportOut
from bundle_operator.engine.kinds.base import EntityKind, Write
from bundle_operator.engine.record import Part, Record, RecordedEntity
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.engine.writer import Writer
from bundle_operator.platform import kinds
from bundle_operator.platform.errors import NotFound, PlatformError
from bundle_operator.platform.models import App, AppUpdate, AppVersionCreate, Entity

log = logging.getLogger(__name__)


class AppKind(EntityKind):
    """An app; the document is versioned, and removing it archives it."""

    name = "app"
    section = "apps"
    collection = kinds.APPS
    schema = "0.2.0"
    remove_archives = True
    uses_mcps = True

    def desired_of(self, item: Any, inputs: Inputs, ids: Mapping[str, str], skipped: set[str]) -> Desired:
        spec = {
            "name": item.name,
            "description": item.description or "",
            "mcp_instance_ids": [
                resolve(ids, f"mcp:{m}") for m in installed_mcps(item.mcps, inputs, skipped)
            ],
            "document": dict(item.document),
        }
        return Desired(self.name, item.key, spec)

    def live_spec(self, found: Any, recorded: RecordedEntity, snapshot: Snapshot) -> dict[str, Any] | None:
        app = found
        if app.archived:
            return None  # installed again, like an archived agent
        # Every version archived shows as a document of None: drift, and an update adds a version.
        return {
            "name": app.name,
            "description": app.description,
            "mcp_instance_ids": list(app.mcp_instance_ids),
            "document": None if app.document is None else dict(app.document),
        }

    async def write(self, writer: Writer, step: Write) -> list[Part]:
        changes = {k: v for k, v in step.target.items() if k != "document" and step.current.get(k) != v}
        if changes:
            await writer.update(self.collection, step.primary, AppUpdate(**changes))
        if step.differs("document"):
            restore = step.secrets.values is None
            await _write_document(writer, step.primary, step.target["document"], restore=restore)
        return list(step.recorded.parts)

    async def remove(self, writer: Writer, recorded: RecordedEntity) -> list[str]:
        part = recorded.primary
        if part is None:
            return []
        try:
            await writer.update(self.collection, part.id, AppUpdate(archived=True))
        except NotFound:
            return []  # deleted on the platform already
        except PlatformError as exc:
            log.warning("could not archive %s %s of %s: %s", part.path, part.id, recorded.entity, exc.code)
            return [f"{part.path}/{part.id}"]
        writer.record.keep_archived(part)
        return []

    def superseded(self, record: Record, recorded: RecordedEntity, snapshot: Snapshot) -> None:
        # An app archived on the platform and installed again stays the installation's own.
        archived = recorded.primary
        if archived is not None and snapshot.get(archived.path, archived.id) is not None:
            record.keep_archived(archived)

    def export(self, listed: Mapping[str, list[Entity]], out: ExportOut) -> None:
        for app in listed.get(self.collection.path, []):
            assert isinstance(app, App)
            if app.archived or app.document is None:
                why = "an archived app" if app.archived else "an app whose every version is archived"
                out.drop(f"{self.collection.path}/{app.id}", why)
                continue
            mcps = out.keys_of(f"app '{app.name}' ({app.id})", app.mcp_instance_ids, "mcp", "MCP instance")
            doc: dict[str, Any] = {"key": out.key(app.name), "name": app.name}
            if app.description:
                doc["description"] = app.description
            doc["document"] = app.document
            if mcps:
                doc["mcps"] = mcps
            out.section(self.section).append(doc)


async def _write_document(
    writer: Writer, app_id: str, document: dict[str, Any] | None, *, restore: bool
) -> None:
    """A document is never changed in place: it becomes the app's next version. A restore archives
    the version the run added instead, which brings back the one before it."""
    added = writer.app_versions.pop(app_id, None) if restore else None
    if added is not None:
        writer.calls += 2
        await writer.platform.set_app_version_archived(writer.workspace, app_id, added, True)
        app = await writer.platform.get(writer.workspace, kinds.APPS, app_id)
    elif document is None:
        return  # nothing to bring back: every version was archived before the run
    else:
        writer.calls += 1
        app = await writer.platform.add_app_version(
            writer.workspace, app_id, AppVersionCreate(document=document)
        )
        if not restore and app.latest_version is not None:
            writer.app_versions[app_id] = app.latest_version
    writer.saw(kinds.APPS, app)
    writer.revisions[app_id] = app.revision


def archived_app_holders(record: Record, snapshot: Snapshot, archiving: list[str]) -> dict[str, str]:
    """MCP instance id -> the app that keeps it: the apps the installation archived before, and
    those about to be archived (``archiving``, their ids), whose running instances still use them."""
    holders: dict[str, str] = {}
    for app_id in [part.id for part in record.archived] + archiving:
        app = snapshot.get(kinds.APPS.path, app_id)
        if isinstance(app, App):
            for instance in app.mcp_instance_ids:
                holders.setdefault(
                    instance,
                    f"{kinds.APPS.path}/{app.id} '{app.name}' (archived; its running instances use it)",
                )
    return holders
