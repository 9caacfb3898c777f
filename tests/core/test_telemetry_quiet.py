"""With the OTLP collector down, the log says so once, then nothing until it answers again (then once more),
instead of the exporter's long lines for every batch it drops. A real exporter, real sockets on loopback."""

import http.server
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from service import telemetry
from tests.support.smtp_servers import free_port


class Collector(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@contextmanager
def collector(port: int) -> Iterator[None]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def test_an_unreachable_collector_is_one_line_then_quiet_until_it_answers(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # closed: nothing listens there yet
    exporter = telemetry.Quiet(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=1))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    def batches(n: int) -> list[str]:
        caplog.clear()
        for _ in range(n):
            with tracer.start_as_current_span("batch"):
                pass
        return [f"{r.name} {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]

    with caplog.at_level(logging.DEBUG):
        down = batches(3)
        assert len(down) == 1, down  # three batches dropped, one line: the exporter's own lines are held back
        assert down[0].startswith(f"einmal.telemetry traces cannot be sent to http://127.0.0.1:{port}/v1/traces (")
        assert down[0].endswith("): dropped, and not said again until it answers") and len(down[0]) < 300
        with collector(port):
            assert batches(2) == [f"einmal.telemetry traces reach http://127.0.0.1:{port}/v1/traces again"]
        assert len(batches(2)) == 1  # down again: one line again
    provider.shutdown()
    assert all(
        not any(f.__self__ is exporter for f in logging.getLogger(name).filters if hasattr(f, "__self__"))
        for name in telemetry.EXPORTER_LOGGERS
    )
