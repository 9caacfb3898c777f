"""OpenTelemetry tracing, configured by the standard OTEL_* variables.

OTEL_TRACES_EXPORTER: none (default), console or otlp (OTLP over HTTP to
OTEL_EXPORTER_OTLP_ENDPOINT). Spans carry ids and counts, never an address,
a password or a body: a batch's `send` and `record` spans its campaign, node and
row count, and (once its rows are settled) its outcomes counted by status.
"""

import logging
import os
import re
import threading
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult

from service.settings import traces_exporter

_provider: TracerProvider | None = None
log = logging.getLogger("einmal.telemetry")
# what the OTLP exporter and its HTTP client log while one export fails: retries, then the failure, each a
# long line, for every batch while the collector is down
EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "urllib3.connectionpool",
)


class Quiet(SpanExporter):
    """An exporter that says once that it cannot export, and once that it can again, instead of the lines the
    wrapped one logs for every batch it drops. What that one logs during an export is held back (a logging
    filter on its loggers, for the exporting thread only); its first line gives the reason."""

    def __init__(self, inner: SpanExporter):
        self.inner = inner
        self.down = False
        self.held: list[str] = []
        self.exporting = threading.local()
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self._hold)

    def _hold(self, record: logging.LogRecord) -> bool:
        if not getattr(self.exporting, "on", False):
            return True
        if record.levelno >= logging.WARNING:
            self.held.append(record.getMessage())
        return False

    def export(self, spans: Sequence) -> SpanExportResult:
        self.held.clear()
        self.exporting.on = True
        try:
            result = self.inner.export(spans)
        finally:
            self.exporting.on = False
        endpoint = getattr(self.inner, "_endpoint", "the OTLP endpoint")
        if result is SpanExportResult.SUCCESS and self.down:
            self.down = False
            log.warning("traces reach %s again", endpoint)
        elif result is not SpanExportResult.SUCCESS and not self.down:
            self.down = True
            log.warning(
                "traces cannot be sent to %s (%s): dropped, and not said again until it answers",
                endpoint,
                reason(self.held),
            )
        return result

    def shutdown(self) -> None:
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).removeFilter(self._hold)
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def reason(messages: list[str]) -> str:
    """The short cause in what the exporter logged: `[Errno 111] Connection refused`, else its first line."""
    for message in messages:
        if found := re.search(r"\[Errno -?\d+\][^'\")]*", message):
            return found.group().strip()
    return messages[0].splitlines()[0][:160] if messages else "no reason given"


def setup(exporter: SpanExporter | None = None) -> None:
    """Install a tracer provider; `exporter` (tests) overrides the environment."""
    global _provider
    processor: SpanProcessor
    if exporter is None:
        kind = traces_exporter(os.environ)
        if kind == "none":
            return
        if kind == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = Quiet(OTLPSpanExporter())
        processor = BatchSpanProcessor(exporter)
    else:
        processor = SimpleSpanProcessor(exporter)
    service_name = os.environ.get("OTEL_SERVICE_NAME", "einmal")
    _provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    _provider.add_span_processor(processor)


def batch_attributes(batch) -> dict[str, int | str]:
    """What the `send` and `record` spans of a batch (actors/batch.py Batch) say of it."""
    return {
        "einmal.campaign_id": batch.campaign_id,
        "einmal.account_id": batch.account_id,
        "einmal.node_id": batch.token,
        "einmal.rows": len(batch.rows),
    }


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
