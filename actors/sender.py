"""Sender: delivers claimed batches over a pool of persistent SMTP connections.

For each group of messages (one per connection) it first moves the group
claimed -> sending in one statement that re-checks the claim fence, the
suppressions and the campaign's status; only the rows that statement
returns go on the wire, each after one last look at the in-memory
suppression set. A crash can therefore leave at most one message per
connection in doubt.

When no connection of a group reaches the server (down, TLS or AUTH
refused) nothing was sent: the group goes back to the queue with no
attempt counted, the rest of the batch is released, one line is logged,
and the sender takes no next batch for a pause that doubles (from
EINMAL_RETRY_BASE_SECONDS, at most 0.5 s, up to 30 s) while it lasts. The
claimer, blocked by the full channel, claims no more than the one batch
the channel buffers meanwhile.
"""

import logging
import time
from contextlib import suppress

import anyio
import asyncpg
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from opentelemetry import trace

from service import campaigns, db, render, telemetry
from service.context import Batch, BatchResult, NodeContext, Outcome, Row
from service.errors import UsageError
from service.smtp import Outcome as Smtp
from service.smtp import SmtpConnection, SmtpUnavailable

log = logging.getLogger("einmal.sender")

MIN_PAUSE, MAX_FIRST_PAUSE, MAX_PAUSE = 0.05, 0.5, 30.0  # seconds, while the server is unreachable


def columns(outcomes: list[Outcome]) -> tuple[list, ...]:
    """The outcomes as the six arrays send_advance takes."""
    return ([o.id for o in outcomes], [o.status for o in outcomes], [o.reply[:1000] for o in outcomes],
            [o.attempts for o in outcomes], [o.retry_after for o in outcomes], [o.bounce for o in outcomes])


