"""Recorder: closes each batch — its counts, its log line, its trace.

The outcomes themselves are written by the sender, grouped, in the same
statement that starts the next group (or in one flush when none follows):
that keeps at most one group per node on the wire unrecorded, the bound on
what a crash can leave in doubt. By the time a batch reaches the recorder,
its rows are final or back in the queue.
"""

import logging
import time
from collections import Counter

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream
from opentelemetry import trace

from service import telemetry
from service.context import BatchResult, NodeContext
from service.metrics import Metrics

log = logging.getLogger("einmal.recorder")


def close(result: BatchResult, metrics: Metrics | None = None) -> Counter:
    batch = result.batch
    counts = Counter(o.status for o in result.outcomes)
    counts.update(result.settled)
    with telemetry.tracer().start_as_current_span("record", context=trace.set_span_in_context(batch.span)):
        for status, count in counts.items():
            batch.span.set_attribute(f"einmal.outcome.{status}", count)
        log.debug("campaign %d: batch of %d: %s", batch.campaign_id, len(batch.rows), dict(counts))
    batch.span.end()
    if metrics is not None:  # once per batch, with its counts
        metrics.count(counts)
        metrics.count_replies(o.reply for o in result.outcomes)
        metrics.rows_in_flight.dec(len(batch.rows))
        if batch.began:
            metrics.batch_seconds.observe(time.monotonic() - batch.began)
    return counts


async def run(ctx: NodeContext, token: str, results: MemoryObjectReceiveStream[BatchResult], *,
              task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    async with results:
        task_status.started()
        async for result in results:
            close(result, ctx.metrics)
