"""OpenTelemetry tracing, off unless an OTLP endpoint is configured.

``configure`` turns it on for the process: ``--otlp-endpoint`` (a flag or chart value), else the
standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` (and the other
``OTEL_*`` variables the exporter reads: headers, timeout, certificate); ``OTEL_SDK_DISABLED=true``
keeps it off. Spans go out in batches from a background thread, so a slow collector delays
nothing but the export.

While off, ``span`` is a shared no-op context that yields the invalid span without touching the
OpenTelemetry context, and ``inject`` adds nothing: a process that does not trace pays one
attribute read per span.

Trace context travels as W3C ``traceparent``/``tracestate``: on HTTP requests as headers, and in
an MCP request's ``params._meta`` under the same keys (the MCP specification's convention, SEP-414),
which is the only carrier a stdio member has.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import DefaultGetter, DefaultSetter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

INSTRUMENTATION: Final = "bundle_operator"
# The keys SEP-414 reserves in an MCP request's params._meta (W3C Trace Context and Baggage).
META_KEYS: Final = ("traceparent", "tracestate", "baggage")
_ENDPOINT_ENVS: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROPAGATOR: Final = TraceContextTextMapPropagator()
_GETTER: Final = DefaultGetter()
_SETTER: Final = DefaultSetter()

AttributeValue = str | bool | int | float


@dataclass
class _Tracing:
    """The process's tracer provider while tracing is on."""

    provider: TracerProvider | None = None
    tracer: trace.Tracer = field(default_factory=trace.NoOpTracer)


_STATE: Final = _Tracing()
_OFF: Final = nullcontext(INVALID_SPAN)


def endpoint_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The OTLP endpoint the standard variables name, or None (also when OTEL_SDK_DISABLED=true)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    return next((env[name].strip() for name in _ENDPOINT_ENVS if env.get(name, "").strip()), None)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for a base endpoint given as a flag: ``<endpoint>/v1/traces``."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def configure(
    service_name: str,
    *,
    endpoint: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    exporter: SpanExporter | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Turn tracing on when ``endpoint`` (a base URL) or the environment names one; True if on.

    ``exporter`` replaces the OTLP exporter (tests); its spans are exported as each one ends.
    """
    shutdown()
    if exporter is None:
        from_env = endpoint_from_env(environ)
        if not endpoint and from_env is None:
            return False
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # With no flag the exporter reads the OTEL_* variables itself (the traces endpoint as
        # given, the generic one with /v1/traces appended), as every OpenTelemetry SDK does.
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint)) if endpoint else OTLPSpanExporter()
        processor: BatchSpanProcessor | SimpleSpanProcessor = BatchSpanProcessor(exporter)
    else:
        processor = SimpleSpanProcessor(exporter)
    resource = Resource.create({"service.name": service_name, **(attributes or {})})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    _STATE.provider = provider
    _STATE.tracer = provider.get_tracer(INSTRUMENTATION)
    log.info("tracing on: spans of %s go to the OTLP endpoint", service_name)
    return True


def shutdown() -> None:
    """Export what is pending and turn tracing off."""
    provider, _STATE.provider = _STATE.provider, None
    _STATE.tracer = trace.NoOpTracer()
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    """Whether spans are recorded and exported."""
    return _STATE.provider is not None


def span(
    name: str,
    attributes: Mapping[str, AttributeValue | None] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: otel_context.Context | None = None,
) -> AbstractContextManager[Span]:
    """A span around the block, the current one inside it; an exception marks it failed.

    ``parent`` continues a trace from elsewhere (``extract``); None values in ``attributes`` are
    left out. While tracing is off it is one shared no-op context yielding the invalid span: no
    generator is made per call.
    """
    if _STATE.provider is None:
        return _OFF
    clean = {key: value for key, value in (attributes or {}).items() if value is not None}
    return _STATE.tracer.start_as_current_span(name, context=parent, kind=kind, attributes=clean)


def set_attributes(attributes: Mapping[str, AttributeValue | None]) -> None:
    """Add attributes to the current span (nothing while tracing is off)."""
    if _STATE.provider is None:
        return
    current = trace.get_current_span()
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(key, value)


def fail(message: str) -> None:
    """Mark the current span failed without an exception (a refusal, an error answer)."""
    if _STATE.provider is not None:
        trace.get_current_span().set_status(Status(StatusCode.ERROR, message))


def inject(carrier: MutableMapping[str, Any]) -> None:
    """Put the current span's ``traceparent`` (and ``tracestate``) into headers or ``_meta``."""
    if _STATE.provider is not None:
        _PROPAGATOR.inject(carrier, setter=_SETTER)


def extract(carrier: Mapping[str, Any] | None) -> otel_context.Context | None:
    """The remote parent a carrier (headers, ``_meta``) names, or None when it names none."""
    if _STATE.provider is None or not carrier:
        return None
    found = _PROPAGATOR.extract(carrier, getter=_GETTER)
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def trace_meta(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """The trace-context keys of an MCP ``_meta`` that are strings (SEP-414), to pass on."""
    return {key: value for key in META_KEYS if isinstance(value := (meta or {}).get(key), str)}


def current_ids() -> tuple[str, str] | None:
    """(trace_id, span_id) of the current span in hex, or None when none is recording."""
    if _STATE.provider is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
