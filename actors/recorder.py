"""Recorder: closes each batch — its counts, its log line, its trace.

The outcomes themselves are written by the sender's group-commit writer
(actors/writer.py), each in the statement that starts its connection's next
row, or alone when none follows: that keeps at most one message per
connection on the wire unrecorded, the bound on what a crash can leave in
doubt (docs/design.md#in-doubt-bound). A batch reaches the recorder once every one of
its rows is recorded, released or settled without SMTP.
"""

import logging
import time
from collections import Counter

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream
from opentelemetry import trace

from actors.batch import Batch
from service import telemetry
from service.metrics import Metrics

log = logging.getLogger("einmal.recorder")


def close(batch: Batch, metrics: Metrics | None = None) -> Counter[str]:
    counts = Counter(o.status for o in batch.outcomes)
    counts.update(batch.settled)
    with telemetry.tracer().start_as_current_span(
        "record", context=trace.set_span_in_context(batch.span), attributes=telemetry.batch_attributes(batch)
    ) as span:
        outcomes = telemetry.outcome_attributes(batch)
        span.set_attributes(outcomes)
        batch.span.set_attributes(outcomes)
        log.debug("campaign %d: batch of %d: %s", batch.campaign_id, len(batch.rows), dict(counts))
    batch.span.end()
    if metrics is not None:  # once per batch, with its counts
        metrics.count(counts)
        metrics.count_replies(o.reply for o in batch.outcomes)
        metrics.rows_in_flight.dec(len(batch.rows))
        if batch.began:
            metrics.batch_seconds.observe(time.monotonic() - batch.began)
    return counts


async def run(
    metrics: Metrics,
    batches: MemoryObjectReceiveStream[Batch],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    async with batches:
        task_status.started()
        async for batch in batches:
            close(batch, metrics)
