"""The reference platform's SQLite store: one file, WAL, one writer thread.

Every request's reads and writes run as one transaction on a single dedicated thread, so the
event loop never blocks on the database and rules that check then write (name uniqueness,
idempotency keys, references) cannot race each other.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entities (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL UNIQUE,
    parent TEXT,
    name TEXT,
    revision INTEGER NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entities_by_kind ON entities (workspace, kind, seq);
CREATE INDEX IF NOT EXISTS entities_by_name ON entities (workspace, kind, name);
-- Gateway discovery reads every member of every workspace after each burst of writes.
CREATE INDEX IF NOT EXISTS entities_of_kind ON entities (kind, seq);
CREATE UNIQUE INDEX IF NOT EXISTS entries_by_parent ON entities (parent, kind, name) WHERE parent IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency (
    workspace TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (workspace, kind, key)
);
-- Every create forgets its workspace's expired keys, and a replay looks a key up without its kind:
-- without these each of them read every key the workspace ever recorded.
CREATE INDEX IF NOT EXISTS idempotency_by_age ON idempotency (workspace, created_at);
CREATE INDEX IF NOT EXISTS idempotency_by_key ON idempotency (workspace, key, created_at);
CREATE TABLE IF NOT EXISTS gateway_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    bundle_id TEXT NOT NULL,
    at TEXT NOT NULL,
    entry TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS gateway_audit_by_bundle ON gateway_audit (workspace, bundle_id, seq);
CREATE INDEX IF NOT EXISTS gateway_audit_by_time ON gateway_audit (at);
CREATE TABLE IF NOT EXISTS secret_values (
    id TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
# How long a create's Idempotency-Key is remembered. A retry or crash recovery happens within
# minutes; keeping keys for ever would grow the table without bound.
IDEMPOTENCY_TTL = timedelta(hours=24)


def new_id(prefix: str) -> str:
    """A new id: the kind's prefix, a millisecond clock (so ids sort by age) and 10 random characters."""
    millis = int(time.time() * 1000)
    clock = ""
    while millis:
        millis, digit = divmod(millis, 36)
        clock = _ALPHABET[digit] + clock
    rand = "".join(secrets.choice(_ALPHABET) for _ in range(10))
    return f"{prefix}_{clock}{rand}"


def now_iso(ago: timedelta = timedelta(0)) -> str:
    """The current time (less ``ago``) as RFC 3339 in UTC; these texts sort in time order."""
    return (datetime.now(UTC) - ago).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass
class Row:
    """One stored entity or bundle entry; ``data`` keys starting with '_' are never shown."""

    seq: int
    workspace: str
    kind: str
    id: str
    parent: str | None
    name: str | None
    revision: int
    data: dict[str, Any]
    created_at: str
    updated_at: str

    @property
    def key(self) -> str:
        """The name of an entry (members, prompts, ...), which always has one."""
        assert self.name is not None
        return self.name

    def public(self) -> dict[str, Any]:
        """The entity as the API shows it."""
        shown = {k: v for k, v in self.data.items() if not k.startswith("_")}
        return {
            "id": self.id,
            "revision": self.revision,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            **shown,
        }


def _row(values: Sequence[Any]) -> Row:
    """A row as ``_COLUMNS`` selects it; only ``data`` is stored as text (JSON)."""
    seq, workspace, kind, entity_id, parent, name, revision, data, created, updated = values
    return Row(seq, workspace, kind, entity_id, parent, name, revision, json.loads(data), created, updated)


_COLUMNS = "seq, workspace, kind, id, parent, name, revision, data, created_at, updated_at"


