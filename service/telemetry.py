"""OpenTelemetry tracing, configured by the standard OTEL_* variables.

OTEL_TRACES_EXPORTER: none (default), console or otlp (OTLP over HTTP to
OTEL_EXPORTER_OTLP_ENDPOINT). Spans carry ids and counts, never an address,
a password or a body: a batch's `send` and `record` spans its campaign, node and
row count, and (once its rows are settled) its outcomes counted by status.
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


def batch_attributes(batch) -> dict[str, int | str]:
    """What the `send` and `record` spans of a batch (service/context.py Batch) say of it."""
    return {"einmal.campaign_id": batch.campaign_id, "einmal.account_id": batch.account_id,
            "einmal.node_id": batch.token, "einmal.rows": len(batch.rows)}


def outcome_attributes(batch) -> dict[str, int]:
    """`einmal.outcome.<status>`: the batch's rows per outcome, those the SMTP answers decided and those
    settled without SMTP (suppressed, released, …)."""
    counts: dict[str, int] = {}
    for outcome in batch.outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    for status, n in batch.settled.items():
        counts[status] = counts.get(status, 0) + n
    return {f"einmal.outcome.{status}": n for status, n in counts.items()}


def tracer() -> trace.Tracer:
    if _provider is not None:
        return _provider.get_tracer("einmal")
    return trace.get_tracer("einmal")


def shutdown() -> None:
    global _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = None
