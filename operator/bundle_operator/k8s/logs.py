"""Log output of the operator: one JSON object per line, with the Kubernetes object it is about.

Each line has ``time`` (RFC 3339, UTC), ``level``, ``logger`` and ``message``; when the record
names a Kubernetes object also ``kind``, ``namespace``, ``name`` and ``uid``; on an exception
``exc_type`` ("ClassName: message", never a traceback: tracebacks with locals leak data); while
a traced span is current (tracing on, see ``telemetry/tracing.py``) ``trace_id`` and ``span_id`` in
hex, so a log line leads to its trace and a trace to its lines.

The object comes from, in this order of precedence:

- flat extras ``kind``, ``namespace``, ``uid`` and ``resource_name`` (``name`` itself is taken by
  ``logging.LogRecord``, so ``extra={"name": ...}`` raises);
- ``record.k8s_ref``, the dict kopf's object loggers attach (``kind``, ``namespace``, ``name``,
  ``uid``, ``apiVersion``); ``object_extra(...)`` builds the same for our own loggers.

``Redactor`` is a safety net for secrets that slipped into a message anyway: register every
secret value read from a Kubernetes Secret or issued by the platform with ``REDACTOR.add(value)``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from bundle_operator.telemetry import tracing

MASK: Final = "***"
MIN_SECRET_LENGTH: Final = 6
_OBJECT_FIELDS: Final = ("kind", "namespace", "name", "uid")
_FLAT_EXTRAS: Final = {"kind": "kind", "namespace": "namespace", "name": "resource_name", "uid": "uid"}
# kopf.configure() installs a handler of this class on the root logger; ours replaces it.
_KOPF_HANDLER_CLASS: Final = "_KopfStreamHandler"
# Loggers whose own handlers see records before the root handler does: kopf posts what its object
# loggers say as Kubernetes events, so the redactor filters there too.
_EVENT_LOGGERS: Final = ("kopf.objects",)


class Redactor(logging.Filter):
    """Replaces registered secret values with ``***`` in log messages and formatted lines."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        # Longest first, so a secret containing another is masked whole.
        self._secrets: tuple[str, ...] = ()

    def add(self, secret: str) -> None:
        """Register a secret value; values shorter than 6 characters are ignored (too common)."""
        candidates = {secret, secret.strip()}
        with self._lock:
            known = set(self._secrets)
            known.update(value for value in candidates if len(value) >= MIN_SECRET_LENGTH)
            self._secrets = tuple(sorted(known, key=len, reverse=True))

    def clear(self) -> None:
        """Forget every registered value."""
        with self._lock:
            self._secrets = ()

    def redact(self, text: str) -> str:
        """``text`` with every registered value replaced by ``***``."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message in place (for every later handler); never drops a record."""
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


REDACTOR: Final = Redactor()


def object_extra(kind: str, namespace: str | None, name: str, uid: str | None = None) -> dict[str, Any]:
    """``extra=`` for a log call about a Kubernetes object, in kopf's ``k8s_ref`` shape."""
    return {"k8s_ref": {"kind": kind, "namespace": namespace, "name": name, "uid": uid}}


def _object_fields(record: logging.LogRecord) -> dict[str, str]:
    fields: dict[str, str] = {}
    ref = getattr(record, "k8s_ref", None)
    if isinstance(ref, Mapping):
        for key in _OBJECT_FIELDS:
            value = ref.get(key)
            if value is not None and value != "":
                fields[key] = str(value)
    for key, attribute in _FLAT_EXTRAS.items():
        value = getattr(record, attribute, None)
        if isinstance(value, str) and value:
            fields[key] = value
    return fields


def _exception_text(record: logging.LogRecord) -> str | None:
    if not record.exc_info:
        return None
    exc = record.exc_info[1]
    if exc is None:
        return None
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _rfc3339(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line; see the module docstring for the fields."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": _rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(_object_fields(record))
        exc_text = _exception_text(record)
        if exc_text is not None:
            line["exc_type"] = exc_text
        # Formatted in the thread and context of the log call (a plain stream handler), so the
        # current span is the one the line was logged under.
        ids = tracing.current_ids()
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        if self._redactor is not None:
            # Per value, before encoding: JSON escaping could hide a secret from a search in the line.
            line = {key: self._redactor.redact(value) for key, value in line.items()}
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Plain lines for a terminal: ``time level logger [namespace/name] message``, no traceback."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        fields = _object_fields(record)
        where = "/".join(fields[key] for key in ("namespace", "name") if key in fields)
        ref = f"[{where}] " if "name" in fields else ""
        line = f"{_rfc3339(record.created)} {record.levelname:<7} {record.name}: {ref}{record.getMessage()}"
        exc_text = _exception_text(record)
        if exc_text is not None:
            line = f"{line} ({exc_text})"
        line = line.replace("\n", "\\n")
        return self._redactor.redact(line) if self._redactor is not None else line


class _OperatorHandler(logging.StreamHandler[TextIO]):
    """Marks the handler configure_logging installed, so a second call replaces it."""


def _is_replaced(handler: logging.Handler) -> bool:
    return isinstance(handler, _OperatorHandler) or any(
        cls.__name__ == _KOPF_HANDLER_CLASS for cls in type(handler).__mro__
    )


def configure_logging(level: str = "INFO", json_logs: bool = True) -> None:
    """Send every log record to stderr through one handler on the root logger.

    Replaces an earlier handler of this function and kopf's own root handler (``kopf.configure``
    or ``kopf run`` install one), so nothing prints twice; call it after ``kopf.configure`` if that
    is called at all. Installs ``REDACTOR`` on the handler and on kopf's object logger (whose
    messages also become Kubernetes events).
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = _OperatorHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(REDACTOR) if json_logs else TextFormatter(REDACTOR))
    handler.addFilter(REDACTOR)
    root = logging.getLogger()
    root.handlers[:] = [existing for existing in root.handlers if not _is_replaced(existing)]
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _EVENT_LOGGERS:
        _add_filter_once(logging.getLogger(name), REDACTOR)


def _add_filter_once(logger: logging.Logger, redactor: Redactor) -> None:
    if redactor not in logger.filters:
        logger.addFilter(redactor)
