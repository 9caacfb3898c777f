"""OpenTelemetry tracing, configured by the standard OTEL_* variables.

OTEL_TRACES_EXPORTER: none (default), console or otlp (OTLP over HTTP to
OTEL_EXPORTER_OTLP_ENDPOINT). Spans carry ids and counts, never an address,
a password or a body.
"""

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from service.settings import traces_exporter

_provider: TracerProvider | None = None


def setup(exporter: SpanExporter | None = None) -> None:
    """Install a tracer provider; `exporter` (tests) overrides the environment."""
    global _provider
    if exporter is None:
        kind = traces_exporter(os.environ)
        if kind == "none":
            return
        if kind == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        processor = BatchSpanProcessor(exporter)
    else:
        processor = SimpleSpanProcessor(exporter)
    service_name = os.environ.get("OTEL_SERVICE_NAME", "einmal")
    _provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    _provider.add_span_processor(processor)


def tracer() -> trace.Tracer:
    if _provider is not None:
        return _provider.get_tracer("einmal")
    return trace.get_tracer("einmal")


def shutdown() -> None:
    global _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = None
