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

from actors import failover, recorder
from actors.batch import Batch
from actors.claimer import Claimer
from actors.feed import Feed
from actors.sections import PipelineConfig
from actors.sender import Sender
from actors.wires import Fencing, Journal, MessageNotices, Replication, SmtpReach, Suppressions, Unrecorded, Wakeups
from actors.writer import Recording, record
from service import db
from service.metrics import Metrics


async def record_unrecorded(conn: asyncpg.Connection, recording: Recording, unrecorded: Unrecorded) -> None:
    """Answers a failed incarnation got but could not record (the database went away) are recorded
    under its own token, before what is left of its rows is returned as a dead node's."""
    while unrecorded.held:
        token, outcomes = unrecorded.held[0]
        await record(conn, recording, outcomes, token)  # no next row
        unrecorded.held.pop(0)


class SendPipeline:
    """Writes the fencing token (a new one at each restart) and the unrecorded answers; its sender writes the
    journal and the SMTP reach; with the replication check it writes the replication wire."""

    def __init__(
        self,
        config: PipelineConfig,
        pool: asyncpg.Pool,
        fencing: Fencing,
        unrecorded: Unrecorded,
        journal: Journal,
        replication: Replication,
        suppressions: Suppressions,
        notices: MessageNotices,
        reach: SmtpReach,
        wakeups: Wakeups,
        stopping: anyio.Event,
        metrics: Metrics,
    ) -> None:
        self.config, self.pool, self.fencing, self.unrecorded = config, pool, fencing, unrecorded
        self.journal, self.replication, self.suppressions, self.notices = journal, replication, suppressions, notices
        self.reach, self.wakeups, self.stopping, self.metrics = reach, wakeups, stopping, metrics
        self.recording = Recording(config.sender.pauses, journal, metrics)
        self.used = False  # the current token has claimed, or may have
        self.drained = anyio.Event()

    def claimer(self, token: str, feed: Feed) -> Claimer:
        return Claimer(
            self.config.claimer,
            self.pool,
            self.notices,
            self.replication,
            self.wakeups,
            self.stopping,
            self.metrics,
            token,
            feed,
        )

    def sender(self, token: str, feed: Feed) -> Sender:
        return Sender(
            self.config.sender,
            self.pool,
            self.suppressions,
            self.reach,
            self.journal,
            self.unrecorded,
            self.wakeups,
            self.stopping,
            self.metrics,
            token,
            feed,
        )

    async def start(self, token: str) -> None:
        """Before the claim: the token's node row, the replication check (after a failover, the journal written
        again), the answers a failed incarnation held, its rows returned, and the failover barrier."""
        config, fencing = self.config, self.fencing
        async with db.actor_connection(self.pool, "pipeline", token, config.db_timeout_seconds) as conn:
            # the token's node row exists before it claims anything
            await conn.execute(*db.sql("node_heartbeat", token=token, hostname=fencing.hostname, pid=os.getpid()))
            self.used = True
            await failover.check_replication(self.replication, self.journal, conn)
            if self.replication.failover_due:  # before anything is recorded or claimed (docs/design.md#liveness)
                await failover.write_again(conn, self.replication, self.journal, self.unrecorded, self.metrics)
            await record_unrecorded(conn, self.recording, self.unrecorded)
            if fencing.retired:
                await conn.fetchrow(*config.rescue.query(fencing.retired))
                fencing.retired.clear()
            # after a failover, no claim before every live node's journal is written on the new primary
            # (docs/design.md#liveness)
            await failover.await_journals(conn, self.replication, [token], config.rescue.node_timeout_seconds)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if self.used:  # a start that failed before its heartbeat claimed nothing: its token is taken again
            self.fencing.new_token()
            self.used = False
        token = self.fencing.token
        self.metrics.rows_in_flight.set(0)  # a failed incarnation's rows were, or are now, given back
        await self.start(token)
        config = self.config
        feed = Feed(config.feed_low, dict(config.domain_connections))
        to_recorder, batches = anyio.create_memory_object_stream[Batch](8)
        failed: list[Exception] = []
        the_claimer, the_sender = self.claimer(token, feed), self.sender(token, feed)

        async def claim(*, task_status: TaskStatus[None]) -> None:
            task_status.started()
            try:
                await the_claimer.run()
            except Exception as exc:  # its own connection: no reason to cut the SMTP transactions under way
                failed.append(exc)
                feed.close()  # the connections finish the messages on the wire; the rest is released
            finally:
                feed.claimer_done.set()

        async with anyio.create_task_group() as tg:
            await tg.start(recorder.run, self.metrics, batches)
            await tg.start(the_sender.run, to_recorder)
            await tg.start(claim)
            task_status.started()
        if failed:
            raise failed[0]  # after the drain; the supervisor restarts the pipeline under a new token
        self.drained.set()  # reached only when the claimer stopped and the rest drained
