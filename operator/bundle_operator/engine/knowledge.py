"""What an update plan must settle for knowledge sets and apps beyond the generic three-way merge.

A source's fields belong to its type, so a type change meets a local edit as one conflict on the
whole source. A source's credential names are the bundle's (their values come from setup and are
never read back): the merge may not keep a name whose value the writer does not have, and a value
the platform lost must be sent again. Apps the installation archived keep the MCPs they use.
"""

from __future__ import annotations

import copy
from typing import Any

from bundle_operator.engine.desired import source_site
from bundle_operator.engine.merge import MergeResult, OnConflict
from bundle_operator.engine.record import Record
from bundle_operator.engine.snapshot import Snapshot
from bundle_operator.platform import kinds
from bundle_operator.platform.models import App


def without_retyped_sources(
    base: dict[str, Any], theirs: dict[str, Any], mine: dict[str, Any]
) -> dict[str, Any]:
    """The base without each source whose type the bundle or the platform changed while the other
    side changed it too.

    Merging fields across a type change would make a source of neither type. With a base that is
    no source at all, the two versions meet as one conflict on the whole source, which the conflict
    mode settles whole: the live source or the bundle's.
    """
    sources = dict(base.get("sources", {}))
    for key, old in base.get("sources", {}).items():
        new, live = theirs["sources"].get(key), mine.get("sources", {}).get(key)
        if new is None or live is None or new == old or live == old:
            continue
        if new["type"] != old["type"] or live["type"] != old["type"]:
            sources[key] = None
    return {**base, "sources": sources}


def credentials_lost(recorded: dict[str, Any], live: dict[str, Any]) -> bool:
    """Whether a live source lacks a credential the installation wrote (a rolled-back update that
    replaced them, say): the values must be sent again, so the set is not reused as it is."""
    for key, source in recorded.get("sources", {}).items():
        current = live.get("sources", {}).get(key)
        if current is not None and not set(source["credentials"]) <= set(current["credentials"]):
            return True
    return False


def settle_credentials(
    recorded: dict[str, Any],
    desired: dict[str, Any],
    live: dict[str, Any],
    merged: MergeResult,
    changed_sites: set[str],
    mode: OnConflict,
) -> str | None:
    """Make each merged source's credential names ones the writer can send; returns why the set
    cannot be updated at all, if so.

    The bundle's names win, unless someone added credentials of their own on the platform: those
    stay while nothing needs sending; when a bundle value must be (re)sent, the platform would
    replace them all, which is a conflict on ``/sources/<key>/credentials`` that TakeTheirs
    settles by dropping them, and that KeepMine cannot settle.
    """
    # The merge hands back parts of the live state itself where nothing changed: settle a copy.
    merged.merged = copy.deepcopy(merged.merged)
    for key, wanted in desired["sources"].items():
        out = merged.merged.get("sources", {}).get(key)
        if not isinstance(out, dict) or out.get("type") != wanted["type"]:
            continue  # a whole-source conflict kept the live source; nothing of the bundle's is sent
        want = list(wanted["credentials"])
        current = live.get("sources", {}).get(key)
        if current is None:
            out["credentials"] = want
            continue
        have = set(current["credentials"])
        base = set(recorded.get("sources", {}).get(key, {}).get("credentials", []))
        own = sorted(have - set(want) - base)
        send = (
            any(source_site(key, name) in changed_sites for name in want)
            or not set(want) <= have
            or bool((base - set(want)) & have)
        )
        if not own or not send:
            out["credentials"] = want if not own else sorted(have)
            continue
        pointer = f"/sources/{key}/credentials"
        merged.conflicts.append(pointer)
        if mode is OnConflict.TAKE_THEIRS:
            out["credentials"] = want
        elif mode is OnConflict.KEEP_MINE:
            return (
                f"source '{key}' holds credentials added on the platform ({', '.join(own)}) that "
                "writing the bundle's would replace (TakeTheirs drops them)"
            )
    return None


def archived_app_holders(record: Record, snapshot: Snapshot, archiving: list[str]) -> dict[str, str]:
    """MCP instance id -> the app that keeps it: the apps the installation archived before, and
    those about to be archived (``archiving``, their ids), whose running instances still use them."""
    holders: dict[str, str] = {}
    ids = [part.id for part in record.archived] + archiving
    for app_id in ids:
        app = snapshot.get(kinds.APPS.path, app_id)
        if isinstance(app, App):
            for instance in app.mcp_instance_ids:
                holders.setdefault(
                    instance,
                    f"{kinds.APPS.path}/{app.id} '{app.name}' (archived; its running instances use it)",
                )
    return holders
