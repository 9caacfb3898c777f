"""Batch claimer: claims due rows with FOR UPDATE SKIP LOCKED for the sender.

It claims only when the sender's channel has room, so a node never holds
more than it can send; it takes campaigns in turn (interleaved by account)
so one big campaign does not starve a small one.
"""

import logging
import time

import anyio
import asyncpg
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream
from opentelemetry import trace

from service import db, telemetry
from service.context import Batch, NodeContext, Row

log = logging.getLogger("einmal.claimer")

IDLE_SECONDS = 0.5
ROOM_POLL_SECONDS = 0.002
LIST_SECONDS = 1.0  # how long the list of sending campaigns is reused while claiming


async def _wait_for_room(stream: MemoryObjectSendStream[Batch]) -> None:
    while True:
        stats = stream.statistics()
        if stats.current_buffer_used < stats.max_buffer_size or stats.tasks_waiting_receive:
            return
        await anyio.sleep(ROOM_POLL_SECONDS)


async def claim(ctx: NodeContext, conn: asyncpg.Connection, token: str, campaign_id: int,
                account_id: int) -> Batch | None:
    """Claim one batch of a campaign; None when nothing of it is due (and no trace for that)."""
    began = time.time_ns()
    records = await conn.fetch(db.query("send_claim_batch"), campaign_id, token, ctx.settings.batch_size)
    rows = [Row(r["id"], r["account_id"], r["subscriber_id"], r["email"], r["email_lower"], r["attempts"],
                r["name"], r["attributes"]) for r in records if r["status"] == "claimed"]
    metrics = ctx.metrics
    if len(records) > len(rows):
        metrics.count({"suppressed": len(records) - len(rows)})
    if not rows:
        return None
    metrics.rows_claimed.inc(len(rows))
    metrics.rows_in_flight.inc(len(rows))
    tracer = telemetry.tracer()
    root = tracer.start_span("batch", start_time=began, attributes={
        "einmal.campaign_id": campaign_id, "einmal.account_id": account_id, "einmal.node_id": token,
        "einmal.batch_size": len(rows)})
    span = tracer.start_span("claim", context=trace.set_span_in_context(root), start_time=began)
    span.set_attribute("einmal.claimed", len(rows))
    span.set_attribute("einmal.suppressed", len(records) - len(rows))
    span.end()
    return Batch(campaign_id, account_id, token, rows, root, time.monotonic())


async def run(ctx: NodeContext, token: str, to_sender: MemoryObjectSendStream[Batch], *,
              task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    # one connection for the claimer's life
    async with to_sender, db.actor_connection(ctx.pool, "claimer", token, ctx.settings.db_timeout_seconds) as conn:
        task_status.started()
        turn, campaigns, listed_at = 0, [], -LIST_SECONDS
        while not ctx.stopping.is_set():
            await _wait_for_room(to_sender)
            if ctx.stopping.is_set():
                break
            if time.monotonic() - listed_at >= LIST_SECONDS:  # the claim re-checks the status itself
                campaigns, listed_at = await conn.fetch(db.query("campaign_sending")), time.monotonic()
            batch = None
            for i in range(len(campaigns)):
                campaign = campaigns[(turn + i) % len(campaigns)]
                batch = await claim(ctx, conn, token, campaign["id"], campaign["account_id"])
                if batch:
                    turn = (turn + i + 1) % len(campaigns)
                    break
            if batch is None:
                if await ctx.claim_nudge.wait(IDLE_SECONDS) or campaigns:
                    listed_at = -LIST_SECONDS  # something changed, or idle: list again
                continue
            await to_sender.send(batch)
