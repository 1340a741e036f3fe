"""Traces: OpenTelemetry spans exported over OTLP/HTTP when an endpoint is configured, W3C trace
context carried on HTTP headers and MCP ``_meta`` (``tracing.py``), and the ids logs carry."""
