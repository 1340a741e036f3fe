"""An OTLP/HTTP trace receiver of the tests' own: it decodes what exporters send to ``/v1/traces``
(protobuf or JSON, gzip or not) with ``opentelemetry-proto`` and keeps the spans to look at.

    receiver = OtlpReceiver.start()          # or the ``otlp_receiver`` fixture
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    ...
    trace = receiver.wait_for_trace(lambda spans: any(s.name == "apply" for s in spans))
    print(receiver.render(trace))           # an indented tree: service, name, attributes
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bundle_operator.telemetry import tracing

TRACES_PATH = "/v1/traces"
_KINDS = {value: name.removeprefix("SPAN_KIND_") for name, value in ProtoSpan.SpanKind.items()}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass(frozen=True)
class ReceivedSpan:
    """One decoded span: ids in hex (``parent_id`` empty for a root), its service and attributes."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    service: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: str
    start_ns: int
    end_ns: int


@dataclass
class OtlpReceiver:
    """A running receiver; ``endpoint`` is the base URL exporters take (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""

    server: ThreadingHTTPServer
    received: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls) -> OtlpReceiver:
        """Listen on a free loopback port in a background thread."""
        holder: dict[str, OtlpReceiver] = {}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != TRACES_PATH:
                    self.send_error(404)
                    return
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                as_json = "json" in self.headers.get("Content-Type", "")
                if as_json:
                    json_format.Parse(body, request)
                else:
                    request.ParseFromString(body)
                holder["receiver"].add(request)
                answer = ExportTraceServiceResponse()
                payload = (
                    json_format.MessageToJson(answer).encode() if as_json else answer.SerializeToString()
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json" if as_json else "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        receiver = holder["receiver"] = cls(server)
        threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True).start()
        return receiver

    @property
    def endpoint(self) -> str:
        """The base URL: exporters append ``/v1/traces``."""
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        """Stop listening."""
        self.server.shutdown()
        self.server.server_close()

    def add(self, request: ExportTraceServiceRequest) -> None:
        """Keep the spans of one export request."""
        spans: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=_KINDS.get(span.kind, str(span.kind)),
                            service=str(resource.get("service.name", "")),
                            attributes={kv.key: _value(kv.value) for kv in span.attributes},
                            resource=resource,
                            status=_status(span),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self.lock:
            self.requests += 1
            self.received.extend(spans)

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self.lock:
            return list(self.received)

    def clear(self) -> None:
        """Forget what arrived so far."""
        with self.lock:
            self.received.clear()

    def traces(self) -> dict[str, list[ReceivedSpan]]:
        """The spans received so far, by trace id, each trace in start order."""
        found: dict[str, list[ReceivedSpan]] = {}
        for span in self.spans():
            found.setdefault(span.trace_id, []).append(span)
        return {trace: sorted(spans, key=lambda s: s.start_ns) for trace, spans in found.items()}

    def wait_for_trace(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        """The first trace for which ``done(spans)`` holds; AssertionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            for spans in self.traces().values():
                if done(spans):
                    return spans
            if time.monotonic() > deadline:
                names = {trace: [s.name for s in spans] for trace, spans in self.traces().items()}
                raise AssertionError(f"no such trace within {timeout:.0f} s; received: {names}")
            time.sleep(0.1)

    @staticmethod
    def render(trace: list[ReceivedSpan], attributes: tuple[str, ...] = ()) -> str:
        """An indented tree of one trace: ``service: name [kind] key=value``, children under parents."""
        children: dict[str, list[ReceivedSpan]] = {}
        ids = {span.span_id for span in trace}
        for span in trace:
            children.setdefault(span.parent_id if span.parent_id in ids else "", []).append(span)

        def walk(parent: str, depth: int) -> Iterator[str]:
            for span in sorted(children.get(parent, []), key=lambda s: s.start_ns):
                shown = " ".join(f"{k}={span.attributes[k]}" for k in attributes if k in span.attributes)
                millis = (span.end_ns - span.start_ns) / 1e6
                line = f"{'  ' * depth}{span.service}: {span.name} [{span.kind}] {millis:.1f} ms {shown}"
                yield line.rstrip()
                yield from walk(span.span_id, depth + 1)

        return "\n".join(walk("", 0))


def _status(span: ProtoSpan) -> str:
    return {0: "UNSET", 1: "OK", 2: "ERROR"}.get(span.status.code, str(span.status.code))


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver for one test."""
    receiver = OtlpReceiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def module_otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver shared by a module's tests (say, with a traced platform started once for them)."""
    receiver = OtlpReceiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def span_exporter() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process for one test, each span kept in memory as it ends."""
    exporter = InMemorySpanExporter()
    assert tracing.configure("test-service", exporter=exporter)
    yield exporter
    tracing.shutdown()
