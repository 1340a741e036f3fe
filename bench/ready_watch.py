"""Every installation's Ready and Reason columns, from one watch of the server-side table.

The scale bench used to list the table once a second. At 5,000 installations each list had the API
server render 5,000 rows: about a third of a core, taken from what the bench measures, and coarse
(the first look came only after the apply). One watch renders a row per change, as it happens,
and the times it gives are the API server's own delivery times, not the next poll's.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import httpx

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass(frozen=True)
class Row:
    """An installation as the last event showed it, and since when (monotonic) it has been Ready."""

    ready: str
    reason: str
    ready_since: float | None


class ReadyWatch:
    """Watches ``path`` in a thread; ``rows()`` is the newest row of every installation."""

    def __init__(self, client: httpx.Client, path: str) -> None:
        self._client = client  # its own: the thread is its only user
        self._path = path
        self._rows: dict[str, Row] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.events = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ready-watch", daemon=True)

    def start(self) -> ReadyWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def rows(self) -> dict[str, Row]:
        with self._lock:
            return dict(self._rows)

    def _run(self) -> None:
        try:
            with self._client as api:
                while not self._stop.is_set():
                    self._watch(api)
        except BaseException as exc:  # the bench's loop reports it
            self.error = exc

    def _watch(self, api: httpx.Client) -> None:
        # resourceVersion 0: the current state first (an ADDED per object), then every change; a
        # stream the server ends is opened again the same way, which only repeats what is known.
        params = {"watch": "1", "resourceVersion": "0", "includeObject": "None", "timeoutSeconds": "1800"}
        columns: dict[str, int] = {}
        with api.stream("GET", self._path, params=params, headers={"Accept": TABLE}, timeout=None) as answer:
            answer.raise_for_status()
            for line in answer.iter_lines():
                if self._stop.is_set():
                    return
                if not line:
                    continue
                event = json.loads(line)
                table = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return
                # Only the first event of a stream carries the column definitions.
                if table.get("columnDefinitions"):
                    columns = {c["name"]: i for i, c in enumerate(table["columnDefinitions"])}
                if not columns:
                    continue
                self._apply(event.get("type", ""), table.get("rows") or [], columns)

    def _apply(self, kind: str, rows: list[dict[str, object]], columns: dict[str, int]) -> None:
        now = time.monotonic()
        with self._lock:
            self.events += 1
            for row in rows:
                cells = row["cells"]
                assert isinstance(cells, list)
                name = str(cells[columns["Name"]])
                if kind == "DELETED":
                    self._rows.pop(name, None)
                    continue
                ready = str(cells[columns["Ready"]] or "<none>")
                reason = str(cells[columns["Reason"]] or "<none>")
                before = self._rows.get(name)
                since = None
                if ready == "True":
                    kept = before.ready_since if before is not None else None
                    since = kept if kept is not None else now
                self._rows[name] = Row(ready, reason, since)