class RateLimiter:
    """At most `rate` messages per second for the node (0 = no limit)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.next = time.monotonic()

    async def take(self, n: int) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        self.next = max(self.next, now)
        wait, self.next = self.next - now, self.next + n * self.interval
        if wait > 0:
            await anyio.sleep(wait)


class Sender:
    def __init__(self, ctx: NodeContext, token: str, halt: anyio.Event | None = None) -> None:
        self.ctx, self.token = ctx, token
        self.halt = halt or anyio.Event()  # set when the claimer failed: finish the group, give back the rest
        self.connections = [SmtpConnection(ctx.settings) for _ in range(ctx.settings.smtp_connections)]
        self.templates: dict[int, render.CampaignTemplate] = {}
        self.rate = RateLimiter(ctx.settings.rate_limit)
        self.first_pause = min(MAX_FIRST_PAUSE, max(ctx.settings.retry_base_seconds, MIN_PAUSE))
        self.pause = self.first_pause  # grows while the server stays down or refuses us
        self.unavailable: str | None = None  # why the last group reached no server at all
        self.returned = 0  # rows of the last batch given back because of it
        self.pending: list[Outcome] = []  # outcomes of the last group, not yet recorded
        self.starting: list[Row] = []  # the group being moved to sending: none of it is on the wire yet
        self.db: asyncpg.Connection  # set by run()

    async def template(self, campaign_id: int) -> render.CampaignTemplate:
        if campaign_id not in self.templates:
            if len(self.templates) > 64:
                self.templates.clear()
            campaign = await self.db.fetchrow(db.query("campaign_for_render"), campaign_id)
            self.templates[campaign_id] = render.CampaignTemplate.compile(dict(campaign), self.ctx.settings)
        return self.templates[campaign_id]

    def outcome(self, row: Row, status: Smtp, reply: str) -> Outcome:
        settings = self.ctx.settings
        if status is Smtp.SENT:
            return Outcome(row.id, "sent", reply)
        if status is Smtp.PERMANENT:
            bounce = reply[4:8] == "5.1."  # "550 5.1.1 no such user": the address does not exist
            return Outcome(row.id, "failed", reply, attempts=1, bounce=bounce)
        in_doubt = status is Smtp.IN_DOUBT
        if in_doubt and settings.in_doubt == "hold":
            return Outcome(row.id, "in_doubt", reply, attempts=1)
        # a 4xx, or under resend a reply lost after the dot: an attempt, retried with backoff up to the limit;
        # past it an in-doubt row waits for reconcile
        if row.attempts + 1 >= settings.max_attempts:
            if in_doubt:
                return Outcome(row.id, "in_doubt", f"{reply} (still in doubt after {row.attempts + 1} attempts)",
                               attempts=1)
            return Outcome(row.id, "failed", f"{reply} (gave up after {row.attempts + 1} attempts)", attempts=1)
        return Outcome(row.id, "queued", reply, attempts=1, retry_after=self.ctx.retry_after(row.attempts))

    async def deliver(self, connection: SmtpConnection, template: render.CampaignTemplate, row: Row) -> Outcome:
        """The row's outcome; raises SmtpUnavailable when nothing could reach the server."""
        if (row.account_id, row.email_lower) in self.ctx.suppressed:
            return Outcome(row.id, "suppressed", "suppressed before sending")
        try:
            message = template.render(row.subscriber_id, row.email, row.name, row.attributes)
        except ValueError as exc:
            return Outcome(row.id, "failed", f"cannot render: {exc}", attempts=1)
        result = await connection.send(template.envelope_sender(row.subscriber_id), row.email, message)
        return self.outcome(row, result.outcome, result.reply)

    async def send_group(self, template: render.CampaignTemplate, group: list[Row]) -> list[Outcome]:
        """One message per connection at once. A connection that cannot reach the server puts its row
        back in the queue with no attempt counted; when none got through, the sender pauses."""
        outcomes: list[Outcome] = []
        down: list[str] = []

        async def one(connection: SmtpConnection, row: Row) -> None:
            try:
                outcomes.append(await self.deliver(connection, template, row))
            except SmtpUnavailable as exc:
                down.append(str(exc))
                outcomes.append(Outcome(row.id, "queued", f"not sent: {exc}"))

        async with anyio.create_task_group() as tg:
            for connection, row in zip(self.connections, group, strict=False):
                tg.start_soon(one, connection, row)
        if down and len(down) == len(outcomes):
            self.unavailable = self.ctx.smtp_unavailable = down[0]
            self.returned += len(down)
        elif outcomes:
            self.pause = self.first_pause
            self.ctx.smtp_unavailable = None
        return outcomes

    async def back_off(self) -> None:
        """One line per failed try, then no next batch (so no claim beyond the one buffered) for a
        pause that doubles while the server stays unreachable; cut short by a drain."""
        log.warning("%s; nothing sent, %d row(s) back in the queue with no attempt counted; next try in %.1fs",
                    self.unavailable, self.returned, self.pause)
        with anyio.move_on_after(self.pause):
            await self.ctx.stopping.wait()
        self.pause = min(self.pause * 2, MAX_PAUSE)
        self.unavailable, self.returned = None, 0

    async def advance(self, group: list[Row]) -> set[int]:
        """Record the outcomes waiting from the last group and start `group`: one statement."""
        self.starting = group
        began = time.monotonic()
        rows = await self.db.fetch(db.query("send_advance"), *columns(self.pending), self.token,
                                   [row.id for row in group])
        self.ctx.metrics.group_commit_seconds.observe(time.monotonic() - began)
        pending, self.pending, self.starting = self.pending, [], []  # kept until written: see run()
        self._check_recorded(len(pending), rows[0]["recorded"] if rows else 0)
        return {r["id"] for r in rows if r["id"] is not None}

    async def flush(self) -> None:
        """Record what is waiting when no next group follows at once."""
        if self.pending:
            await self.advance([])
            self.ctx.campaign_nudge.set()  # this node's share may be done: the scheduler checks at once

    def _check_recorded(self, expected: int, recorded: int) -> None:
        if recorded < expected:
            log.warning("%d of %d results were not recorded: their rows are no longer this node's",
                        expected - recorded, expected)

    async def pause_campaign(self, batch: Batch, reason: str) -> None:
        """A campaign that cannot be rendered here is paused for the operator, its batch released."""
        await self.release(batch.rows)
        with suppress(UsageError):  # another node paused it first
            await campaigns.transition(self.db, "pause", batch.campaign_id, f"cannot render: {reason}")
        log.error("campaign %d paused: it cannot be rendered: %s", batch.campaign_id, reason)

    async def send_batch(self, batch: Batch) -> BatchResult:
        result = BatchResult(batch, [])
        try:
            template = await self.template(batch.campaign_id)
        except UsageError as exc:
            await self.pause_campaign(batch, str(exc))
            result.settled["released"] = len(batch.rows)
            return result
        n = len(self.connections)
        with telemetry.tracer().start_as_current_span("send", context=trace.set_span_in_context(batch.span)):
            for start in range(0, len(batch.rows), n):
                group = batch.rows[start:start + n]
                if self.ctx.stopping.is_set() or self.halt.is_set() or self.unavailable is not None:
                    # draining, the claimer failed, or the server is down or refuses us: give the rest back
                    await self.release(batch.rows[start:])
                    result.settled["released"] = len(batch.rows) - start
                    self.returned += len(batch.rows) - start
                    break
                await self.rate.take(len(group))
                started = await self.advance(group)
                if len(started) < len(group):
                    result.settled["not_started"] = result.settled.get("not_started", 0) + len(group) - len(started)
                outcomes = await self.send_group(template, [r for r in group if r.id in started])
                self.pending = outcomes
                result.outcomes.extend(outcomes)
        return result

    async def release(self, rows: list[Row]) -> None:
        if rows:
            await self.db.execute(db.query("send_release"), [row.id for row in rows], self.token)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            for connection in self.connections:
                await connection.close()


async def run(ctx: NodeContext, token: str, batches: MemoryObjectReceiveStream[Batch],
              to_recorder: MemoryObjectSendStream[BatchResult], halt: anyio.Event | None = None, *,
              task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    sender = Sender(ctx, token, halt)
    try:
        # one connection for the sender's life: no pool round trip (and reset) per group
        async with batches, to_recorder, db.actor_connection(ctx.pool, "sender", token,
                                                             ctx.settings.db_timeout_seconds) as sender.db:
            task_status.started()
            async for batch in batches:
                result = await sender.send_batch(batch)
                if sender.unavailable or not batches.statistics().current_buffer_used:
                    await sender.flush()  # no next group follows at once
                await to_recorder.send(result)
                if sender.unavailable:
                    await sender.back_off()
            await sender.flush()
    finally:
        # known answers, and a group whose move to sending may or may not have committed but that never
        # reached the wire (back to the queue, no attempt): the next incarnation records them before any rescue
        unsent = [Outcome(row.id, "queued", "not sent: the database connection failed") for row in sender.starting]
        if sender.pending or unsent:
            ctx.unrecorded.append((token, sender.pending + unsent))
        await sender.close()
