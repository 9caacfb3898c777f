"""The send pipeline (claimer -> sender -> recorder), one child of the node's supervisor.

It restarts as one unit under a fresh fencing token: the rows a failed
incarnation held are returned at once, exactly as those of a dead node
(claimed -> queued, sending -> in doubt), and nothing the old incarnation
might still hold can pass the claim fence.
"""

import os

import anyio
import asyncpg
from anyio.abc import TaskStatus

from actors import claimer, failover, recorder, sender
from actors.context import Batch, NodeContext
from actors.feed import Feed
from actors.writer import record
from service import db


async def record_unrecorded(ctx: NodeContext, conn: asyncpg.Connection) -> None:
    """Answers a failed incarnation got but could not record (the database went away) are recorded
    under its own token, before what is left of its rows is returned as a dead node's."""
    while ctx.unrecorded:
        token, outcomes = ctx.unrecorded[0]
        await record(conn, ctx, outcomes, token)  # no next row
        ctx.unrecorded.pop(0)


class SendPipeline:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.used = False  # the current token has claimed, or may have
        self.drained = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        ctx = self.ctx
        if self.used:  # a start that failed before its heartbeat claimed nothing: its token is taken again
            ctx.new_token()
            self.used = False
        token = ctx.token
        ctx.metrics.rows_in_flight.set(0)  # a failed incarnation's rows were, or are now, given back
        async with db.actor_connection(ctx.pool, "pipeline", token, ctx.settings.db_timeout_seconds) as conn:
            # the token's node row exists before it claims anything
            await conn.execute(*db.sql("node_heartbeat", token=token, hostname=ctx.hostname, pid=os.getpid()))
            self.used = True
            await failover.check_replication(ctx, conn)
            if ctx.failover_due:  # before anything is recorded or claimed on the new primary (docs/design.md#liveness)
                await failover.write_again(ctx, conn)
            await record_unrecorded(ctx, conn)
            if ctx.retired_tokens:
                await conn.fetchrow(
                    *db.sql(
                        "node_rescue",
                        node_timeout_seconds=ctx.settings.node_timeout_seconds,
                        in_doubt=ctx.settings.in_doubt,
                        dead_tokens=ctx.retired_tokens,
                        max_attempts=ctx.settings.max_attempts,
                    )
                )
                ctx.retired_tokens.clear()
            # after a failover, no claim before every live node's journal is written on the new primary
            # (docs/design.md#liveness)
            await failover.await_journals(ctx, conn, [token])
        settings = ctx.settings
        # the claimer is woken when fewer rows than this wait to be sent (docs/design.md#process)
        caps = {domain: limit.connections for domain, limit in ctx.domain_limits.items() if limit.connections}
        feed = Feed(max(settings.smtp_connections, settings.batch_size // 2), caps)
        to_recorder, batches = anyio.create_memory_object_stream[Batch](8)
        failed: list[Exception] = []

        async def claim(*, task_status: TaskStatus[None]) -> None:
            task_status.started()
            try:
                await claimer.run(ctx, token, feed)
            except Exception as exc:  # its own connection: no reason to cut the SMTP transactions under way
                failed.append(exc)
                feed.close()  # the connections finish the messages on the wire; the rest is released
            finally:
                feed.claimer_done.set()

        async with anyio.create_task_group() as tg:
            await tg.start(recorder.run, ctx, token, batches)
            await tg.start(sender.run, ctx, token, feed, to_recorder)
            await tg.start(claim)
            task_status.started()
        if failed:
            raise failed[0]  # after the drain; the supervisor restarts the pipeline under a new token
        self.drained.set()  # reached only when the claimer stopped and the rest drained