class Tx:
    """The operations of one transaction; only used on the writer thread."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # Whether this transaction changed anything: the gateway's cached views follow the store
        # by a generation number that only writes advance.
        self.wrote = False

    def insert(
        self,
        workspace: str,
        kind: str,
        entity_id: str,
        data: dict[str, Any],
        *,
        name: str | None = None,
        parent: str | None = None,
    ) -> Row:
        """Store a new entity at revision 1."""
        self.wrote = True
        stamp = now_iso()
        cur = self._conn.execute(
            "INSERT INTO entities (workspace, kind, id, parent, name, revision, data, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)",
            (workspace, kind, entity_id, parent, name, json.dumps(data), stamp, stamp),
        )
        seq = cur.lastrowid
        assert seq is not None
        return Row(seq, workspace, kind, entity_id, parent, name, 1, data, stamp, stamp)

    def _first(self, where: str, params: Sequence[Any]) -> Row | None:
        """The first row matching ``where`` (a fixed SQL condition, never user text), or None."""
        found = self._conn.execute(f"SELECT {_COLUMNS} FROM entities WHERE {where}", params).fetchone()
        return _row(found) if found else None

    def get(self, workspace: str, kind: str, entity_id: str) -> Row | None:
        """One entity of a kind in a workspace, or None."""
        return self._first("id = ? AND workspace = ? AND kind = ?", (entity_id, workspace, kind))

    def entry(self, parent: str, kind: str, name: str) -> Row | None:
        """One entry of a parent (a bundle's member, prompt, ...) by its name."""
        return self._first("parent = ? AND kind = ? AND name = ?", (parent, kind, name))

    def update(self, row: Row, data: dict[str, Any], *, name: str | None = None) -> Row:
        """Replace an entity's data and bump its revision."""
        self.wrote = True
        stamp = now_iso()
        new_name = row.name if name is None else name
        self._conn.execute(
            "UPDATE entities SET data = ?, name = ?, revision = revision + 1, updated_at = ? WHERE id = ?",
            (json.dumps(data), new_name, stamp, row.id),
        )
        return Row(
            row.seq,
            row.workspace,
            row.kind,
            row.id,
            row.parent,
            new_name,
            row.revision + 1,
            data,
            row.created_at,
            stamp,
        )

    def delete(self, entity_id: str) -> None:
        """Remove an entity, its entries and any secret value stored under its id."""
        self.wrote = True
        self._conn.execute("DELETE FROM entities WHERE id = ? OR parent = ?", (entity_id, entity_id))
        # An exact prefix: in LIKE, the '_' every id holds would match any character.
        prefix = f"{entity_id}:"
        self._conn.execute(
            "DELETE FROM secret_values WHERE id = ? OR substr(id, 1, ?) = ?",
            (entity_id, len(prefix), prefix),
        )

    def select(
        self,
        workspace: str,
        kind: str,
        *,
        equals: dict[str, Any] | None = None,
        parent: str | None = None,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> list[Row]:
        """Entities of a kind in creation order; ``equals`` compares ``name`` or data fields."""
        where = ["workspace = ?", "kind = ?", "seq > ?"]
        args: list[Any] = [workspace, kind, after_seq]
        if parent is not None:
            where.append("parent = ?")
            args.append(parent)
        for key, value in (equals or {}).items():
            if key == "name":
                where.append("name = ?")
            else:
                # The key is a fixed identifier from the kind's filter list, never user text.
                where.append(f"json_extract(data, '$.{key}') = ?")
            args.append(value)
        sql = f"SELECT {_COLUMNS} FROM entities WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_row(r) for r in self._conn.execute(sql, args)]

    def entries(self, parent: str, kind: str) -> list[Row]:
        """All entries of a kind under a parent, in creation order."""
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM entities WHERE parent = ? AND kind = ? ORDER BY seq", (parent, kind)
        )
        return [_row(r) for r in rows]

    def every(self, kind: str) -> list[Row]:
        """Every row of a kind in every workspace, in creation order (the gateway's own bookkeeping)."""
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM entities WHERE kind = ? ORDER BY seq", (kind,))
        return [_row(r) for r in rows]

    def holders(self, workspace: str, kinds: Iterable[str], entity_id: str) -> list[Row]:
        """Entities of ``kinds`` whose data mention ``entity_id`` (ids are unique random strings)."""
        kinds = list(kinds)
        marks = ", ".join("?" for _ in kinds)
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM entities WHERE workspace = ? AND kind IN ({marks})"
            " AND instr(data, ?) > 0 ORDER BY seq",
            (workspace, *kinds, json.dumps(entity_id)),
        )
        return [_row(r) for r in rows if r[3] != entity_id]

    def find_name(self, kind: str, name: str, workspace: str | None = None) -> Row | None:
        """The entity of a kind holding ``name``, in one workspace or in all of them."""
        if workspace is None:
            return self._first("kind = ? AND name = ? LIMIT 1", (kind, name))
        return self._first("workspace = ? AND kind = ? AND name = ? LIMIT 1", (workspace, kind, name))

    def set_hidden(self, row: Row, field: str, value: Any) -> None:
        """Set a hidden ('_') data field without a new revision: nothing a client sees changes."""
        self.wrote = True
        assert field.startswith("_")
        self._conn.execute(
            "UPDATE entities SET data = json_set(data, ?, json(?)) WHERE id = ?",
            (f"$.{field}", json.dumps(value), row.id),
        )

    def idempotent(self, workspace: str, kind: str, key: str) -> tuple[str, str] | None:
        """(fingerprint, entity id) recorded for an idempotency key in the last day, or None."""
        found = self._conn.execute(
            "SELECT fingerprint, entity_id FROM idempotency"
            " WHERE workspace = ? AND kind = ? AND key = ? AND created_at >= ?",
            (workspace, kind, key, now_iso(IDEMPOTENCY_TTL)),
        ).fetchone()
        return (found[0], found[1]) if found else None

    def idempotency_record(self, workspace: str, key: str) -> tuple[str, str] | None:
        """(kind, entity id) of the latest create recorded under ``key`` in a workspace, or None."""
        found = self._conn.execute(
            "SELECT kind, entity_id FROM idempotency WHERE workspace = ? AND key = ? AND created_at >= ?"
            " ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (workspace, key, now_iso(IDEMPOTENCY_TTL)),
        ).fetchone()
        return (found[0], found[1]) if found else None

    def remember(self, workspace: str, kind: str, key: str, fingerprint: str, entity_id: str) -> None:
        """Record which entity an idempotency key created, forgetting the workspace's expired keys."""
        self._conn.execute(
            "DELETE FROM idempotency WHERE workspace = ? AND created_at < ?",
            (workspace, now_iso(IDEMPOTENCY_TTL)),
        )
        self._conn.execute(
            "INSERT INTO idempotency (workspace, kind, key, fingerprint, entity_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (workspace, kind, key, fingerprint, entity_id, now_iso()),
        )

    def append_audit(self, entries: Sequence[tuple[str, str, str, str]], keep: int, since: str) -> None:
        """Add audit entries (workspace, bundle id, time, JSON) and drop all but the newest ``keep``
        and those older than ``since``. Not a write of entities: cached views stay valid."""
        self._conn.executemany(
            "INSERT INTO gateway_audit (workspace, bundle_id, at, entry) VALUES (?, ?, ?, ?)", entries
        )
        self._conn.execute("DELETE FROM gateway_audit WHERE at < ?", (since,))
        self._conn.execute(
            "DELETE FROM gateway_audit WHERE seq <= (SELECT MAX(seq) FROM gateway_audit) - ?", (keep,)
        )

    def audit_page(
        self, workspace: str, bundle_id: str, before: int | None, limit: int
    ) -> list[tuple[int, str]]:
        """Audit entries of a gateway bundle, newest first, older than sequence ``before``."""
        rows = self._conn.execute(
            "SELECT seq, entry FROM gateway_audit WHERE workspace = ? AND bundle_id = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT ?",
            (workspace, bundle_id, before if before is not None else 2**62, limit),
        ).fetchall()
        return [(int(seq), str(entry)) for seq, entry in rows]

    def put_secret(self, key: str, value: str) -> None:
        """Store a secret value under ``key`` (a secret's id, or ``<entity id>:<purpose>``)."""
        self.wrote = True
        self._conn.execute(
            "INSERT INTO secret_values (id, value) VALUES (?, ?)"
            " ON CONFLICT (id) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def secret(self, key: str) -> str | None:
        """A stored secret value, or None."""
        found = self._conn.execute("SELECT value FROM secret_values WHERE id = ?", (key,)).fetchone()
        return str(found[0]) if found else None


class Store:
    """The SQLite file behind the reference platform."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="platform-db")
        self._conn: sqlite3.Connection | None = None
        # Advanced by every transaction that wrote; listeners hear of each advance.
        self.generation = 0
        self._listeners: list[Callable[[int], None]] = []

    def _open(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.executescript(_SCHEMA)
        self._conn = conn

    async def open(self) -> None:
        """Open (and create when new) the database file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.get_running_loop().run_in_executor(self._executor, self._open)

    def _run(self, fn: Callable[[Tx], T]) -> tuple[T, bool]:
        conn = self._conn
        if conn is None:
            raise RuntimeError("the store is not open")
        conn.execute("BEGIN IMMEDIATE")
        tx = Tx(conn)
        try:
            result = fn(tx)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result, tx.wrote

    async def transact(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one transaction on the writer thread; an exception rolls it back."""
        result, wrote = await asyncio.get_running_loop().run_in_executor(self._executor, self._run, fn)
        if wrote:
            self.generation += 1
            for listener in list(self._listeners):
                listener(self.generation)
        return result

    def listen(self, listener: Callable[[int], None]) -> None:
        """Call ``listener`` with the new generation after every transaction that wrote."""
        self._listeners.append(listener)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        """Close the database and stop the writer thread."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close)
        self._executor.shutdown(wait=True)
